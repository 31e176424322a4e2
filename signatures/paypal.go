package signatures

import (
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"hash/crc32"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"
)

// paypalScheme: PayPal REST webhooks, verified locally rather than by calling PayPal's
// verify-webhook-signature API. This follows paypal/PayPal-Python-SDK paypalrestsdk/
// notifications.py WebhookEvent.verify: RSA (SHA256withRSA) over
// "{transmission id}|{transmission time}|{webhook id}|{CRC32 of the body, unsigned decimal}",
// base64, with the certificate fetched from PAYPAL-CERT-URL, accepted only when its chain
// verifies, it is unexpired and its subject common name ends in ".paypal.com". The SDK fetches
// whatever URL the header names; we go further and pin the URL to PayPal's API hosts (live and
// sandbox) and the /v1/notifications/certs/ path, which is our choice, not the SDK's, so the
// path pin follows the URLs PayPal is seen to send (?).
//
// Secrets are webhook ids (several when one source receives several webhooks). The body is bound
// only by CRC32, which is not a cryptographic hash: someone holding one genuine delivery could
// craft another body with the same CRC32. BodySigned is therefore false, and a tolerance on the
// signed transmission time (Config.Tolerance; PayPal documents none) narrows that replay window.
type paypalScheme struct {
	f   *Fetcher
	ids []string
	tol time.Duration
}

const (
	paypalID      = "Paypal-Transmission-Id"
	paypalTime    = "Paypal-Transmission-Time"
	paypalSig     = "Paypal-Transmission-Sig"
	paypalCertURL = "Paypal-Cert-Url"
	paypalAlgo    = "Paypal-Auth-Algo"
)

var paypalHosts = []string{"api.paypal.com", "api-m.paypal.com", "api.sandbox.paypal.com", "api-m.sandbox.paypal.com"}

var paypalCertPin = pin{name: paypalCertURL, host: func(h string) bool { return slices.Contains(paypalHosts, h) },
	// A path with "." or ".." segments, or escaped characters, could name another path of the
	// pinned host once the server normalises it: only a clean path counts.
	path: func(u *url.URL) bool {
		return strings.HasPrefix(u.Path, "/v1/notifications/certs/") && u.RawPath == "" && path.Clean(u.Path) == u.Path &&
			!strings.Contains(u.Path, "%")
	}}

func newPaypal(cfg Config) (*paypalScheme, error) {
	for i, id := range cfg.Secrets {
		if strings.Contains(id, "|") {
			return nil, fmt.Errorf("%w: secrets[%d]: a webhook id has no \"|\"", ErrConfig, i)
		}
	}
	return &paypalScheme{f: fetcherFor(cfg), ids: slices.Clone(cfg.Secrets), tol: cfg.Tolerance}, nil
}

// paypalMessage is the signed string for one webhook id.
func paypalMessage(id, ts, webhookID string, body []byte) []byte {
	return []byte(id + "|" + ts + "|" + webhookID + "|" + strconv.FormatUint(uint64(crc32.ChecksumIEEE(body)), 10))
}

func (s *paypalScheme) Verify(r *Request, now time.Time) error {
	vals := map[string]string{}
	for _, h := range []string{paypalSig, paypalID, paypalTime, paypalCertURL, paypalAlgo} {
		v, err := requireHeader(r.Header, h)
		if err != nil {
			return err
		}
		vals[h] = v
	}
	if vals[paypalAlgo] != "SHA256withRSA" {
		return fmt.Errorf("%w: %s %q (want SHA256withRSA)", ErrMalformed, paypalAlgo, vals[paypalAlgo])
	}
	sig, err := base64.StdEncoding.DecodeString(strings.TrimSpace(vals[paypalSig]))
	if err != nil || len(sig) > 1024 {
		return fmt.Errorf("%w: %s", ErrMalformed, paypalSig)
	}
	if s.tol > 0 {
		if err := freshTimestamp(vals[paypalTime], tsRFC3339, now, s.tol, paypalTime); err != nil {
			return err
		}
	}
	cert, err := s.f.certificate(vals[paypalCertURL], paypalCertPin, now)
	if err != nil {
		return err
	}
	if !strings.HasSuffix(strings.ToLower(cert.Subject.CommonName), ".paypal.com") {
		return fmt.Errorf("%w: %s certificate is not issued to a paypal.com name", ErrNoMatch, paypalCertURL)
	}
	pub, ok := cert.PublicKey.(*rsa.PublicKey)
	if !ok {
		return fmt.Errorf("%w: %s certificate has no RSA key", ErrNoMatch, paypalCertURL)
	}
	for _, wid := range s.ids {
		sum := sha256.Sum256(paypalMessage(vals[paypalID], vals[paypalTime], wid, r.Body))
		if rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig) == nil {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrNoMatch, paypalSig)
}
