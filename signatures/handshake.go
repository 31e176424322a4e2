package signatures

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/tidwall/gjson"
)

type handshakeFunc func(d *def, cfg Config, r *Request, now time.Time) (*HandshakeResponse, bool, error)

const maxChallenge = 1 << 10 // longer challenges are not echoed

func jsonString(b []byte, path string) string {
	v := gjson.GetBytes(b, path)
	if v.Type != gjson.String {
		return ""
	}
	return v.Str
}

func query(r *Request) url.Values {
	if r.URL == "" {
		return nil
	}
	u, err := url.Parse(r.URL)
	if err != nil {
		return nil
	}
	q, _ := url.ParseQuery(u.RawQuery)
	return q
}

func reply(status int, ctype string, b []byte) *HandshakeResponse {
	return &HandshakeResponse{Status: status, ContentType: ctype, Header: http.Header{}, Body: b}
}

func jsonReply(v any) *HandshakeResponse {
	b, _ := json.Marshal(v)
	return reply(http.StatusOK, "application/json", b)
}

func textReply(s string) *HandshakeResponse {
	h := reply(http.StatusOK, "text/plain; charset=utf-8", []byte(s))
	h.Header.Set("X-Content-Type-Options", "nosniff")
	return h
}

// verified builds the provider's verifier and checks r with it.
func verified(d *def, cfg Config, r *Request, now time.Time) error {
	if err := checkCommon(d, cfg); err != nil {
		return err
	}
	s, err := d.verifier(cfg)
	if err != nil {
		return err
	}
	return s.Verify(r, now)
}

// A handshake that answers with a MAC under the source's key signs whatever challenge it is
// given, so the challenges such handshakes take are confined to the provider's own token
// alphabet, which no signed event content can match: otherwise anyone could ask the handshake to
// sign an event body of their choosing and post that body with the answer as its signature.
var (
	// tokenForm is base64 or base64url, padded or not: X's crc_token (base64 of a nonce) and
	// Zoom's plainToken. Signed event content never has it: X signs a JSON body, and its
	// verifier refuses a body of this form besides (xBodyIsChallenge); Zoom signs "v0:{ts}:{body}".
	tokenForm = regexp.MustCompile(`^[A-Za-z0-9+/_-]{1,512}={0,2}$`)
	// uuidForm is LinkedIn's challengeCode. LinkedIn signs "hmacsha256=" + body, never a UUID.
	uuidForm = regexp.MustCompile(`^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$`)
)

// macChallenge is challenge for handshakes that answer with a MAC: v must also match form,
// named in the error as field.
func macChallenge(field, v string, form *regexp.Regexp, what string) (string, error) {
	if !form.MatchString(v) {
		return "", fmt.Errorf("%w: %s is not %s", ErrMalformed, field, what)
	}
	return v, nil
}

func challenge(v string) (string, error) {
	if v == "" || len(v) > maxChallenge {
		return "", fmt.Errorf("%w: challenge is empty or longer than %d bytes", ErrMalformed, maxChallenge)
	}
	return v, nil
}

// signedPing answers a provider's signed test event (GitHub ping, Intercom ping topic) without
// forwarding it to the agent.
func signedPing(is func(*Request) bool) handshakeFunc {
	return func(p *def, cfg Config, r *Request, now time.Time) (*HandshakeResponse, bool, error) {
		if !is(r) {
			return nil, false, nil
		}
		if err := verified(p, cfg, r, now); err != nil {
			return nil, true, err
		}
		return jsonReply(map[string]string{"status": "pong"}), true, nil
	}
}

// slackHandshake: url_verification is signed like any event; echo its challenge.
func slackHandshake(p *def, cfg Config, r *Request, now time.Time) (*HandshakeResponse, bool, error) {
	if jsonString(r.Body, "type") != "url_verification" {
		return nil, false, nil
	}
	if err := verified(p, cfg, r, now); err != nil {
		return nil, true, err
	}
	c, err := challenge(jsonString(r.Body, "challenge"))
	if err != nil {
		return nil, true, err
	}
	return jsonReply(map[string]string{"challenge": c}), true, nil
}

// zoomHandshake: endpoint.url_validation is signed; the answer is the plain token with its
// HMAC-SHA256 (hex) under the secret token that verified the request.
func zoomHandshake(p *def, cfg Config, r *Request, now time.Time) (*HandshakeResponse, bool, error) {
	if jsonString(r.Body, "event") != "endpoint.url_validation" {
		return nil, false, nil
	}
	if err := checkCommon(p, cfg); err != nil {
		return nil, true, err
	}
	s, err := newHMAC(p.hmac, cfg)
	if err != nil {
		return nil, true, err
	}
	k, err := s.match(r, now)
	if err != nil {
		return nil, true, err
	}
	plain, err := macChallenge("payload.plainToken", jsonString(r.Body, "payload.plainToken"), tokenForm, "a base64 token")
	if err != nil {
		return nil, true, err
	}
	m := hmac.New(sha256.New, s.keys[k])
	m.Write([]byte(plain))
	return jsonReply(map[string]string{"plainToken": plain, "encryptedToken": hex.EncodeToString(m.Sum(nil))}), true, nil
}

// twitchHandshake: webhook_callback_verification is signed; echo the challenge as text.
func twitchHandshake(p *def, cfg Config, r *Request, now time.Time) (*HandshakeResponse, bool, error) {
	if headerValue(r.Header, "Twitch-Eventsub-Message-Type") != "webhook_callback_verification" {
		return nil, false, nil
	}
	if err := verified(p, cfg, r, now); err != nil {
		return nil, true, err
	}
	c, err := challenge(jsonString(r.Body, "challenge"))
	if err != nil {
		return nil, true, err
	}
	return textReply(c), true, nil
}

// discordHandshake: PING (type 1) is signed; Discord also sends bad signatures on purpose and
// expects 401 for them, which the returned error gives.
func discordHandshake(p *def, cfg Config, r *Request, now time.Time) (*HandshakeResponse, bool, error) {
	if v := gjson.GetBytes(r.Body, "type"); v.Type != gjson.Number || v.Raw != "1" {
		return nil, false, nil
	}
	if err := verified(p, cfg, r, now); err != nil {
		return nil, true, err
	}
	return jsonReply(map[string]int{"type": 1}), true, nil
}

// frontHandshake: the validation request carries x-front-challenge and is signed like events.
func frontHandshake(p *def, cfg Config, r *Request, now time.Time) (*HandshakeResponse, bool, error) {
	c := headerValue(r.Header, "X-Front-Challenge")
	if c == "" {
		return nil, false, nil
	}
	if err := verified(p, cfg, r, now); err != nil {
		return nil, true, err
	}
	if _, err := challenge(c); err != nil {
		return nil, true, err
	}
	return textReply(c), true, nil
}

// metaHandshake: GET hub.mode=subscribe with the configured verify token; echo hub.challenge.
func metaHandshake(_ *def, cfg Config, r *Request, _ time.Time) (*HandshakeResponse, bool, error) {
	q := query(r)
	if r.Method != http.MethodGet || !q.Has("hub.mode") {
		return nil, false, nil
	}
	if cfg.VerifyToken == "" {
		return nil, true, fmt.Errorf("%w: verify_token: required for Meta's subscription handshake", ErrConfig)
	}
	if q.Get("hub.mode") != "subscribe" {
		return nil, true, fmt.Errorf("%w: hub.mode %q", ErrMalformed, q.Get("hub.mode"))
	}
	if !equalSecret(q.Get("hub.verify_token"), cfg.VerifyToken) {
		return nil, true, fmt.Errorf("%w: hub.verify_token", ErrNoMatch)
	}
	c, err := challenge(q.Get("hub.challenge"))
	if err != nil {
		return nil, true, err
	}
	return textReply(c), true, nil
}

// challengeEcho answers query-string challenges that carry no credential: Nylas and Dropbox
// (GET ?challenge=) and Microsoft Graph (?validationToken=, on POST). anyMethod allows POST.
func challengeEcho(param string, anyMethod bool) handshakeFunc {
	return func(_ *def, _ Config, r *Request, _ time.Time) (*HandshakeResponse, bool, error) {
		q := query(r)
		if !q.Has(param) || (!anyMethod && r.Method != http.MethodGet) {
			return nil, false, nil
		}
		c, err := challenge(q.Get(param))
		if err != nil {
			return nil, true, err
		}
		return textReply(c), true, nil
	}
}

// asanaHandshake: Asana's first POST carries X-Hook-Secret, to be echoed back. It is not
// authenticated, so the ingress must never replace a configured secret with it; it is returned
// in the response header for the operator to record.
func asanaHandshake(_ *def, _ Config, r *Request, _ time.Time) (*HandshakeResponse, bool, error) {
	s := headerValue(r.Header, "X-Hook-Secret")
	if s == "" {
		return nil, false, nil
	}
	if _, err := challenge(s); err != nil {
		return nil, true, err
	}
	h := reply(http.StatusOK, "", nil)
	h.Header.Set("X-Hook-Secret", s)
	return h, true, nil
}

// xHandshake: the CRC check, GET ?crc_token=, answered with its HMAC-SHA256 (base64) under the
// consumer secret (the first secret). That is exactly the signature of an event whose body is the
// token, so only tokens of X's form (base64) are answered, and the verifier refuses bodies of
// that form.
func xHandshake(_ *def, cfg Config, r *Request, _ time.Time) (*HandshakeResponse, bool, error) {
	q := query(r)
	if r.Method != http.MethodGet || !q.Has("crc_token") {
		return nil, false, nil
	}
	if len(cfg.Secrets) == 0 || cfg.Secrets[0] == "" {
		return nil, true, fmt.Errorf("%w: secrets: at least one is required", ErrConfig)
	}
	c, err := macChallenge("crc_token", q.Get("crc_token"), tokenForm, "a base64 token")
	if err != nil {
		return nil, true, err
	}
	m := hmac.New(sha256.New, []byte(cfg.Secrets[0]))
	m.Write([]byte(c))
	return jsonReply(map[string]string{"response_token": "sha256=" + base64.StdEncoding.EncodeToString(m.Sum(nil))}), true, nil
}

// xBodyIsChallenge reports whether an X body has the form of a crc_token: the CRC answer for
// such a token is a valid signature of that body, so no such body is ever taken as an event
// (X's events are JSON objects).
func xBodyIsChallenge(body []byte) bool { return tokenForm.Match(body) }
