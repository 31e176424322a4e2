package ingress_test

import (
	"bytes"
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/signatures"
)

// Endpoint verifications are answered at the edge, exactly as each provider
// expects, and never reach the ledger or the agent. Where the provider signs
// them, a bad signature is a 401.
func TestHandshakes(t *testing.T) {
	discordSeed := bytes.Repeat([]byte{7}, ed25519.SeedSize)
	discordPub := ed25519.NewKeyFromSeed(discordSeed).Public().(ed25519.PublicKey)
	otherSeed := bytes.Repeat([]byte{9}, ed25519.SeedSize)

	h := newHarness(t,
		ingress.SourceConfig{Name: "slack", Provider: "slack", Signature: signatures.Config{Secrets: []string{slackSecret}}},
		ingress.SourceConfig{Name: "zoom", Provider: "zoom", Signature: signatures.Config{Secrets: []string{zoomSecret}}},
		ingress.SourceConfig{Name: "meta", Provider: "meta", Signature: signatures.Config{Secrets: []string{metaAppSecret}, VerifyToken: metaVerify}},
		ingress.SourceConfig{Name: "discord", Provider: "discord", Signature: signatures.Config{Secrets: []string{hex.EncodeToString(discordPub)}}},
		ingress.SourceConfig{Name: "twitch", Provider: "twitch", Signature: signatures.Config{Secrets: []string{twitchSecret}}},
		ingress.SourceConfig{Name: "graph", Provider: "msgraph", Signature: signatures.Config{Secrets: []string{graphState}},
			EventID: []string{"{json:value.0.subscriptionId}:{json:value.0.resourceData.id}"}},
	)
	signed := func(t *testing.T, provider string, secret, source string, hdr http.Header, body []byte) *http.Request {
		t.Helper()
		body = sign(t, provider, signatures.Config{Secrets: []string{secret}}, h.clock.Now(), http.MethodPost, "", hdr, body)
		return h.newRequest(t, http.MethodPost, "/hooks/"+source, hdr, body)
	}
	wantExact := func(t *testing.T, r reply, mediaType, body string) {
		t.Helper()
		wantStatus(t, r, http.StatusOK)
		if mt := r.mediaType(t); mt != mediaType {
			t.Errorf("Content-Type = %q, want %s", r.Header.Get("Content-Type"), mediaType)
		}
		if string(r.Body) != body {
			t.Errorf("body = %q, want %q", r.Body, body)
		}
	}
	wantRefused := func(t *testing.T, r reply, secret string) {
		t.Helper()
		wantStatus(t, r, http.StatusUnauthorized)
		if bytes.Contains(r.Body, []byte(secret)) {
			t.Errorf("refusal %q echoes the challenge", r.Body)
		}
	}

	t.Run("slack url_verification", func(t *testing.T) {
		const challenge = "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"
		body := []byte(`{"token":"Jhj5dZrVaK7ZwHHjRyZWjbDl","challenge":"` + challenge + `","type":"url_verification"}`)
		hdr := http.Header{"Content-Type": {"application/json"}}
		r := h.do(t, signed(t, "slack", slackSecret, "slack", hdr, body))
		// Slack accepts the challenge as JSON {"challenge": ...}.
		wantExact(t, r, "application/json", `{"challenge":"`+challenge+`"}`)

		bad := http.Header{"Content-Type": {"application/json"}}
		wantRefused(t, h.do(t, signed(t, "slack", "wrong-secret", "slack", bad, body)), challenge)
		wantRefused(t, h.do(t, h.newRequest(t, http.MethodPost, "/hooks/slack", http.Header{"Content-Type": {"application/json"}}, body)), challenge)
	})

	t.Run("zoom endpoint.url_validation", func(t *testing.T) {
		const plain = "qgg8vlvZRS6UYooatFL8Aw"
		body := []byte(`{"payload":{"plainToken":"` + plain + `"},"event_ts":1654503849680,"event":"endpoint.url_validation"}`)
		r := h.do(t, signed(t, "zoom", zoomSecret, "zoom", http.Header{"Content-Type": {"application/json"}}, body))
		wantStatus(t, r, http.StatusOK)
		if mt := r.mediaType(t); mt != "application/json" {
			t.Errorf("Content-Type = %q, want application/json", mt)
		}
		var got map[string]string
		if err := json.Unmarshal(r.Body, &got); err != nil {
			t.Fatalf("body %q: %v", r.Body, err)
		}
		m := hmac.New(sha256.New, []byte(zoomSecret))
		m.Write([]byte(plain))
		want := map[string]string{"plainToken": plain, "encryptedToken": hex.EncodeToString(m.Sum(nil))}
		if len(got) != 2 || got["plainToken"] != want["plainToken"] || got["encryptedToken"] != want["encryptedToken"] {
			t.Errorf("answer = %v, want %v", got, want)
		}
		wantRefused(t, h.do(t, signed(t, "zoom", "wrong-secret", "zoom", http.Header{"Content-Type": {"application/json"}}, body)), want["encryptedToken"])
	})

	t.Run("meta hub.challenge", func(t *testing.T) {
		q := url.Values{"hub.mode": {"subscribe"}, "hub.verify_token": {metaVerify}, "hub.challenge": {"1158201444"}}
		r := h.do(t, h.newRequest(t, http.MethodGet, "/hooks/meta?"+q.Encode(), nil, nil))
		wantExact(t, r, "text/plain", "1158201444")

		q.Set("hub.verify_token", "guess")
		r = h.do(t, h.newRequest(t, http.MethodGet, "/hooks/meta?"+q.Encode(), nil, nil))
		if r.Status < 400 || r.Status >= 500 || bytes.Contains(r.Body, []byte("1158201444")) {
			t.Errorf("wrong verify token answered %s; want a 4xx that does not echo the challenge", r)
		}
	})

	t.Run("discord PING", func(t *testing.T) {
		body := []byte(`{"application_id":"123","id":"456","type":1,"version":1}`)
		r := h.do(t, signed(t, "discord", hex.EncodeToString(discordSeed), "discord", http.Header{"Content-Type": {"application/json"}}, body))
		wantExact(t, r, "application/json", `{"type":1}`)

		// Discord probes with unsigned and badly signed PINGs and wants 401.
		wantRefused(t, h.do(t, h.newRequest(t, http.MethodPost, "/hooks/discord", http.Header{"Content-Type": {"application/json"}}, body)), `"type":1`)
		wantRefused(t, h.do(t, signed(t, "discord", hex.EncodeToString(otherSeed), "discord", http.Header{"Content-Type": {"application/json"}}, body)), `"type":1`)
		hdr := http.Header{"Content-Type": {"application/json"}}
		body2 := sign(t, "discord", signatures.Config{Secrets: []string{hex.EncodeToString(discordSeed)}}, h.clock.Now(), http.MethodPost, "", hdr, body)
		tampered := bytes.Replace(body2, []byte(`"version":1`), []byte(`"version":2`), 1)
		wantRefused(t, h.do(t, h.newRequest(t, http.MethodPost, "/hooks/discord", hdr, tampered)), `"type":1`)
	})

	t.Run("twitch webhook_callback_verification", func(t *testing.T) {
		const challenge = "pogchamp-kappa-360noscope-vohiyo"
		body := []byte(`{"challenge":"` + challenge + `","subscription":{"id":"f1c2a387-161a-49f9-a165-0f21d7a4e1c4","status":"webhook_callback_verification_pending","type":"channel.follow","version":"2","condition":{"broadcaster_user_id":"12826"},"transport":{"method":"webhook","callback":"https://example.com/webhooks/callback"},"created_at":"2019-11-16T10:11:12.634234626Z"}}`)
		hdr := func() http.Header {
			return http.Header{
				"Content-Type":                         {"application/json"},
				"Twitch-Eventsub-Message-Id":           {"e76c6bd4-55c9-4987-8304-da1588d8988b"},
				"Twitch-Eventsub-Message-Retry":        {"0"},
				"Twitch-Eventsub-Message-Type":         {"webhook_callback_verification"},
				"Twitch-Eventsub-Subscription-Type":    {"channel.follow"},
				"Twitch-Eventsub-Subscription-Version": {"2"},
			}
		}
		r := h.do(t, signed(t, "twitch", twitchSecret, "twitch", hdr(), body))
		wantExact(t, r, "text/plain", challenge)
		wantRefused(t, h.do(t, signed(t, "twitch", "wrong-secret", "twitch", hdr(), body)), challenge)
	})

	t.Run("microsoft graph validationToken", func(t *testing.T) {
		const token = "Validation: Testing client application reachability for subscription Request-Id: 2c5f6f4b-1b2a-4e47-9d0e-3a6a0d1a3b11"
		hdr := http.Header{"Content-Type": {"text/plain; charset=utf-8"}}
		r := h.do(t, h.newRequest(t, http.MethodPost, "/hooks/graph?validationToken="+url.QueryEscape(token), hdr, []byte{}))
		// Graph wants the URL-decoded token back as text/plain, 200.
		wantExact(t, r, "text/plain", token)
	})

	if n := h.store.writes.Load(); n != 0 {
		t.Errorf("handshakes wrote %d ledger documents, want none", n)
	}
	if n := h.sink.totalCount(); n != 0 {
		t.Errorf("handshakes reached the agent %d times, want never", n)
	}
}
