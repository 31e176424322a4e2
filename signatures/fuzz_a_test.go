package signatures

import (
	"net/http"
	"testing"
)

// FuzzBatchAHeaders: the new header forms — numbered headers (DocuSign), two signature headers
// (Box, with its fixed headers), timestamp-first lists (Recurly), base64url (Sanity), ISO dates
// without a zone (Orb), ms key=value lists with spaces (WorkOS), prefixed hex keys (Onfleet).
func FuzzBatchAHeaders(f *testing.F) {
	for _, s := range []string{"1773500966000,abcd,00", "t=1773500966000,v1=tLa470fx7qkLLEcMOcEUFuBbRSkGujyskxrNXcoh0N0", "v1=00 v1=zz",
		"2026-03-14T15:09:26.000", "t=1773500966000, v1=00", "====", ",,,", "6TfeAW3A1PASkgboxxA5yqHNKOwFyMWuEXny/FPD5hI=", "HMAC abc"} {
		f.Add(s, "2026-03-14T15:09:26.000")
	}
	f.Fuzz(func(t *testing.T, sig, ts string) {
		hdr := func(kv ...string) http.Header {
			h := http.Header{}
			for i := 0; i+1 < len(kv); i += 2 {
				h[kv[i]] = []string{kv[i+1]}
			}
			return h
		}
		cases := []struct {
			p string
			h http.Header
		}{
			{"docusign", hdr("X-Docusign-Signature-1", sig, "X-Docusign-Signature-2", ts)},
			{"box", hdr("Box-Signature-Primary", sig, "Box-Signature-Secondary", sig, "Box-Delivery-Timestamp", ts,
				"Box-Signature-Version", "1", "Box-Signature-Algorithm", "HmacSHA256")},
			{"recurly", hdr("Recurly-Signature", sig)},
			{"sanity", hdr("Sanity-Webhook-Signature", sig)},
			{"orb", hdr("X-Orb-Signature", sig, "X-Orb-Timestamp", ts)},
			{"workos", hdr("Workos-Signature", sig)},
			{"msteams", hdr("Authorization", sig)},
			{"airwallex", hdr("X-Signature", sig, "X-Timestamp", ts)},
		}
		for _, c := range cases {
			cfg := Config{Secrets: []string{"k"}}
			switch c.p {
			case "msteams":
				cfg.Secrets = []string{"a2V5"}
			}
			fuzzVerify(t, c.p, cfg, &Request{Header: c.h, Body: []byte("{}")})
		}
		fuzzVerify(t, "onfleet", Config{Secrets: []string{"6b6579"}}, &Request{Header: hdr("X-Onfleet-Signature", sig), Body: []byte(ts)})
	})
}

// FuzzRequestContext: Plivo V3's URL, query and form parsing; Mandrill's and Trello's form and URL
// signing; Contentful's signed-headers list.
func FuzzRequestContext(f *testing.F) {
	for _, s := range []string{"https://h/a?b=2&a=1", "https://h:8443/p", "http://[::1]/x?%zz", "::", "https://h/?a=1&a=2"} {
		f.Add(s, "CallUUID=1&Duration=3", "x-contentful-timestamp,x-contentful-signed-headers", "1773500966000")
	}
	f.Add("https://h/p", "%zz=%", ",,,,", "")
	f.Fuzz(func(t *testing.T, u, body, list, ts string) {
		cfg := Config{Secrets: []string{"k"}, URL: "https://hooks.example.com/hooks/src"}
		fuzzVerify(t, "plivo", cfg, &Request{Method: "POST", URL: u, Body: []byte(body),
			Header: http.Header{"X-Plivo-Signature-V3": {"bm9wZQ==," + ts}, "X-Plivo-Signature-V3-Nonce": {list}}})
		fuzzVerify(t, "mandrill", cfg, &Request{URL: u, Body: []byte(body), Header: http.Header{"X-Mandrill-Signature": {ts}}})
		fuzzVerify(t, "trello", cfg, &Request{URL: u, Body: []byte(body), Header: http.Header{"X-Trello-Webhook": {ts}}})
		fuzzVerify(t, "contentful", cfg, &Request{Method: "POST", URL: u, Body: []byte(body), Header: http.Header{
			"X-Contentful-Signature": {"00"}, "X-Contentful-Signed-Headers": {list}, "X-Contentful-Timestamp": {ts}}})
	})
}

// FuzzBatchAHandshakes: bodies, headers and queries that may or may not be handshakes.
func FuzzBatchAHandshakes(f *testing.F) {
	for _, s := range []string{`{"events":[],"entropy":"x"}`, `{"events":[ ]}`, `{"events":`, `{"verification_token":"t"}`,
		"webhook_id=12", "https://h/p?challengeCode=c&check=v", ""} {
		f.Add(s, "GET")
	}
	f.Fuzz(func(t *testing.T, s, method string) {
		cfg := Config{Secrets: []string{"6b6579"}, URL: "https://hooks.example.com/hooks/src"}
		r := &Request{Method: method, URL: s, Body: []byte(s), Header: http.Header{
			"X-Okta-Verification-Challenge": {s}, "X-Gcs-Webhooks-Endpoint-Verification": {s}, "Authorization": {s}}}
		for _, p := range []string{"xero", "okta", "worldline", "trello", "mandrill", "notion", "linkedin", "onfleet", "buildkite", "woocommerce"} {
			if _, handled, err := Handshake(p, cfg, r, t0); err != nil && (!handled || !sentinel(err)) {
				t.Fatalf("%s: %v %v", p, handled, err)
			}
		}
	})
}
