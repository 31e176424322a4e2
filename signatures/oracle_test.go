package signatures

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/tidwall/gjson"
)

// oracleBodies are event bodies an attacker would like signed: the provider's own kind of event,
// a made-up one, and strings in each handshake's challenge alphabet (base64, a UUID, hex).
func oracleBodies(provider string) [][]byte {
	return [][]byte{
		testBody(provider, t0),
		[]byte(`{"id":"forged-1","type":"forged.event"}`),
		[]byte("M2RkODJkZmMtYjlkYi00NmQ4LTk0MGUtM2JjYzkwM2Q4MjQ0"),
		[]byte("890e4665-4dfe-4ab1-b689-ed553bceeed7"),
		[]byte("0123456789abcdef0123456789abcdef"),
	}
}

const (
	oracleID          = "forged-id"
	oracleVerifyToken = "vt-oracle"
)

// oracleTS is the timestamp an attacker would sign with, as the scheme writes it.
func oracleTS(d *hmacDef, body []byte) string {
	if d.tsJSON != "" {
		return gjson.GetBytes(body, d.tsJSON).Raw
	}
	return formatTime(t0, d.tsFormat)
}

// signedContent is what an HMAC scheme MACs for an event with this body: the string an attacker
// would hand a handshake to have it signed.
func signedContent(d *hmacDef, body []byte) string {
	var b strings.Builder
	for _, s := range d.content {
		switch s.kind {
		case segBody:
			b.Write(body)
		case segLit:
			b.WriteString(s.lit)
		case segTS:
			b.WriteString(oracleTS(d, body))
		case segID:
			b.WriteString(oracleID)
		case segURL:
			u := testURL
			if d.urlForm != nil {
				u = d.urlForm(u)
			}
			b.WriteString(u)
		case segMethod:
			b.WriteString(http.MethodPost)
		}
	}
	return b.String()
}

// handshakeProbes are requests carrying m in every place some provider's handshake reads a
// challenge from, and the handshakes that carry none (pings, HEAD), so that every handshake in
// the registry is reached.
func handshakeProbes(m string) []*Request {
	base := "https://hooks.example.com/hooks/src?"
	var out []*Request
	add := func(method, q string, hdr http.Header, body string) {
		if hdr == nil {
			hdr = http.Header{}
		}
		if body != "" && hdr.Get("Content-Type") == "" {
			hdr.Set("Content-Type", "application/json")
		}
		out = append(out, &Request{Method: method, URL: base + q, Header: hdr, Body: []byte(body)})
	}
	for _, method := range []string{http.MethodGet, http.MethodPost} {
		for _, p := range []string{"crc_token", "challengeCode", "challenge", "validationToken", "bt_challenge", "check"} {
			add(method, url.Values{p: {m}}.Encode(), nil, "")
		}
		add(method, url.Values{"hub.mode": {"subscribe"}, "hub.verify_token": {oracleVerifyToken}, "hub.challenge": {m}}.Encode(), nil, "")
		for _, h := range []string{"X-Hook-Secret", "X-Front-Challenge", "X-Okta-Verification-Challenge", "X-GCS-Webhooks-Endpoint-Verification"} {
			add(method, "", http.Header{h: {m}}, "")
		}
	}
	js := func(v string) string { b, _ := json.Marshal(v); return string(b) }
	add(http.MethodPost, "", nil, `{"type":"url_verification","challenge":`+js(m)+`}`)
	add(http.MethodPost, "", nil, `{"event":"endpoint.url_validation","payload":{"plainToken":`+js(m)+`}}`)
	add(http.MethodPost, "", http.Header{"Twitch-Eventsub-Message-Type": {"webhook_callback_verification"}}, `{"challenge":`+js(m)+`}`)
	add(http.MethodPost, "", nil, `{"challenge":`+js(m)+`}`)
	add(http.MethodPost, "", nil, `{"verification_token":`+js(m)+`}`)
	// Handshakes that carry no challenge.
	add(http.MethodPost, "", nil, `{"type":1}`)
	add(http.MethodPost, "", nil, `{"topic":"ping"}`)
	add(http.MethodPost, "", nil, `{"events":[]}`)
	add(http.MethodPost, "", http.Header{"X-Github-Event": {"ping"}}, `{"zen":"z"}`)
	add(http.MethodPost, "", http.Header{"X-Buildkite-Event": {"ping"}}, `{"event":"ping"}`)
	add(http.MethodPost, "", http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, "webhook_id=1")
	add(http.MethodHead, "", nil, "")
	return out
}

// answerStrings are the strings an answer hands out: its body, every string inside a JSON body,
// its header values, and their "|"-separated parts.
func answerStrings(resp *HandshakeResponse) []string {
	var out []string
	addAll := func(s string) {
		if s == "" {
			return
		}
		out = append(out, s)
		if strings.Contains(s, "|") {
			out = append(out, strings.Split(s, "|")...)
		}
	}
	addAll(string(resp.Body))
	var walk func(v gjson.Result)
	walk = func(v gjson.Result) {
		switch {
		case v.Type == gjson.String:
			addAll(v.Str)
		case v.IsObject() || v.IsArray():
			v.ForEach(func(_, x gjson.Result) bool { walk(x); return true })
		}
	}
	if gjson.ValidBytes(resp.Body) {
		walk(gjson.ParseBytes(resp.Body))
	}
	for _, vs := range resp.Header {
		for _, v := range vs {
			addAll(v)
		}
	}
	return out
}

// forgeries are the requests an attacker would post with body and a handshake's answer a: the
// answer in each signature header, bare and in the scheme's own header format, with the
// timestamp and id the signed content was built with; for Braintree, in the form's bt_signature.
func forgeries(provider string, d *def, body []byte, a string) []*Request {
	var out []*Request
	info := d.info
	values := []string{a}
	var h *hmacDef
	if d.hmac != nil {
		h = d.hmac
		ts := oracleTS(h, body)
		values = append(values, h.prefix+a, h.tsKey+"="+ts+string(h.sep)+h.sigKey+"="+a, ts+string(h.sep)+a)
	}
	for _, name := range info.SignatureHeaders {
		for _, v := range values {
			r := &Request{Method: http.MethodPost, URL: testURL, Header: http.Header{"Content-Type": {"application/json"}}, Body: body}
			r.Header.Set(name, v)
			if h != nil {
				if h.tsHeader != "" {
					r.Header.Set(h.tsHeader, oracleTS(h, body))
				}
				if h.idHeader != "" {
					r.Header.Set(h.idHeader, oracleID)
				}
			}
			out = append(out, r)
		}
	}
	if provider == "braintree" {
		form := url.Values{"bt_signature": {a}, "bt_payload": {string(body)}}.Encode()
		out = append(out, &Request{Method: http.MethodPost, URL: testURL,
			Header: http.Header{"Content-Type": {"application/x-www-form-urlencoded"}}, Body: []byte(form)})
	}
	return out
}

// No handshake is a signing oracle: for every provider with one, the handshake is handed
// attacker-chosen bytes (event bodies, and the exact content the scheme signs for them) in every
// place a challenge travels, signed with the source's own key where the handshake checks a
// signature (a stronger attacker than any real one), and nothing in any answer verifies as the
// signature of an event.
func TestNoHandshakeSignsEvents(t *testing.T) {
	for _, p := range Providers() {
		info, _ := Lookup(p)
		if !info.Handshake {
			continue
		}
		t.Run(p, func(t *testing.T) {
			t.Parallel()
			d, _ := lookup(p)
			keys := testKeys(t, p)
			cfg := testConfig(p, keys[0].verify)
			if p == "sns" {
				// Topics, not keys: SNS signs with Amazon's private key, which no handshake holds.
				cfg.Secrets = []string{"*"}
			}
			cfg.VerifyToken = oracleVerifyToken
			scfg := testConfig(p, keys[0].sign)
			signer, signErr := NewSigner(p, scfg)
			verifier, err := New(p, cfg)
			if err != nil {
				t.Fatal(err)
			}
			handled, answered := 0, 0
			for _, body := range oracleBodies(p) {
				ms := []string{string(body)}
				if d.hmac != nil {
					ms = append(ms, signedContent(d.hmac, body))
				}
				ms = append(ms, base64.StdEncoding.EncodeToString(body))
				for _, m := range ms {
					var probes []*Request
					for _, r := range handshakeProbes(m) {
						probes = append(probes, r)
						if signErr == nil {
							c := &Request{Method: r.Method, URL: r.URL, Header: r.Header.Clone(), Body: append([]byte(nil), r.Body...)}
							if err := signer.Sign(c, t0); err == nil {
								probes = append(probes, c)
							}
						}
					}
					for _, r := range probes {
						resp, ok, err := Handshake(p, cfg, r, t0)
						if ok {
							handled++
						}
						if err != nil || resp == nil {
							continue
						}
						answered++
						for _, a := range answerStrings(resp) {
							for _, f := range forgeries(p, d, body, a) {
								if verifier.Verify(f, t0) == nil {
									t.Fatalf("the handshake's answer to %s %s (%d-byte body) signs the event %q: %q in %v",
										r.Method, r.URL, len(r.Body), body, a, f.Header)
								}
							}
						}
					}
				}
			}
			// Every handshake was reached, unless only the provider's private key could sign it.
			if handled == 0 && signErr == nil {
				t.Fatalf("no probe reached %s's handshake: the probes miss where it reads its challenge", p)
			}
			t.Logf("%d probes handled, %d answered", handled, answered)
		})
	}
}
