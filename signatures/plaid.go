package signatures

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// plaidScheme: Plaid signs webhooks with an ES256 JWT in Plaid-Verification. Its key is looked up
// by the JWT header's kid with POST /webhook_verification_key/get (client_id and secret), and
// cached; the claim request_body_sha256 binds the body and iat must be at most 5 minutes old.
// The research notes mark the row (?); this follows Plaid's "Webhook verification" docs. A key whose
// expired_at has passed is refused.
//
// The secret is "client_id:secret" for production, or "sandbox:client_id:secret" /
// "development:client_id:secret". Only one credential: Plaid rotates its signing keys by kid,
// which the lookup follows on its own.
type plaidScheme struct {
	f                *Fetcher
	host, id, secret string
	tol              time.Duration
}

const (
	plaidHeader  = "Plaid-Verification"
	plaidKeyPath = "/webhook_verification_key/get"
)

// plaidKid: Plaid's key ids are UUIDs; anything outside this shape is refused before a lookup.
var plaidKid = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

var plaidHosts = []string{"production.plaid.com", "sandbox.plaid.com", "development.plaid.com"}

var plaidPin = pin{name: "Plaid key endpoint", host: func(h string) bool { return slices.Contains(plaidHosts, h) },
	path: func(u *url.URL) bool { return u.Path == plaidKeyPath }}

func newPlaid(cfg Config) (*plaidScheme, error) {
	if len(cfg.Secrets) > 1 {
		return nil, fmt.Errorf("%w: secrets: plaid takes one client_id:secret", ErrConfig)
	}
	parts := strings.Split(cfg.Secrets[0], ":")
	env := "production"
	if len(parts) == 3 {
		env, parts = parts[0], parts[1:]
	}
	if len(parts) != 2 || parts[0] == "" || parts[1] == "" || !slices.Contains(plaidHosts, env+".plaid.com") {
		return nil, fmt.Errorf("%w: secrets[0]: want client_id:secret or sandbox:client_id:secret", ErrConfig)
	}
	return &plaidScheme{f: fetcherFor(cfg), host: env + ".plaid.com", id: parts[0], secret: parts[1],
		tol: tolerance(cfg, tol5m)}, nil
}

func (s *plaidScheme) Verify(r *Request, now time.Time) error {
	tok, err := requireHeader(r.Header, plaidHeader)
	if err != nil {
		return err
	}
	c, err := parseJWT(strings.TrimSpace(tok), "ES256", now, func(t *jwt.Token) (any, error) {
		kid, _ := t.Header["kid"].(string)
		if !plaidKid.MatchString(kid) {
			return nil, fmt.Errorf("%w: %s has no usable kid", ErrMalformed, plaidHeader)
		}
		return s.f.plaidKey(s.host, s.id, s.secret, kid, now)
	}, plaidHeader)
	if err != nil {
		return err
	}
	if err := claimTime(c, "iat", now, s.tol, plaidHeader); err != nil {
		return err
	}
	return bodyHashClaim(c, "request_body_sha256", r.Body, plaidHeader)
}

// plaidJWK is the key object of /webhook_verification_key/get.
type plaidJWK struct {
	Alg       string `json:"alg"`
	Crv       string `json:"crv"`
	Kid       string `json:"kid"`
	Kty       string `json:"kty"`
	X         string `json:"x"`
	Y         string `json:"y"`
	ExpiredAt *int64 `json:"expired_at"`
}

// plaidKey returns the public key for kid, fetched from host with the credentials and cached.
// Unknown key ids are remembered for a minute.
func (f *Fetcher) plaidKey(host, clientID, secret, kid string, now time.Time) (*ecdsa.PublicKey, error) {
	v, err := f.load("plaid "+host+" "+clientID+" "+kid, now, time.Minute, func() (any, time.Time, error) {
		body, _ := json.Marshal(map[string]string{"client_id": clientID, "secret": secret, "key_id": kid})
		req, err := http.NewRequest(http.MethodPost, "https://"+host+plaidKeyPath, bytes.NewReader(body))
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("%w: plaid key request: %v", ErrConfig, err)
		}
		req.Header.Set("Content-Type", "application/json")
		b, _, err := f.do(req, plaidPin)
		if err != nil {
			return nil, time.Time{}, err
		}
		var resp struct {
			Key plaidJWK `json:"key"`
		}
		if err := json.Unmarshal(b, &resp); err != nil {
			return nil, time.Time{}, fmt.Errorf("%w: plaid key response: %v", ErrUnavailable, err)
		}
		k, err := resp.Key.public(kid, now)
		if err != nil {
			return nil, time.Time{}, fmt.Errorf("%w: plaid key %q: %v", ErrNoMatch, kid, err)
		}
		exp := now.Add(f.ttl)
		if resp.Key.ExpiredAt != nil && time.Unix(*resp.Key.ExpiredAt, 0).Before(exp) {
			exp = time.Unix(*resp.Key.ExpiredAt, 0)
		}
		return k, exp, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*ecdsa.PublicKey), nil
}

func (k plaidJWK) public(kid string, now time.Time) (*ecdsa.PublicKey, error) {
	switch {
	case k.Kid != kid:
		return nil, fmt.Errorf("answer is for kid %q", k.Kid)
	case k.Kty != "EC" || k.Crv != "P-256" || (k.Alg != "" && k.Alg != "ES256"):
		return nil, fmt.Errorf("not an ES256 P-256 key (%s %s %s)", k.Kty, k.Crv, k.Alg)
	case k.ExpiredAt != nil && !now.Before(time.Unix(*k.ExpiredAt, 0)):
		return nil, fmt.Errorf("expired at %d", *k.ExpiredAt)
	}
	x, errX := base64.RawURLEncoding.DecodeString(strings.TrimRight(k.X, "="))
	y, errY := base64.RawURLEncoding.DecodeString(strings.TrimRight(k.Y, "="))
	if errX != nil || errY != nil || len(x) != 32 || len(y) != 32 {
		return nil, fmt.Errorf("bad coordinates")
	}
	return ecdsa.ParseUncompressedPublicKey(elliptic.P256(), append(append([]byte{4}, x...), y...))
}
