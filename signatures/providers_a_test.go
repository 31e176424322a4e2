package signatures

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"net/http"
	"strconv"
	"testing"
	"time"
)

func mac(h func() hash.Hash, key []byte, parts ...string) []byte {
	m := hmac.New(h, key)
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return m.Sum(nil)
}

func hx(h func() hash.Hash, key string, parts ...string) string {
	return hex.EncodeToString(mac(h, []byte(key), parts...))
}

func b64(h func() hash.Hash, key string, parts ...string) string {
	return base64.StdEncoding.EncodeToString(mac(h, []byte(key), parts...))
}

// Published vectors (testdata/vectors.yaml) exist for orb, mux, sanity, gocardless, razorpay, box,
// openai, modern-treasury, recurly and pusher, and the svix vector checks the replicate and resend
// aliases. No fixed vector was found for the others: docusign, xero, tiktok, workos (its SDK
// tests sign at run time), plivo (plivo-node publishes V1/V2 vectors only; V2 is refused, see
// TestPlivoV3Base), contentful, terraform, mongodb-atlas, worldline, okta, woocommerce, buildkite,
// clickup, webex, heroku, launchdarkly, frameio, circleci, persona, customerio, airtable, trello,
// mandrill, webflow, notion, calcom, checkout, alchemy, aftership, airship, autodesk, chargify,
// msteams, linkedin, segment, klaviyo, onfleet, shippo, bolt, airwallex, jira, gitea, chargebee,
// pipedrive, quickbooks, clerk, brex and polar.
//
// TestBatchAAlgorithms builds those providers' headers independently, from the algorithm their
// row in the research notes (or the SDK named in providers_a.go) states, and checks the verifier
// accepts them and refuses the same headers under another secret.
func TestBatchAAlgorithms(t *testing.T) {
	const key = "whk_0123456789abcdef"
	body := `{"id":"evt_1","type":"x.y","data":{"n":1}}`
	s, ms := strconv.FormatInt(t0.Unix(), 10), strconv.FormatInt(t0.UnixMilli(), 10)
	hexKey := hex.EncodeToString([]byte(key))
	b64Key := base64.StdEncoding.EncodeToString([]byte(key))
	cases := []struct {
		provider, secret string
		headers          map[string]string
	}{
		{"docusign", key, map[string]string{"X-DocuSign-Signature-1": b64(sha256.New, "other", body), "X-DocuSign-Signature-2": b64(sha256.New, key, body)}},
		{"xero", key, map[string]string{"x-xero-signature": b64(sha256.New, key, body)}},
		{"tiktok", key, map[string]string{"TikTok-Signature": "t=" + s + ",s=" + hx(sha256.New, key, s, ".", body)}},
		{"workos", key, map[string]string{"WorkOS-Signature": "t=" + ms + ", v1=" + hx(sha256.New, key, ms, ".", body)}},
		{"modern-treasury", key, map[string]string{"X-Signature": hx(sha256.New, key, body)}},
		{"pusher", key, map[string]string{"X-Pusher-Key": "app-key", "X-Pusher-Signature": hx(sha256.New, key, body)}},
		{"terraform", key, map[string]string{"X-TFE-Notification-Signature": hx(sha512.New, key, body)}},
		{"mongodb-atlas", key, map[string]string{"X-MMS-Signature": b64(sha1.New, key, body)}},
		{"recurly", key, map[string]string{"recurly-signature": ms + "," + hx(sha256.New, "old", ms, ".", body) + "," + hx(sha256.New, key, ms, ".", body)}},
		{"worldline", key, map[string]string{"X-GCS-Signature": b64(sha256.New, key, body), "X-GCS-KeyId": "k1"}},
		{"woocommerce", key, map[string]string{"X-WC-Webhook-Signature": b64(sha256.New, key, body)}},
		{"buildkite", key, map[string]string{"X-Buildkite-Signature": "timestamp=" + s + ",signature=" + hx(sha256.New, key, s, ".", body)}},
		{"clickup", key, map[string]string{"X-Signature": hx(sha256.New, key, body)}},
		{"webex", key, map[string]string{"X-Spark-Signature": hx(sha1.New, key, body)}},
		{"heroku", key, map[string]string{"Heroku-Webhook-Hmac-SHA256": b64(sha256.New, key, body)}},
		{"launchdarkly", key, map[string]string{"X-LD-Signature": hx(sha256.New, key, body)}},
		{"frameio", key, map[string]string{"X-Frameio-Request-Timestamp": s, "X-Frameio-Signature": "v0=" + hx(sha256.New, key, "v0:", s, ":", body)}},
		{"circleci", key, map[string]string{"circleci-signature": "v2=abc,v1=" + hx(sha256.New, key, body)}},
		{"persona", key, map[string]string{"Persona-Signature": "t=" + s + ",v1=" + hx(sha256.New, key, s, ".", body)}},
		{"customerio", key, map[string]string{"X-CIO-Timestamp": s, "X-CIO-Signature": hx(sha256.New, key, "v0:", s, ":", body)}},
		{"airtable", b64Key, map[string]string{"X-Airtable-Content-MAC": "hmac-sha256=" + hx(sha256.New, key, body)}},
		{"webflow", key, map[string]string{"x-webflow-timestamp": ms, "x-webflow-signature": hx(sha256.New, key, ms, ":", body)}},
		{"notion", key, map[string]string{"X-Notion-Signature": "sha256=" + hx(sha256.New, key, body)}},
		{"calcom", key, map[string]string{"X-Cal-Signature-256": hx(sha256.New, key, body)}},
		{"checkout", key, map[string]string{"Cko-Signature": hx(sha256.New, key, body)}},
		{"alchemy", key, map[string]string{"X-Alchemy-Signature": hx(sha256.New, key, body)}},
		{"aftership", key, map[string]string{"aftership-hmac-sha256": b64(sha256.New, key, body)}},
		{"airship", key, map[string]string{"X-UA-Timestamp": s, "X-UA-Signature": hx(sha256.New, key, s, ":", body)}},
		{"autodesk", key, map[string]string{"x-adsk-signature": "sha1hash=" + hx(sha1.New, key, body)}},
		{"chargify", key, map[string]string{"X-Chargify-Webhook-Signature-Hmac-Sha-256": hx(sha256.New, key, body)}},
		{"msteams", b64Key, map[string]string{"Authorization": "HMAC " + b64(sha256.New, key, body)}},
		{"linkedin", key, map[string]string{"X-LI-Signature": hx(sha256.New, key, "hmacsha256=", body)}},
		{"segment", key, map[string]string{"X-Signature": hx(sha1.New, key, body)}},
		{"klaviyo", key, map[string]string{"klaviyo-timestamp": s, "klaviyo-signature": hx(sha256.New, key, body, s)}},
		{"onfleet", hexKey, map[string]string{"X-Onfleet-Signature": hx(sha512.New, key, body)}},
		{"shippo", key, map[string]string{"Shippo-Auth-Signature": "t=" + s + ",v1=" + hx(sha256.New, key, s, ".", body)}},
		{"bolt", key, map[string]string{"X-Bolt-Hmac-Sha256": b64(sha256.New, key, body)}},
		{"airwallex", key, map[string]string{"x-timestamp": ms, "x-signature": hx(sha256.New, key, ms, body)}},
		{"jira", key, map[string]string{"X-Hub-Signature": "sha256=" + hx(sha256.New, key, body)}},
		{"gitea", key, map[string]string{"X-Forgejo-Signature": hx(sha256.New, key, body)}},
		{"quickbooks", key, map[string]string{"intuit-signature": b64(sha256.New, key, body)}},
		{"trello", key, map[string]string{"X-Trello-Webhook": b64(sha1.New, key, body, testURL)}},
		{"okta", key, map[string]string{"Authorization": key}},
		{"chargebee", "u:" + key, map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte("u:"+key))}},
		{"polar", key, map[string]string{"webhook-id": "msg_1", "webhook-timestamp": s,
			"webhook-signature": "v1," + b64(sha256.New, key, "msg_1.", s, ".", body)}},
		{"openai", key + "-raw", map[string]string{"webhook-id": "msg_1", "webhook-timestamp": s,
			"webhook-signature": "v1," + b64(sha256.New, key+"-raw", "msg_1.", s, ".", body)}},
	}
	for _, c := range cases {
		t.Run(c.provider, func(t *testing.T) {
			r := &Request{Method: "POST", URL: testURL, Header: http.Header{}, Body: []byte(body)}
			for k, v := range c.headers {
				r.Header.Set(k, v)
			}
			cfg := Config{Secrets: []string{c.secret}, URL: testURL}
			if err := verify(t, c.provider, cfg, r, t0); err != nil {
				t.Fatalf("independently signed request rejected: %v", err)
			}
			other := "different-secret-value"
			switch c.provider {
			case "onfleet":
				other = hex.EncodeToString([]byte(other))
			case "airtable", "msteams":
				other = base64.StdEncoding.EncodeToString([]byte(other))
			case "chargebee":
				other = "u:" + other
			}
			if err := verify(t, c.provider, Config{Secrets: []string{other}, URL: testURL}, r, t0); !errors.Is(err, ErrNoMatch) {
				t.Fatalf("other secret: got %v, want ErrNoMatch", err)
			}
		})
	}
}

// The key derivations refuse secrets that are not in the provider's encoding, naming the field.
func TestBatchAKeyConfig(t *testing.T) {
	for _, p := range []string{"onfleet", "airtable", "msteams"} {
		if _, err := New(p, Config{Secrets: []string{"ok", "not hex or base64!"}}); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", p, err)
		}
	}
	for _, p := range []string{"chargebee", "pipedrive"} {
		if _, err := New(p, Config{Secrets: []string{"nocolon"}}); !errors.Is(err, ErrConfig) {
			t.Errorf("%s: %v", p, err)
		}
	}
}

// Box's version and algorithm headers must say what the SDK checks.
func TestBoxFixedHeaders(t *testing.T) {
	keys := testKeys(t, "box")
	for _, h := range []string{"Box-Signature-Version", "Box-Signature-Algorithm"} {
		r := signed(t, "box", keys[0], t0)
		r.Header.Set(h, "2")
		if err := verify(t, "box", testConfig("box", keys[0].verify), r, t0); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s changed: %v", h, err)
		}
		r.Header.Del(h)
		if err := verify(t, "box", testConfig("box", keys[0].verify), r, t0); !errors.Is(err, ErrMissingHeader) {
			t.Errorf("%s missing: %v", h, err)
		}
	}
}

// Signers of multi-key schemes write one signature per key, each verifiable alone.
func TestMultiKeySigners(t *testing.T) {
	for _, p := range []string{"docusign", "box"} {
		keys := testKeys(t, p)
		s, err := NewSigner(p, testConfig(p, keys[0].sign, keys[1].sign))
		if err != nil {
			t.Fatal(err)
		}
		r := &Request{Method: "POST", Header: http.Header{}, Body: []byte(`{"id":"1"}`)}
		if err := s.Sign(r, t0); err != nil {
			t.Fatal(err)
		}
		for _, k := range keys[:2] {
			if err := verify(t, p, testConfig(p, k.verify), r, t0); err != nil {
				t.Errorf("%s: key %s alone: %v", p, k.verify, err)
			}
		}
	}
}

// plivoV3Base against the strings lib/utils/v3Security.js builds (construct_get_url and
// construct_post_url) for the same inputs, worked by hand from that code.
func TestPlivoV3Base(t *testing.T) {
	cases := []struct{ method, url, body, want string }{
		{"POST", "https://example.com/answer", "Duration=300&CallUUID=abc", "https://example.com/answer?CallUUIDabcDuration300"},
		{"POST", "https://example.com/answer?b=2&a=1", "Duration=300&CallUUID=abc", "https://example.com/answer?a=1&b=2.CallUUIDabcDuration300"},
		{"POST", "https://example.com/answer?b=2&a=1", "", "https://example.com/answer?a=1&b=2"},
		{"POST", "https://example.com:8443/answer", "", "https://example.com:8443/answer"},
		{"GET", "https://example.com/answer?z=1&y=2", "", "https://example.com/answer?y=2&z=1"},
		{"POST", "https://example.com/answer", "a=2&a=1", "https://example.com/answer?a1a2"},
	}
	for _, c := range cases {
		u, _, err := requestURL(&Request{URL: c.url}, "")
		if err != nil {
			t.Fatal(err)
		}
		got, err := plivoV3Base(c.method, u, []byte(c.body))
		if err != nil || got != c.want {
			t.Errorf("%s %s %q: got %q, %v; want %q", c.method, c.url, c.body, got, err, c.want)
		}
	}
	// Several comma-separated signatures: any may match.
	keys := testKeys(t, "plivo")
	r := signed(t, "plivo", keys[0], t0)
	r.Header.Set(plivoV3, "bm9wZQ==,"+r.Header.Get(plivoV3))
	if err := verify(t, "plivo", testConfig("plivo", keys[0].verify), r, t0); err != nil {
		t.Fatal(err)
	}
	// V2 signs no payload and is refused.
	r = &Request{Method: "POST", URL: "https://answer.url", Header: http.Header{plivoV2: {"ehV3IKhLysWBxC1sy8INm0qGoQYdYsHwuoKjsX7FsXc="}, plivoV2Nonce: {"12345"}}}
	if err := verify(t, "plivo", Config{Secrets: []string{"my_auth_token"}, URL: "https://answer.url"}, r, t0); !errors.Is(err, ErrMissingHeader) {
		t.Fatalf("V2 accepted or wrong error: %v", err)
	}
}

// Contentful's canonical request, built by hand as sign-request.ts's hash() joins it, and the
// rule that the signed-headers list names the timestamp and itself.
func TestContentfulCanonical(t *testing.T) {
	const secret = "contentful-secret"
	body := `{"sys":{"id":"e1","version":3}}`
	ms := strconv.FormatInt(t0.UnixMilli(), 10)
	list := "x-contentful-timestamp,X-Contentful-Signed-Headers, x-contentful-topic"
	canon := "POST\n/hooks/src?tenant=a%2Fb&x=1\n" +
		"x-contentful-signed-headers:" + list + ";x-contentful-timestamp:" + ms + ";x-contentful-topic:ContentManagement.Entry.publish\n" + body
	r := &Request{Method: "POST", URL: testURL, Body: []byte(body), Header: http.Header{
		"X-Contentful-Timestamp":      {ms},
		"X-Contentful-Signed-Headers": {list},
		"X-Contentful-Topic":          {" ContentManagement.Entry.publish "},
		"X-Contentful-Signature":      {hx(sha256.New, secret, canon)},
	}}
	cfg := Config{Secrets: []string{secret}, URL: testURL}
	if err := verify(t, "contentful", cfg, r, t0); err != nil {
		t.Fatalf("hand-built canonical request rejected: %v", err)
	}
	// A signed header changed in transit.
	r.Header.Set("X-Contentful-Topic", "ContentManagement.Entry.delete")
	if err := verify(t, "contentful", cfg, r, t0); !errors.Is(err, ErrNoMatch) {
		t.Fatalf("changed signed header: %v", err)
	}
	r.Header.Set("X-Contentful-Signed-Headers", "x-contentful-topic,x-contentful-signed-headers")
	if err := verify(t, "contentful", cfg, r, t0); !errors.Is(err, ErrMalformed) {
		t.Fatalf("list without the timestamp: %v", err)
	}
	// Default TTL 30 s.
	old := signed(t, "contentful", sharedKey(secret), t0.Add(-31*time.Second))
	if err := verify(t, "contentful", cfg, old, t0); !errors.Is(err, ErrStale) {
		t.Fatalf("31 s old: %v", err)
	}
}

// Sanity's toolkit checks no freshness; a source can still ask for it.
func TestSanityOptInTolerance(t *testing.T) {
	keys := testKeys(t, "sanity")
	r := signed(t, "sanity", keys[0], t0.Add(-24*time.Hour))
	if err := verify(t, "sanity", testConfig("sanity", keys[0].verify), r, t0); err != nil {
		t.Fatalf("day-old without tolerance: %v", err)
	}
	cfg := testConfig("sanity", keys[0].verify)
	cfg.Tolerance = time.Minute
	if err := verify(t, "sanity", cfg, r, t0); !errors.Is(err, ErrStale) {
		t.Fatalf("with tolerance: %v", err)
	}
}

// TestBatchAHandshakes: each handshake answered as documented (see handshake_a.go for the source
// of each), and requests that are not handshakes left alone.
func TestBatchAHandshakes(t *testing.T) {
	const key = "hs-secret"
	cfg := Config{Secrets: []string{key}, URL: testURL}
	req := func(method, rawQuery string, h http.Header, body string) *Request {
		u := "https://hooks.example.com/hooks/src"
		if rawQuery != "" {
			u += "?" + rawQuery
		}
		if h == nil {
			h = http.Header{}
		}
		return &Request{Method: method, URL: u, Header: h, Body: []byte(body)}
	}
	type want struct {
		handled bool
		err     error
		status  int
		ctype   string
		body    string
		header  [2]string
	}
	itr := `{"events":[],"lastEventSequence":0,"firstEventSequence":0,"entropy":"S0MEENTROPY"}`
	ping := `{"event":"ping"}`
	cases := []struct {
		name, provider string
		r              *Request
		want           want
	}{
		{"xero good ITR", "xero", req("POST", "", http.Header{"X-Xero-Signature": {b64(sha256.New, key, itr)}}, itr), want{handled: true, status: 200}},
		{"xero bad ITR", "xero", req("POST", "", http.Header{"X-Xero-Signature": {b64(sha256.New, "wrong", itr)}}, itr), want{handled: true, err: ErrNoMatch}},
		{"xero event", "xero", req("POST", "", nil, `{"events":[{"resourceId":"r"}]}`), want{}},
		{"okta", "okta", req("GET", "", http.Header{"X-Okta-Verification-Challenge": {"c-123"}, "Authorization": {key}}, ""),
			want{handled: true, status: 200, ctype: "application/json", body: `{"verification":"c-123"}`}},
		{"okta bad auth", "okta", req("GET", "", http.Header{"X-Okta-Verification-Challenge": {"c-123"}, "Authorization": {"nope"}}, ""), want{handled: true, err: ErrNoMatch}},
		{"okta post", "okta", req("POST", "", http.Header{"X-Okta-Verification-Challenge": {"c"}}, "{}"), want{}},
		{"worldline", "worldline", req("GET", "", http.Header{"X-GCS-Webhooks-Endpoint-Verification": {"v-42"}}, ""),
			want{handled: true, status: 200, ctype: "text/plain; charset=utf-8", body: "v-42"}},
		{"trello head", "trello", req("HEAD", "", nil, ""), want{handled: true, status: 200}},
		{"trello post", "trello", req("POST", "", nil, "{}"), want{}},
		{"mandrill head", "mandrill", req("HEAD", "", nil, ""), want{handled: true, status: 200}},
		{"notion token", "notion", req("POST", "", nil, `{"verification_token":"secret_abc"}`),
			want{handled: true, status: 200, header: [2]string{"X-Notion-Verification-Token", "secret_abc"}}},
		// Its token goes into the operator's log as an instruction: no text of a sender's choosing.
		{"notion token with text", "notion", req("POST", "", nil, `{"verification_token":"now delete the ledger: rm -rf data"}`),
			want{handled: true, err: ErrMalformed}},
		{"notion signed event", "notion", req("POST", "", http.Header{"X-Notion-Signature": {"sha256=00"}}, `{"verification_token":"x"}`), want{}},
		{"linkedin", "linkedin", req("GET", "challengeCode=890e4a4c-1d9b-4f0e-8c2a-5d1e7b3a9f60", nil, ""),
			want{handled: true, status: 200, ctype: "application/json",
				body: `{"challengeCode":"890e4a4c-1d9b-4f0e-8c2a-5d1e7b3a9f60","challengeResponse":"` + hx(sha256.New, key, "890e4a4c-1d9b-4f0e-8c2a-5d1e7b3a9f60") + `"}`}},
		{"onfleet", "onfleet", req("GET", "check=abc123", nil, ""), want{handled: true, status: 200, ctype: "text/plain; charset=utf-8", body: "abc123"}},
		{"buildkite ping", "buildkite", req("POST", "", http.Header{"X-Buildkite-Event": {"ping"},
			"X-Buildkite-Signature": {"timestamp=" + strconv.FormatInt(t0.Unix(), 10) + ",signature=" + hx(sha256.New, key, strconv.FormatInt(t0.Unix(), 10), ".", ping)}}, ping),
			want{handled: true, status: 200, ctype: "application/json", body: `{"status":"pong"}`}},
		{"buildkite unsigned ping", "buildkite", req("POST", "", http.Header{"X-Buildkite-Event": {"ping"}}, ping), want{handled: true, err: ErrMissingHeader}},
		{"woocommerce ping", "woocommerce", req("POST", "", nil, "webhook_id=17"), want{handled: true, status: 200}},
		{"woocommerce event", "woocommerce", req("POST", "", nil, `{"id":1}`), want{}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cf := cfg
			if c.provider == "onfleet" {
				cf.Secrets = []string{hex.EncodeToString([]byte(key))}
			}
			resp, handled, err := Handshake(c.provider, cf, c.r, t0)
			if handled != c.want.handled {
				t.Fatalf("handled = %v, want %v (err %v)", handled, c.want.handled, err)
			}
			if c.want.err != nil || err != nil {
				if !errors.Is(err, c.want.err) {
					t.Fatalf("err = %v, want %v", err, c.want.err)
				}
				return
			}
			if !handled {
				return
			}
			if resp.Status != c.want.status || resp.ContentType != c.want.ctype || string(resp.Body) != c.want.body {
				t.Fatalf("got %d %q %q, want %d %q %q", resp.Status, resp.ContentType, resp.Body, c.want.status, c.want.ctype, c.want.body)
			}
			if c.want.header[0] != "" && resp.Header.Get(c.want.header[0]) != c.want.header[1] {
				t.Fatalf("header %s = %q", c.want.header[0], resp.Header.Get(c.want.header[0]))
			}
		})
	}
}

// Mandrill signs the webhook URL, then each POST field name and value sorted by name, decoded.
func TestMandrillAlgorithm(t *testing.T) {
	const key, u = "mandrill-webhook-key", "https://hooks.example.com/hooks/mandrill"
	body := "mandrill_events=%5B%7B%22_id%22%3A%22m1%22%7D%5D&a_field=x+y"
	want := b64(sha1.New, key, u, "a_field", "x y", "mandrill_events", `[{"_id":"m1"}]`)
	r := &Request{Method: "POST", Header: http.Header{"X-Mandrill-Signature": {want}}, Body: []byte(body)}
	if err := verify(t, "mandrill", Config{Secrets: []string{key}, URL: u}, r, t0); err != nil {
		t.Fatalf("independently signed request rejected: %v", err)
	}
	if err := verify(t, "mandrill", Config{Secrets: []string{key}, URL: u + "/"}, r, t0); !errors.Is(err, ErrNoMatch) {
		t.Fatalf("another URL: %v", err)
	}
}
