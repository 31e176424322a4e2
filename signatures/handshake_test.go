package signatures

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"testing"
)

// signedHandshake signs body for provider and sets extra headers before signing.
func signedHandshake(t *testing.T, provider string, key keyPair, body string, hdr map[string]string) *Request {
	t.Helper()
	s, err := NewSigner(provider, testConfig(provider, key.sign))
	if err != nil {
		t.Fatal(err)
	}
	r := &Request{Method: http.MethodPost, Header: http.Header{}, Body: []byte(body)}
	for k, v := range hdr {
		r.Header.Set(k, v)
	}
	if err := s.Sign(r, t0); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSignedHandshakes(t *testing.T) {
	cases := []struct {
		provider string
		body     string
		hdr      map[string]string
		ctype    string
		check    func(t *testing.T, key keyPair, b []byte)
	}{
		{"slack", `{"token":"x","challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P","type":"url_verification"}`, nil, "application/json",
			func(t *testing.T, _ keyPair, b []byte) {
				if string(b) != `{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}` {
					t.Errorf("body %s", b)
				}
			}},
		{"zoom", `{"payload":{"plainToken":"qgg8vlvZRS6UYooatFL8Aw"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`, nil, "application/json",
			func(t *testing.T, key keyPair, b []byte) {
				m := hmac.New(sha256.New, []byte(key.verify))
				m.Write([]byte("qgg8vlvZRS6UYooatFL8Aw"))
				var got map[string]string
				_ = json.Unmarshal(b, &got)
				if got["plainToken"] != "qgg8vlvZRS6UYooatFL8Aw" || got["encryptedToken"] != hex.EncodeToString(m.Sum(nil)) {
					t.Errorf("body %s", b)
				}
			}},
		{"twitch", `{"challenge":"pogchamp-kappa-360noscope-vohiyo","subscription":{"type":"channel.follow"}}`,
			map[string]string{"Twitch-Eventsub-Message-Type": "webhook_callback_verification"}, "text/plain; charset=utf-8",
			func(t *testing.T, _ keyPair, b []byte) {
				if string(b) != "pogchamp-kappa-360noscope-vohiyo" {
					t.Errorf("body %s", b)
				}
			}},
		{"discord", `{"type":1,"id":"1","application_id":"2"}`, nil, "application/json",
			func(t *testing.T, _ keyPair, b []byte) {
				if string(b) != `{"type":1}` {
					t.Errorf("body %s", b)
				}
			}},
		{"github", `{"zen":"Keep it logically awesome.","hook_id":1}`, map[string]string{"X-GitHub-Event": "ping"}, "application/json", nil},
		{"intercom", `{"type":"notification_event","topic":"ping","id":"notif_1"}`, nil, "application/json", nil},
		{"front", `{}`, map[string]string{"X-Front-Challenge": "ch-123"}, "text/plain; charset=utf-8",
			func(t *testing.T, _ keyPair, b []byte) {
				if string(b) != "ch-123" {
					t.Errorf("body %s", b)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.provider, func(t *testing.T) {
			keys := testKeys(t, c.provider)
			r := signedHandshake(t, c.provider, keys[0], c.body, c.hdr)
			cfg := testConfig(c.provider, keys[1].verify, keys[0].verify) // the matching key second
			resp, handled, err := Handshake(c.provider, cfg, r, t0)
			if err != nil || !handled || resp.Status != 200 || resp.ContentType != c.ctype {
				t.Fatalf("Handshake = %+v, %v, %v", resp, handled, err)
			}
			if c.check != nil {
				c.check(t, keys[0], resp.Body)
			}
			// Badly signed: handled, with the verification error (the gateway answers 401).
			bad := testConfig(c.provider, keys[1].verify)
			if _, handled, err := Handshake(c.provider, bad, r, t0); !handled || !errors.Is(err, ErrNoMatch) {
				t.Fatalf("bad signature: handled=%v err=%v", handled, err)
			}
			// Unsigned: handled, rejected.
			r.Header = http.Header{}
			for k, v := range c.hdr {
				r.Header.Set(k, v)
			}
			if _, handled, err := Handshake(c.provider, cfg, r, t0); !handled || !errors.Is(err, ErrMissingHeader) {
				t.Fatalf("unsigned: handled=%v err=%v", handled, err)
			}
			// An ordinary event is not a handshake.
			ev := signedHandshake(t, c.provider, keys[0], `{"type":"event_callback","event":"x","id":"e"}`, nil)
			if _, handled, err := Handshake(c.provider, cfg, ev, t0); handled || err != nil {
				t.Fatalf("ordinary event: handled=%v err=%v", handled, err)
			}
		})
	}
}

func TestQueryHandshakes(t *testing.T) {
	get := func(method, q string) *Request {
		return &Request{Method: method, URL: "https://hooks.example.com/hooks/src?" + q, Header: http.Header{}}
	}
	cfg := Config{Secrets: []string{"consumer-secret"}, VerifyToken: "vt-123"}

	// Meta
	resp, ok, err := Handshake("meta", cfg, get("GET", "hub.mode=subscribe&hub.verify_token=vt-123&hub.challenge=1158201444"), t0)
	if err != nil || !ok || string(resp.Body) != "1158201444" {
		t.Fatalf("meta: %+v %v %v", resp, ok, err)
	}
	if _, ok, err := Handshake("meta", cfg, get("GET", "hub.mode=subscribe&hub.verify_token=nope&hub.challenge=1"), t0); !ok || !errors.Is(err, ErrNoMatch) {
		t.Fatalf("meta wrong token: %v %v", ok, err)
	}
	if _, ok, err := Handshake("meta", Config{Secrets: []string{"s"}}, get("GET", "hub.mode=subscribe&hub.verify_token=&hub.challenge=1"), t0); !ok || !errors.Is(err, ErrConfig) {
		t.Fatalf("meta without verify token configured: %v %v", ok, err)
	}
	if _, ok, _ := Handshake("meta", cfg, &Request{Method: "POST", Body: []byte(`{}`)}, t0); ok {
		t.Fatal("meta POST taken as handshake")
	}

	// Nylas, Dropbox (GET ?challenge=), Microsoft Graph (POST ?validationToken=)
	for _, c := range []struct{ provider, method, q, want string }{
		{"nylas", "GET", "challenge=abc%20def", "abc def"},
		{"dropbox", "GET", "challenge=xyz", "xyz"},
		{"msgraph", "POST", "validationToken=Validation%3A+Testing+client+application+reachability", "Validation: Testing client application reachability"},
	} {
		resp, ok, err := Handshake(c.provider, cfg, get(c.method, c.q), t0)
		if err != nil || !ok || string(resp.Body) != c.want || resp.ContentType != "text/plain; charset=utf-8" ||
			resp.Header.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("%s: %+v %v %v", c.provider, resp, ok, err)
		}
		if _, ok, _ := Handshake(c.provider, cfg, get(c.method, "other=1"), t0); ok {
			t.Errorf("%s: request without the parameter taken as handshake", c.provider)
		}
	}

	// X CRC
	resp, ok, err = Handshake("x", cfg, get("GET", "crc_token="+url.QueryEscape("token+/=")), t0)
	m := hmac.New(sha256.New, []byte("consumer-secret"))
	m.Write([]byte("token+/="))
	want, _ := json.Marshal(map[string]string{"response_token": "sha256=" + base64.StdEncoding.EncodeToString(m.Sum(nil))})
	if err != nil || !ok || string(resp.Body) != string(want) || resp.ContentType != "application/json" {
		t.Fatalf("x: %+v %v %v", resp, ok, err)
	}

	// Asana
	r := &Request{Method: "POST", Header: http.Header{"X-Hook-Secret": {"hs-1"}}}
	resp, ok, err = Handshake("asana", cfg, r, t0)
	if err != nil || !ok || resp.Header.Get("X-Hook-Secret") != "hs-1" || resp.Status != 200 {
		t.Fatalf("asana: %+v %v %v", resp, ok, err)
	}

	// Oversized challenges are not echoed.
	long := make([]byte, maxChallenge+1)
	for i := range long {
		long[i] = 'a'
	}
	if _, ok, err := Handshake("dropbox", cfg, get("GET", "challenge="+string(long)), t0); !ok || !errors.Is(err, ErrMalformed) {
		t.Fatalf("long challenge: %v %v", ok, err)
	}

	// Providers without a handshake never claim one.
	for _, p := range []string{"stripe", "shopify", "hmac"} {
		if _, ok, err := Handshake(p, cfg, get("GET", "challenge=1&hub.mode=subscribe"), t0); ok || err != nil {
			t.Errorf("%s: %v %v", p, ok, err)
		}
	}
	for _, p := range Providers() {
		info, _ := Lookup(p)
		want := map[string]bool{"slack": true, "zoom": true, "twitch": true, "discord": true, "github": true, "intercom": true,
			"front": true, "meta": true, "nylas": true, "dropbox": true, "msgraph": true, "x": true, "asana": true,
			"xero": true, "okta": true, "worldline": true, "trello": true, "mandrill": true, "notion": true, "linkedin": true,
			"onfleet": true, "buildkite": true, "woocommerce": true}[p] || familyHandshakes[p]
		if info.Handshake != want {
			t.Errorf("%s: Handshake=%v", p, info.Handshake)
		}
	}
}

// The handshakes that answer with a MAC under the source's key take only challenges of the
// provider's own form, and name the field they refused.
func TestMACHandshakesTakeOnlyTheirTokens(t *testing.T) {
	get := func(q string) *Request {
		return &Request{Method: http.MethodGet, URL: "https://hooks.example.com/hooks/src?" + q, Header: http.Header{}}
	}
	cfg := Config{Secrets: []string{"consumer-secret"}}
	for _, c := range []struct {
		provider, q, field string
		ok                 bool
	}{
		{"x", "crc_token=M2RkODJkZmMtYjlkYi00NmQ4LTk0MGUtM2JjYzkwM2Q4MjQ0", "", true},
		{"x", "crc_token=" + url.QueryEscape(`{"tweet_create_events":[{"id_str":"1"}]}`), "crc_token", false},
		{"x", "crc_token=" + url.QueryEscape("a b"), "crc_token", false},
		{"linkedin", "challengeCode=890e4665-4dfe-4ab1-b689-ed553bceeed7", "", true},
		{"linkedin", "challengeCode=" + url.QueryEscape(`hmacsha256={"a":1}`), "challengeCode", false},
		{"linkedin", "challengeCode=890e4665", "challengeCode", false},
	} {
		resp, handled, err := Handshake(c.provider, cfg, get(c.q), t0)
		if !handled {
			t.Errorf("%s %s: not handled", c.provider, c.q)
			continue
		}
		if c.ok {
			if err != nil || resp.Status != http.StatusOK {
				t.Errorf("%s %s: %+v %v", c.provider, c.q, resp, err)
			}
			continue
		}
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), c.field) || resp != nil {
			t.Errorf("%s %s: got %+v, %v; want ErrMalformed naming %s", c.provider, c.q, resp, err, c.field)
		}
	}

	// Zoom's plainToken: the request is signed, and still only a token is MACed.
	keys := testKeys(t, "zoom")
	zcfg := testConfig("zoom", keys[0].verify)
	r := signedHandshake(t, "zoom", keys[0], `{"payload":{"plainToken":"v0:1:{}"},"event":"endpoint.url_validation"}`, nil)
	if _, handled, err := Handshake("zoom", zcfg, r, t0); !handled || !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), "plainToken") {
		t.Errorf("zoom plainToken with a colon: handled=%v err=%v", handled, err)
	}

	// An X body of the crc_token form is never an event, however it is signed: its signature is
	// what the CRC answer for that token would be.
	s, err := NewSigner("x", cfg)
	if err != nil {
		t.Fatal(err)
	}
	ev := &Request{Method: http.MethodPost, Header: http.Header{}, Body: []byte("M2RkODJkZmMtYjlkYi00NmQ4LTk0MGUtM2JjYzkwM2Q4MjQ0")}
	if err := s.Sign(ev, t0); err != nil {
		t.Fatal(err)
	}
	if err := verify(t, "x", cfg, ev, t0); !errors.Is(err, ErrMalformed) {
		t.Errorf("x body in crc_token form: got %v, want ErrMalformed", err)
	}
}
