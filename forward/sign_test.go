package forward

import (
	"encoding/base64"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	svix "github.com/svix/svix-webhooks/go"
)

// TestSignerMatchesSvix: the pooled signer writes svix's Sign value for
// random secrets (with and without whsec_), ids, times and bodies, and
// refuses the secrets svix refuses.
func TestSignerMatchesSvix(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	for i := range 2000 {
		key := make([]byte, 1+rng.IntN(64))
		for j := range key {
			key[j] = byte(rng.IntN(256))
		}
		secret := base64.StdEncoding.EncodeToString(key)
		if i%2 == 0 {
			secret = "whsec_" + secret
		}
		body := make([]byte, rng.IntN(3000))
		for j := range body {
			body[j] = byte(rng.IntN(256))
		}
		id := []string{"", "run_1", "msg_2ZQ0c1xKpWc8", "idem-" + string(rune('a'+i%26))}[i%4]
		ts := time.Unix(rng.Int64N(4e9)-1e9, rng.Int64N(1e9))
		wh, err := svix.NewWebhook(secret)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := wh.Sign(id, ts, body)
		s, err := newSigner(secret)
		if err != nil {
			t.Fatal(err)
		}
		for range 2 { // the second time from the pool
			if got := s.sign(id, ts, body); got != want {
				t.Fatalf("secret %q id %q ts %d body %d bytes: got %s, svix %s", secret, id, ts.Unix(), len(body), got, want)
			}
		}
	}
	for _, bad := range []string{"whsec_!!!", "not base64", "whsec_QUFB=A"} {
		_, serr := svix.NewWebhook(bad)
		_, err := newSigner(bad)
		if (serr == nil) != (err == nil) {
			t.Errorf("secret %q: svix says %v, newSigner says %v", bad, serr, err)
		}
	}
}

// TestSignersConcurrent signs from many goroutines with two secrets: a
// pooled HMAC is never shared between two signatures at once.
func TestSignersConcurrent(t *testing.T) {
	var ss signers
	secrets := []string{"whsec_" + base64.StdEncoding.EncodeToString([]byte("first secret")), base64.StdEncoding.EncodeToString([]byte("second"))}
	ts := time.Unix(1_800_000_000, 0)
	var wg sync.WaitGroup
	for g := range 16 {
		wg.Go(func() {
			for i := range 300 {
				secret := secrets[(g+i)%2]
				body := []byte(string(rune('a'+i%26)) + "body")
				s, err := ss.get(secret)
				if err != nil {
					t.Error(err)
					return
				}
				wh, _ := svix.NewWebhook(secret)
				want, _ := wh.Sign("id", ts, body)
				if got := s.sign("id", ts, body); got != want {
					t.Errorf("got %s, want %s", got, want)
					return
				}
			}
		})
	}
	wg.Wait()
}
