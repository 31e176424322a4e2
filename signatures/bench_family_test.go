package signatures

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
)

func familyBenchBody(provider string, n int) []byte {
	pad := strings.Repeat("a", max(0, n-200))
	switch provider {
	case "braintree":
		return []byte(`<notification><kind>check</kind><pad>` + pad + `</pad></notification>`)
	case "adyen":
		return []byte(`{"live":"false","notificationItems":[{"NotificationRequestItem":{"amount":{"currency":"EUR","value":1130},` +
			`"eventCode":"AUTHORISATION","merchantAccountCode":"Shop","merchantReference":"r","pspReference":"7914073381342284",` +
			`"reason":"` + pad + `","success":"true"}}]}`)
	}
	return nil
}

// BenchmarkFamilyWarm measures the certificate and key-fetching schemes with a warm cache: the
// certificate or key was fetched once before timing, so this is parsing, the cache lookup and
// the public-key verification. The HMAC baseline (BenchmarkBareHMAC) is in bench_test.go.
func BenchmarkFamilyWarm(b *testing.B) {
	e := newPKIEnv(b)
	key := testRSAKey(b, 2)
	certURL := e.signingCert(b, "sns.us-east-1.amazonaws.com/SimpleNotificationService-bench.pem", key)
	ppURL := e.signingCert(b, "api.paypal.com/v1/notifications/certs/CERT-bench", key)
	pk := plaidServer(b, e, "production.plaid.com")
	pkey := pk.add("kid-bench")
	f := e.fetcher(FetcherOptions{})
	for _, n := range benchSizes {
		pad := strings.Repeat("a", n)
		snsMsg := func(v string) *Request {
			m := snsNotification(certURL)
			m["Message"] = pad
			return &Request{Body: snsSign(b, key, v, m)}
		}
		body := []byte(`{"id":"WH-1","pad":"` + pad + `"}`)
		cases := []struct {
			name string
			prov string
			cfg  Config
			r    *Request
		}{
			{"sns-v1", "sns", Config{Secrets: []string{snsTopic}, Fetcher: f}, snsMsg("1")},
			{"sns-v2", "sns", Config{Secrets: []string{snsTopic}, Fetcher: f}, snsMsg("2")},
			{"paypal", "paypal", Config{Secrets: []string{paypalWebhookID}, Fetcher: f}, paypalSigned(b, key, ppURL, paypalWebhookID, body, t0)},
			{"plaid", "plaid", Config{Secrets: []string{"c:s"}, Fetcher: f},
				&Request{Header: http.Header{plaidHeader: {plaidToken(b, pkey, "kid-bench", body, t0)}}, Body: body}},
		}
		for _, c := range cases {
			b.Run(fmt.Sprintf("%s/%dKiB", c.name, n>>10), func(b *testing.B) {
				v, err := New(c.prov, c.cfg)
				if err != nil {
					b.Fatal(err)
				}
				if err := v.Verify(c.r, t0); err != nil { // warms the cache
					b.Fatal(err)
				}
				before := len(e.tr.seen())
				b.SetBytes(int64(len(c.r.Body)))
				b.ReportAllocs()
				for b.Loop() {
					if err := v.Verify(c.r, t0); err != nil {
						b.Fatal(err)
					}
				}
				if len(e.tr.seen()) != before {
					b.Fatal("fetched during the timed loop")
				}
			})
		}
	}
}
