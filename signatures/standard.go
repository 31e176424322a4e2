package signatures

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	svix "github.com/svix/svix-webhooks/go"
)

// standardScheme covers Standard Webhooks and Svix through svix-webhooks/go. The library's Verify
// reads the wall clock with a fixed 5-minute window, so this checks the timestamp itself against
// the configured tolerance and now, then calls VerifyIgnoringTimestamp. The library also falls back
// from svix-* to webhook-* headers; handing it a header set holding only this provider's three
// headers keeps the two providers from accepting each other's header names.
type standardScheme struct {
	prefix string // "webhook" or "svix"
	hooks  []*svix.Webhook
	tol    time.Duration
}

func newStandard(prefix string) func(Config) (*standardScheme, error) {
	return newStandardKeyed(prefix, stdWhsec)
}

// stdKey is how a Standard Webhooks provider turns its secret into the HMAC key.
type stdKey uint8

const (
	stdWhsec    stdKey = iota // base64 after an optional whsec_ prefix (the specification)
	stdWhsecRaw               // whsec_ → base64-decoded, anything else → its UTF-8 bytes (OpenAI)
	stdRaw                    // the secret's UTF-8 bytes, whatever it looks like (Polar)
)

func newStandardKeyed(prefix string, mode stdKey) func(Config) (*standardScheme, error) {
	return func(cfg Config) (*standardScheme, error) {
		s := &standardScheme{prefix: prefix, tol: tolerance(cfg, 300*time.Second)}
		for i, sec := range cfg.Secrets {
			var wh *svix.Webhook
			var err error
			switch {
			case mode == stdRaw, mode == stdWhsecRaw && !strings.HasPrefix(sec, "whsec_"):
				wh, err = svix.NewWebhookRaw([]byte(sec))
			default:
				wh, err = svix.NewWebhook(sec)
			}
			if err != nil {
				return nil, fmt.Errorf("%w: secrets[%d]: not a whsec_ base64 secret: %v", ErrConfig, i, err)
			}
			s.hooks = append(s.hooks, wh)
		}
		return s, nil
	}
}

func (s *standardScheme) names() (id, ts, sig string) {
	p := s.prefix + "-"
	return p + "id", p + "timestamp", p + "signature"
}

func (s *standardScheme) Verify(r *Request, now time.Time) error {
	idName, tsName, sigName := s.names()
	sig, err := requireHeader(r.Header, sigName)
	if err != nil {
		return err
	}
	id, err := requireHeader(r.Header, idName)
	if err != nil {
		return err
	}
	ts, err := requireHeader(r.Header, tsName)
	if err != nil {
		return err
	}
	if err := freshTimestamp(ts, tsSeconds, now, s.tol, tsName); err != nil {
		return err
	}
	// Keep at most maxCandidates space-separated entries and require at least one v1 entry, so
	// the library does bounded work and a header of only unknown versions reads as malformed.
	capped, v1 := sig, 0
	for i, rest := 0, sig; rest != ""; i++ {
		if i == maxCandidates {
			capped = strings.TrimSuffix(sig[:len(sig)-len(rest)], " ")
			break
		}
		var item string
		item, rest, _ = strings.Cut(rest, " ")
		if strings.HasPrefix(item, "v1,") && len(item) > 3 {
			v1++
		}
	}
	if v1 == 0 {
		return fmt.Errorf("%w: %s has no v1 signature", ErrMalformed, sigName)
	}
	h := http.Header{"Webhook-Id": {id}, "Webhook-Timestamp": {ts}, "Webhook-Signature": {capped}}
	for _, wh := range s.hooks {
		if wh.VerifyIgnoringTimestamp(r.Body, h) == nil {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrNoMatch, sigName)
}

func (s *standardScheme) Sign(r *Request, now time.Time) error {
	idName, tsName, sigName := s.names()
	id := headerValue(r.Header, idName)
	if id == "" {
		id = "msg_" + randomID()
	}
	ts := time.Unix(now.Unix(), 0)
	sig, err := s.hooks[0].Sign(id, ts, r.Body)
	if err != nil {
		return err
	}
	setHeader(r, idName, id)
	setHeader(r, tsName, formatTime(ts, tsSeconds))
	setHeader(r, sigName, sig)
	return nil
}
