package signatures

import (
	"strings"
	"testing"
)

// Every provider has a scheme line, and every provider with a handshake says which.
func TestDescriptions(t *testing.T) {
	for _, p := range Providers() {
		info, _ := Lookup(p)
		if info.Scheme == "" || info.Scheme == "custom" {
			t.Errorf("%s: no scheme description", p)
		}
		if info.Handshake && info.HandshakeNote == "" {
			t.Errorf("%s: handshake without a note", p)
		}
	}
	// Derived from the table: Orb's line names its hash, encoding, signed bytes and header.
	if got, _ := Lookup("orb"); got.Scheme != "HMAC-SHA256 (hex) of v1:{timestamp}:{body} in X-Orb-Signature (v1=… list)" {
		t.Errorf("orb: %q", got.Scheme)
	}
	if got, _ := Lookup("onfleet"); !strings.Contains(got.Scheme, "HMAC-SHA512 (hex, hex key)") {
		t.Errorf("onfleet: %q", got.Scheme)
	}
}
