package signatures

import (
	"crypto/ed25519"
	"encoding/base64"
	"fmt"
	"strings"
	"time"
)

// telnyxScheme: Ed25519 like Discord, but the message is "{timestamp}|{body}" and the key and
// signature are base64, and Telnyx documents a 300 s window.
type telnyxScheme struct {
	keys []ed25519.PublicKey
	priv ed25519.PrivateKey
	tol  time.Duration
}

const (
	telnyxSig = "Telnyx-Signature-Ed25519"
	telnyxTS  = "Telnyx-Timestamp"
)

func newTelnyxVerifier(cfg Config) (*telnyxScheme, error) {
	s := &telnyxScheme{tol: tolerance(cfg, tol5m)}
	for i, k := range cfg.Secrets {
		b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(k))
		if err != nil || len(b) != ed25519.PublicKeySize {
			return nil, fmt.Errorf("%w: secrets[%d]: want a base64 Ed25519 public key (32 bytes)", ErrConfig, i)
		}
		s.keys = append(s.keys, b)
	}
	return s, nil
}

// newTelnyxSigner takes a base64 Ed25519 seed (32 bytes) or private key (64 bytes).
func newTelnyxSigner(cfg Config) (*telnyxScheme, error) {
	b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(cfg.Secrets[0]))
	switch {
	case err == nil && len(b) == ed25519.SeedSize:
		return &telnyxScheme{priv: ed25519.NewKeyFromSeed(b)}, nil
	case err == nil && len(b) == ed25519.PrivateKeySize:
		return &telnyxScheme{priv: ed25519.PrivateKey(b)}, nil
	}
	return nil, fmt.Errorf("%w: secrets[0]: want a base64 Ed25519 seed or private key", ErrConfig)
}

func telnyxMessage(ts string, body []byte) []byte {
	msg := make([]byte, 0, len(ts)+1+len(body))
	msg = append(append(append(msg, ts...), '|'), body...)
	return msg
}

func (s *telnyxScheme) Verify(r *Request, now time.Time) error {
	raw, err := requireHeader(r.Header, telnyxSig)
	if err != nil {
		return err
	}
	ts, err := requireHeader(r.Header, telnyxTS)
	if err != nil {
		return err
	}
	var sig [ed25519.SignatureSize]byte
	if l, ok := decodeSig(sig[:], strings.TrimSpace(raw), true); !ok || l != len(sig) {
		return fmt.Errorf("%w: %s", ErrMalformed, telnyxSig)
	}
	if err := freshTimestamp(ts, tsSeconds, now, s.tol, telnyxTS); err != nil {
		return err
	}
	msg := telnyxMessage(ts, r.Body)
	for _, k := range s.keys {
		if ed25519.Verify(k, msg, sig[:]) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s", ErrNoMatch, telnyxSig)
}

func (s *telnyxScheme) Sign(r *Request, now time.Time) error {
	ts := formatTime(now, tsSeconds)
	setHeader(r, telnyxTS, ts)
	setHeader(r, telnyxSig, base64.StdEncoding.EncodeToString(ed25519.Sign(s.priv, telnyxMessage(ts, r.Body))))
	return nil
}
