package signatures

import (
	"errors"
	"fmt"
	"sync"
	"testing"
)

// The keyed HMACs of a verifier are reused from request to request and shared by goroutines:
// one verifier configured with two keys answers a mix of requests signed under either key,
// under a key it does not know, and tampered after signing, every answer as if it were the
// only request it ever saw.
func TestPooledHMACsCarryNothingBetweenRequests(t *testing.T) {
	for _, p := range []string{"box", "github", "stripe", "hmac", "shopify"} {
		t.Run(p, func(t *testing.T) {
			keys := testKeys(t, p)
			v, err := New(p, testConfig(p, keys[0].verify, keys[1].verify))
			if err != nil {
				t.Fatal(err)
			}
			type tc struct {
				r    *Request
				want error
			}
			var cases []tc
			for i, k := range keys {
				r := signed(t, p, k, t0)
				var want error
				if i == 2 {
					want = ErrNoMatch
				}
				cases = append(cases, tc{r, want})
				bad := signed(t, p, k, t0)
				bad.Body = append([]byte(nil), bad.Body...)
				bad.Body[len(bad.Body)/2] ^= 1
				cases = append(cases, tc{bad, ErrNoMatch})
			}
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for g := range 4 {
				wg.Go(func() {
					for i := range 200 {
						c := cases[(i+g)%len(cases)]
						if err := v.Verify(c.r, t0); !errors.Is(err, c.want) {
							errs <- fmt.Errorf("case %d: got %v, want %v", (i+g)%len(cases), err, c.want)
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}
