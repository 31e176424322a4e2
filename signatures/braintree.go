package signatures

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"
)

// braintreeScheme follows braintree_node's webhook_notification_gateway.js and digest.js: the
// form body carries bt_payload (base64 XML) and bt_signature ("publicKey|hexsig" pairs joined by
// "&"); the signature is HMAC-SHA1 keyed with the raw SHA-1 of the private key, over the payload
// as sent or with a trailing newline. Secrets are "public_key:private_key", several while
// rotating.
type braintreeScheme struct{ keys []braintreeKey }

type braintreeKey struct {
	public string
	mac    []byte // SHA-1 of the private key
}

const maxBraintreePairs = maxCandidates

var (
	braintreeChallenge = regexp.MustCompile(`^[a-f0-9]{20,32}$`)
)

func newBraintree(cfg Config) (*braintreeScheme, error) {
	s := &braintreeScheme{}
	for i, sec := range cfg.Secrets {
		pub, priv, ok := strings.Cut(sec, ":")
		if !ok || pub == "" || priv == "" || strings.ContainsAny(pub, "|&") {
			return nil, fmt.Errorf("%w: secrets[%d]: want public_key:private_key", ErrConfig, i)
		}
		sum := sha1.Sum([]byte(priv))
		s.keys = append(s.keys, braintreeKey{public: pub, mac: sum[:]})
	}
	return s, nil
}

func (k braintreeKey) digest(data []byte) []byte {
	m := hmac.New(sha1.New, k.mac)
	m.Write(data)
	return m.Sum(nil)
}

// Verify reads the form with url.ParseQuery, so a body ParseQuery refuses (a semicolon, a bad
// escape) is malformed, and the first bt_signature and bt_payload count.
func (s *braintreeScheme) Verify(r *Request, _ time.Time) error {
	vals, err := url.ParseQuery(string(r.Body))
	if err != nil {
		return fmt.Errorf("%w: form body: %v", ErrMalformed, err)
	}
	sigs, payload := vals.Get("bt_signature"), []byte(vals.Get("bt_payload"))
	if sigs == "" || len(payload) == 0 {
		return fmt.Errorf("%w: form fields bt_signature and bt_payload", ErrMissingHeader)
	}
	if len(sigs) > maxHeaderLen {
		return fmt.Errorf("%w: bt_signature is longer than %d bytes", ErrMalformed, maxHeaderLen)
	}
	if !braintreePayloadChars(payload) {
		return fmt.Errorf("%w: bt_payload contains characters outside base64", ErrMalformed)
	}
	// Our own bt_challenge answers are HMACs under the same key: a payload that is not base64
	// XML (every notification is) could be such an answer replayed as a notification.
	if braintreeIsChallenge(payload) || !braintreeXML(payload) {
		return fmt.Errorf("%w: bt_payload is not a base64 XML notification", ErrMalformed)
	}
	// The SDKs sign the payload as sent or with a trailing newline.
	withNL := append(slices.Clip(payload), '\n')
	found := false
	for _, k := range s.keys {
		// The first maxBraintreePairs of the "&"-separated pairs.
		rest, more := sigs, true
		for range maxBraintreePairs {
			if !more {
				break
			}
			var p string
			p, rest, more = strings.Cut(rest, "&")
			pub, hexsig, ok := strings.Cut(p, "|")
			if !ok || pub != k.public {
				continue
			}
			found = true
			var sig [sha1.Size]byte
			if l, ok := decodeSig(sig[:], strings.ToLower(hexsig), false); !ok || l != sha1.Size {
				return fmt.Errorf("%w: bt_signature for public key %s", ErrMalformed, pub)
			}
			if hmac.Equal(k.digest(payload), sig[:]) || hmac.Equal(k.digest(withNL), sig[:]) {
				return nil
			}
		}
	}
	if !found {
		return fmt.Errorf("%w: bt_signature has no pair for a configured public key", ErrNoMatch)
	}
	return fmt.Errorf("%w: bt_signature", ErrNoMatch)
}

// braintreePayloadChars: base64 characters and newlines only, as the SDKs require.
func braintreePayloadChars(p []byte) bool {
	for _, c := range p {
		if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '=' || c == '\n') {
			return false
		}
	}
	return true
}

// braintreeIsChallenge reports whether the payload, trimmed of spaces, has the form of a
// bt_challenge: 20 to 32 hex digits.
func braintreeIsChallenge(payload []byte) bool {
	t := bytes.TrimSpace(payload)
	return len(t) >= 20 && len(t) <= 32 && braintreeChallenge.Match(t)
}

// braintreeXML reports whether the payload decodes to something that starts like XML.
func braintreeXML(payload []byte) bool {
	// Only the start matters: the first 64 base64 characters of the first 128 bytes without
	// their line breaks, whole groups of four, decoded on the stack.
	var headA [128]byte
	head := headA[:0]
	for src := payload[:min(len(payload), 128)]; len(src) > 0 && len(head) < 64; {
		line, rest, _ := bytes.Cut(src, []byte("\n"))
		head, src = append(head, line...), rest
	}
	if len(head) > 64 {
		head = head[:64]
	}
	head = head[:len(head)/4*4]
	var out [48]byte
	n, err := base64.StdEncoding.Decode(out[:], head)
	b := bytes.TrimLeft(out[:n], " \t\r\n")
	return err == nil && len(b) > 0 && b[0] == '<'
}

// Sign wraps r.Body (the notification XML) as Braintree posts it: a form with the base64 payload
// and its signature under the first key.
func (s *braintreeScheme) Sign(r *Request, _ time.Time) error {
	if b := bytes.TrimLeft(r.Body, " \t\r\n"); len(b) == 0 || b[0] != '<' {
		// The verifier takes only XML payloads (see braintreeXML).
		return fmt.Errorf("%w: braintree signer needs the notification XML as the body", ErrMalformed)
	}
	k := s.keys[0]
	payload := base64.StdEncoding.EncodeToString(r.Body) + "\n"
	sig := k.public + "|" + hex.EncodeToString(k.digest([]byte(payload)))
	r.Body = []byte(url.Values{"bt_signature": {sig}, "bt_payload": {payload}}.Encode())
	setHeader(r, "Content-Type", "application/x-www-form-urlencoded")
	return nil
}

// braintreeHandshake answers the GET ?bt_challenge= sent when a webhook is set up:
// "publicKey|hex HMAC-SHA1" of the challenge under the first key.
func braintreeHandshake(_ *def, cfg Config, r *Request, _ time.Time) (*HandshakeResponse, bool, error) {
	q := query(r)
	if r.Method != http.MethodGet || !q.Has("bt_challenge") {
		return nil, false, nil
	}
	c := q.Get("bt_challenge")
	if !braintreeChallenge.MatchString(c) {
		return nil, true, fmt.Errorf("%w: bt_challenge is not 20-32 lowercase hex digits", ErrMalformed)
	}
	s, err := newBraintree(cfg)
	if err != nil {
		return nil, true, err
	}
	if len(s.keys) == 0 {
		return nil, true, fmt.Errorf("%w: secrets: at least one is required", ErrConfig)
	}
	k := s.keys[0]
	return textReply(k.public + "|" + hex.EncodeToString(k.digest([]byte(c)))), true, nil
}
