package signatures

import (
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// pinWatch is a transport that never reaches the network and records which hosts were asked
// for, so fuzz targets can assert the fetcher's promise: no request ever leaves the pinned hosts.
type pinWatch struct {
	mu    sync.Mutex
	hosts []string
}

func (p *pinWatch) RoundTrip(r *http.Request) (*http.Response, error) {
	p.mu.Lock()
	p.hosts = append(p.hosts, r.URL.Scheme+"://"+r.URL.Host)
	p.mu.Unlock()
	return nil, errors.New("offline")
}

func (p *pinWatch) check(t *testing.T, allowed func(host string) bool) {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, h := range p.hosts {
		u, err := url.Parse(h)
		if err != nil || u.Scheme != "https" || !allowed(u.Hostname()) || (u.Port() != "" && u.Port() != "443") {
			t.Fatalf("request left the pinned hosts: %s", h)
		}
	}
}

func offlineFetcher() (*Fetcher, *pinWatch) {
	w := &pinWatch{}
	return NewFetcher(FetcherOptions{Client: &http.Client{Transport: w}}), w
}

// FuzzSNSMessage: arbitrary SNS bodies, verified and offered as handshakes.
func FuzzSNSMessage(f *testing.F) {
	for _, s := range []string{
		`{"Type":"Notification","MessageId":"m","TopicArn":"arn:aws:sns:us-east-1:123456789012:t","Message":"x","Timestamp":"2026-03-14T15:09:26Z","SignatureVersion":"2","Signature":"AAAA","SigningCertURL":"https://sns.us-east-1.amazonaws.com/a.pem"}`,
		`{"Type":"SubscriptionConfirmation","MessageId":"m","Token":"t","TopicArn":"arn:aws:sns:us-east-1:123456789012:t","Message":"x","SubscribeURL":"https://evil.example.com/?Action=ConfirmSubscription","Timestamp":"2026-03-14T15:09:26Z","SignatureVersion":"1","Signature":"AAAA","SigningCertURL":"https://sns.us-east-1.amazonaws.com@evil/a.pem"}`,
		`{"Type":"Notification","Subject":null,"Signature":"","SigningCertURL":"http://x"}`, `[]`, `{"Type":1}`, ``,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		fetch, w := offlineFetcher()
		cfg := Config{Secrets: []string{"*"}, Fetcher: fetch}
		fuzzVerify(t, "sns", cfg, &Request{Body: []byte(body)})
		if _, _, err := Handshake("sns", cfg, &Request{Method: http.MethodPost, Body: []byte(body)}, t0); err != nil && !sentinel(err) {
			t.Fatalf("handshake: %v", err)
		}
		w.check(t, snsHost.MatchString)
	})
}

// FuzzCertificateBundle: arbitrary bytes where a PEM bundle is expected.
func FuzzCertificateBundle(f *testing.F) {
	f.Add([]byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"))
	f.Add([]byte("-----BEGIN CERTIFICATE-----\n-----END CERTIFICATE-----\n-----BEGIN PRIVATE KEY-----\nAA==\n-----END PRIVATE KEY-----\n"))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		fetch, _ := offlineFetcher()
		if c, err := fetch.verifyChain(b, nil, t0); err == nil || c != nil {
			t.Fatalf("arbitrary bytes verified as a certificate chain: %v", c)
		}
	})
}

// FuzzFetchedHeaders: PayPal's headers, the certificate URL above all.
func FuzzFetchedHeaders(f *testing.F) {
	for _, u := range []string{"https://api.paypal.com/v1/notifications/certs/CERT-1", "https://api.paypal.com:444/v1/notifications/certs/x",
		"https://api.paypal.com.evil/v1/notifications/certs/x", "https://api.paypal.com/v1/notifications/certs/../../oauth2", "https://[::1]/"} {
		f.Add(u, "AAAA", "SHA256withRSA", "2026-03-14T15:09:26Z")
	}
	f.Fuzz(func(t *testing.T, certURL, sig, algo, ts string) {
		fetch, w := offlineFetcher()
		h := http.Header{}
		for k, v := range map[string]string{paypalCertURL: certURL, paypalSig: sig, paypalAlgo: algo, paypalTime: ts, paypalID: "id"} {
			h[http.CanonicalHeaderKey(k)] = []string{v}
		}
		fuzzVerify(t, "paypal", Config{Secrets: []string{"WH"}, Fetcher: fetch}, &Request{Header: h, Body: []byte("{}")})
		w.check(t, func(host string) bool {
			for _, p := range paypalHosts {
				if host == p {
					return true
				}
			}
			return false
		})
	})
}

// FuzzJWT: compact tokens for the three JWT schemes (Plaid's key lookup stays on its hosts).
func FuzzJWT(f *testing.F) {
	for _, s := range []string{
		"eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJpYXQiOjE3NzM1MDA5NjZ9.AAAA",
		"eyJhbGciOiJub25lIn0.eyJpYXQiOjF9.",
		"eyJhbGciOiJFUzI1NiIsImtpZCI6Ii4uLy4uL2V2aWwifQ.eyJpYXQiOjF9.AAAA",
		"Bearer a.b.c", "...", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, tok string) {
		fuzzVerify(t, "vonage", Config{Secrets: []string{"k"}}, &Request{Header: http.Header{"Authorization": {tok}}, Body: []byte("{}")})
		fuzzVerify(t, "monday", Config{Secrets: []string{"k"}, URL: "https://h/m"}, &Request{Header: http.Header{"Authorization": {tok}}, Body: []byte("{}")})
		fetch, w := offlineFetcher()
		fuzzVerify(t, "plaid", Config{Secrets: []string{"c:s"}, Fetcher: fetch}, &Request{Header: http.Header{plaidHeader: {tok}}, Body: []byte("{}")})
		w.check(t, func(h string) bool { return h == "production.plaid.com" })
	})
}

// FuzzEmbeddedSignature: bodies carrying their own signatures (Adyen items, Braintree forms),
// and Telnyx's header pair.
func FuzzEmbeddedSignature(f *testing.F) {
	f.Add(adyenTwoItems, "abc")
	f.Add(`{"notificationItems":[{"NotificationRequestItem":{"additionalData":{"hmacSignature":"AAAA"},"amount":{"value":1e99}}}]}`, "1773500966")
	f.Add("bt_signature=pub%7C00&bt_payload=PG5vdGlmaWNhdGlvbj4%3D", "x")
	f.Add("bt_signature=a|b&b|c&bt_payload=20f9f8ed05f77439fe955c977e4c8a53", "")
	f.Fuzz(func(t *testing.T, body, hdr string) {
		fuzzVerify(t, "adyen", Config{Secrets: []string{"00ff"}}, &Request{Body: []byte(body)})
		fuzzVerify(t, "adyen", Config{Secrets: []string{"00ff"}}, &Request{Header: http.Header{adyenHeader: {hdr}}, Body: []byte(body)})
		fuzzVerify(t, "braintree", Config{Secrets: []string{"pub:priv"}}, &Request{Body: []byte(body)})
		fuzzVerify(t, "telnyx", Config{Secrets: []string{"11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo="}},
			&Request{Header: http.Header{telnyxSig: {hdr}, telnyxTS: {strings.TrimSpace(body)}}, Body: []byte(body)})
		q := "bt_challenge=" + url.QueryEscape(hdr)
		if _, _, err := Handshake("braintree", Config{Secrets: []string{"pub:priv"}}, &Request{Method: http.MethodGet, URL: "https://h/x?" + q}, t0); err != nil && !sentinel(err) {
			t.Fatal(err)
		}
	})
}
