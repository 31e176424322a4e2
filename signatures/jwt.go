package signatures

import (
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// JWT schemes use github.com/golang-jwt/jwt/v5. Each pins the one algorithm its provider uses
// (WithValidMethods), so "none", HS/ES confusion and RSA keys used as HMAC secrets are refused
// before any key is looked at; the library's own clock is replaced by the now argument.

const maxJWT = maxHeaderLen

// parseJWT verifies a compact JWS with alg and the key keyFn returns, and checks exp and nbf
// when present. The claims are returned for the caller's own checks.
func parseJWT(raw, alg string, now time.Time, keyFn jwt.Keyfunc, name string) (jwt.MapClaims, error) {
	if len(raw) > maxJWT {
		return nil, fmt.Errorf("%w: %s is longer than %d bytes", ErrMalformed, name, maxJWT)
	}
	claims := jwt.MapClaims{}
	_, err := jwt.ParseWithClaims(raw, claims, keyFn, jwt.WithValidMethods([]string{alg}),
		jwt.WithTimeFunc(func() time.Time { return now }), jwt.WithJSONNumber())
	switch {
	case err == nil:
		return claims, nil
	case errors.Is(err, ErrUnavailable), errors.Is(err, ErrConfig), errors.Is(err, ErrMalformed), errors.Is(err, ErrNoMatch):
		// From our key lookup: already says what failed.
		return nil, err
	case errors.Is(err, jwt.ErrTokenMalformed):
		return nil, fmt.Errorf("%w: %s: %v", ErrMalformed, name, err)
	case errors.Is(err, jwt.ErrTokenExpired), errors.Is(err, jwt.ErrTokenNotValidYet):
		return nil, fmt.Errorf("%w: %s: %v", ErrStale, name, err)
	}
	return nil, fmt.Errorf("%w: %s: %v", ErrNoMatch, name, err)
}

// claimTime reads a NumericDate claim and checks it is within tol of now.
func claimTime(c jwt.MapClaims, claim string, now time.Time, tol time.Duration, name string) error {
	if _, ok := c[claim]; !ok {
		return fmt.Errorf("%w: %s claim %s", ErrMissingHeader, name, claim)
	}
	var t *jwt.NumericDate
	var err error
	if claim == "iat" {
		t, err = c.GetIssuedAt()
	} else {
		return fmt.Errorf("%w: claim %s", ErrConfig, claim)
	}
	if err != nil || t == nil {
		return fmt.Errorf("%w: %s claim %s is not a number", ErrMalformed, name, claim)
	}
	return checkTime(t.Time, now, tol, name+" claim "+claim)
}

// bodyHashClaim checks that claim holds the hex SHA-256 of body.
func bodyHashClaim(c jwt.MapClaims, claim string, body []byte, name string) error {
	v, ok := c[claim].(string)
	if !ok || v == "" {
		return fmt.Errorf("%w: %s claim %s", ErrMissingHeader, name, claim)
	}
	sum := sha256.Sum256(body)
	want := hex.EncodeToString(sum[:])
	if subtle.ConstantTimeCompare([]byte(strings.ToLower(v)), []byte(want)) != 1 {
		return fmt.Errorf("%w: %s claim %s does not match the body", ErrNoMatch, name, claim)
	}
	return nil
}

func bearer(v string) string {
	if len(v) > 7 && strings.EqualFold(v[:7], "Bearer ") {
		return strings.TrimSpace(v[7:])
	}
	return strings.TrimSpace(v)
}

// hsScheme: an HS256 JWT in Authorization, for Vonage and monday.com.
type hsScheme struct {
	name     string
	keys     [][]byte
	bodyHash string        // claim holding the hex SHA-256 of the body; "" = not body-bound
	iatTol   time.Duration // 0 = iat not required
	bearer   bool          // the signer writes "Bearer <jwt>"
	// unsignedRetry: a request without Authorization wraps ErrUnavailable (answered 503).
	unsignedRetry bool
	issuer        string // iss the signer writes
	audience      bool   // aud must equal Config.URL (required for such providers); exp is required
	aud           string
}

func newHS(name, bodyHash string, defTol time.Duration, bearerPrefix bool, iss string, audience bool) func(Config) (*hsScheme, error) {
	return func(cfg Config) (*hsScheme, error) {
		s := &hsScheme{name: name, bodyHash: bodyHash, bearer: bearerPrefix, issuer: iss, audience: audience,
			unsignedRetry: name == "vonage"}
		if audience {
			s.aud = cfg.URL
		}
		if defTol > 0 {
			s.iatTol = tolerance(cfg, defTol)
		}
		for _, k := range cfg.Secrets {
			s.keys = append(s.keys, []byte(k))
		}
		return s, nil
	}
}

func (s *hsScheme) Verify(r *Request, now time.Time) error {
	if s.unsignedRetry && headerValue(r.Header, "Authorization") == "" {
		return fmt.Errorf("%w: no Authorization: %s sends unsigned callbacks after an internal error and retries them on a 5xx",
			ErrUnavailable, s.name)
	}
	h, err := requireHeader(r.Header, "Authorization")
	if err != nil {
		return err
	}
	tok := bearer(h)
	var last error
	for _, k := range s.keys {
		c, err := parseJWT(tok, "HS256", now, func(*jwt.Token) (any, error) { return k, nil }, "Authorization")
		if err != nil {
			if !errors.Is(err, ErrNoMatch) {
				return err // malformed or expired whatever the key
			}
			last = err
			continue
		}
		if s.audience {
			if _, ok := c["exp"]; !ok {
				return fmt.Errorf("%w: Authorization claim exp", ErrMissingHeader)
			}
			if aud, _ := c.GetAudience(); !slices.Contains(aud, s.aud) {
				return fmt.Errorf("%w: Authorization claim aud %q is not this endpoint's url", ErrNoMatch, aud)
			}
		}
		if s.iatTol > 0 {
			if err := claimTime(c, "iat", now, s.iatTol, "Authorization"); err != nil {
				return err
			}
		}
		if s.bodyHash != "" {
			return bodyHashClaim(c, s.bodyHash, r.Body, "Authorization")
		}
		return nil
	}
	return last
}

func (s *hsScheme) Sign(r *Request, now time.Time) error {
	c := jwt.MapClaims{"iat": now.Unix(), "jti": randomID()}
	if s.issuer != "" {
		c["iss"] = s.issuer
	}
	if s.aud != "" {
		c["aud"] = s.aud
	}
	if s.bodyHash != "" {
		sum := sha256.Sum256(r.Body)
		c[s.bodyHash] = hex.EncodeToString(sum[:])
	} else {
		c["exp"] = now.Add(5 * time.Minute).Unix()
	}
	tok, err := jwt.NewWithClaims(jwt.SigningMethodHS256, c).SignedString(s.keys[0])
	if err != nil {
		return err
	}
	if s.bearer {
		tok = "Bearer " + tok
	}
	setHeader(r, "Authorization", tok)
	return nil
}

// mondayHandshake echoes the challenge monday.com posts when a webhook is created: HTTP 200 and
// the same JSON back. It is not checked against a signature (webhooks created with a personal API
// key carry none); echoing it reveals nothing and writes nothing.
func mondayHandshake(_ *def, _ Config, r *Request, _ time.Time) (*HandshakeResponse, bool, error) {
	if r.Method != http.MethodPost || jsonString(r.Body, "challenge") == "" || jsonString(r.Body, "event") != "" {
		return nil, false, nil
	}
	c, err := challenge(jsonString(r.Body, "challenge"))
	if err != nil {
		return nil, true, err
	}
	return jsonReply(map[string]string{"challenge": c}), true, nil
}
