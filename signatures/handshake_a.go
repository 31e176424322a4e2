package signatures

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"regexp"
	"strings"
	"time"

	"github.com/tidwall/gjson"
)

// xeroHandshake answers Xero's "Intent to Receive": POSTs whose events array is empty, some
// signed correctly and some not. A good one gets 200 with no body, a bad one 401 (the returned
// error), as developer.xero.com/documentation/webhooks/configuring-your-server requires.
func xeroHandshake(p *def, cfg Config, r *Request, now time.Time) (*HandshakeResponse, bool, error) {
	ev := gjson.GetBytes(r.Body, "events")
	// A truncated body can leave Raw as a lone "[": no closed empty array,
	// so no handshake (and no slicing past its end).
	if !ev.IsArray() || len(ev.Raw) < 2 || strings.TrimSpace(ev.Raw[1:len(ev.Raw)-1]) != "" {
		return nil, false, nil
	}
	if err := verified(p, cfg, r, now); err != nil {
		return nil, true, err
	}
	return reply(http.StatusOK, "", nil), true, nil
}

// oktaHandshake: the one-time event hook verification, a GET carrying
// X-Okta-Verification-Challenge and the configured authorization header; the answer is
// {"verification": <challenge>}.
func oktaHandshake(p *def, cfg Config, r *Request, now time.Time) (*HandshakeResponse, bool, error) {
	v := headerValue(r.Header, "X-Okta-Verification-Challenge")
	if r.Method != http.MethodGet || v == "" {
		return nil, false, nil
	}
	if err := verified(p, cfg, r, now); err != nil {
		return nil, true, err
	}
	c, err := challenge(v)
	if err != nil {
		return nil, true, err
	}
	return jsonReply(map[string]string{"verification": c}), true, nil
}

// worldlineHandshake: a GET with X-GCS-Webhooks-Endpoint-Verification, answered with its value
// as text/plain. Follows Worldline Connect's webhooks guide as quoted in the research notes (marked
// (?)): the request carries no signature.
func worldlineHandshake(_ *def, _ Config, r *Request, _ time.Time) (*HandshakeResponse, bool, error) {
	v := headerValue(r.Header, "X-GCS-Webhooks-Endpoint-Verification")
	if r.Method != http.MethodGet || v == "" {
		return nil, false, nil
	}
	c, err := challenge(v)
	if err != nil {
		return nil, true, err
	}
	return textReply(c), true, nil
}

// headCheck answers the HEAD request Trello (and, per secondary sources, Mandrill) sends to a
// callback URL when a webhook is created: 200, no body.
func headCheck(_ *def, _ Config, r *Request, _ time.Time) (*HandshakeResponse, bool, error) {
	if r.Method != http.MethodHead {
		return nil, false, nil
	}
	return reply(http.StatusOK, "", nil), true, nil
}

// notionHandshake: Notion's first POST to a new subscription carries {"verification_token": …}
// and no signature; the token becomes the signing secret once the operator pastes it into
// Notion. It is unauthenticated, so it is never stored as a secret: the answer is 200, and the
// token goes to the operator in the response's Note (the gateway logs it) and in
// X-Notion-Verification-Token. Follows the research notes (?).
func notionHandshake(_ *def, _ Config, r *Request, _ time.Time) (*HandshakeResponse, bool, error) {
	tok := jsonString(r.Body, "verification_token")
	if tok == "" || headerValue(r.Header, "X-Notion-Signature") != "" {
		return nil, false, nil
	}
	// Anyone can send this POST, and its token goes into the operator's log as something to
	// act on: only a token of Notion's form (letters, digits, '_' and '-') is taken, so the line
	// carries no text of a sender's choosing.
	if _, err := macChallenge("verification_token", tok, notionToken, "a token of letters, digits, '_' and '-'"); err != nil {
		return nil, true, err
	}
	h := reply(http.StatusOK, "", nil)
	h.Header.Set("X-Notion-Verification-Token", tok)
	h.Note = "a Notion verification_token arrived unsigned (anyone can send one): if you just created this subscription in Notion, paste it there, then into secrets: " + tok
	return h, true, nil
}

// linkedinHandshake: GET ?challengeCode=c answered with {"challengeCode": c,
// "challengeResponse": hex HMAC-SHA256 of c under the client secret}. Secondary source only (?).
// The MAC is the one events are signed with, so only a UUID (LinkedIn's challengeCode) is
// answered: events sign "hmacsha256=" + body, which is never one.
func linkedinHandshake(p *def, cfg Config, r *Request, _ time.Time) (*HandshakeResponse, bool, error) {
	q := query(r)
	if r.Method != http.MethodGet || !q.Has("challengeCode") {
		return nil, false, nil
	}
	if err := checkCommon(p, cfg); err != nil {
		return nil, true, err
	}
	c, err := macChallenge("challengeCode", q.Get("challengeCode"), uuidForm, "a UUID")
	if err != nil {
		return nil, true, err
	}
	m := hmac.New(sha256.New, []byte(cfg.Secrets[0]))
	m.Write([]byte(c))
	return jsonReply(map[string]string{"challengeCode": c, "challengeResponse": hex.EncodeToString(m.Sum(nil))}), true, nil
}

var wooPing = regexp.MustCompile(`^webhook_id=[0-9]{1,20}$`)

// notionToken is the form of Notion's verification_token ("secret_" and base62 in Notion's
// examples).
var notionToken = regexp.MustCompile(`^[A-Za-z0-9_-]{8,256}$`)

// wooHandshake: when a webhook is saved WooCommerce POSTs the form body webhook_id=<n> without a
// signature (class-wc-webhook.php deliver_ping); it gets 200 and goes no further.
func wooHandshake(_ *def, _ Config, r *Request, _ time.Time) (*HandshakeResponse, bool, error) {
	if headerValue(r.Header, "X-WC-Webhook-Signature") != "" || !wooPing.Match(r.Body) {
		return nil, false, nil
	}
	return reply(http.StatusOK, "", nil), true, nil
}
