package signatures

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"
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

// Every provider states its timestamp rule, and the rule is what Verify does: a stated window
// of N s accepts N-2 s either way and refuses N+2 s either way as ErrStale; "not checked unless
// tolerance is set" accepts an hour either way until a tolerance is set; "none" accepts an hour
// either way. Providers that fetch keys have their own tests and are skipped here.
func TestTimestampRuleIsWhatVerifyDoes(t *testing.T) {
	window := regexp.MustCompile(`refused when more than (\d+) s before or after`)
	for _, p := range Providers() {
		info, _ := Lookup(p)
		rule := info.Timestamp
		if rule == "" {
			t.Errorf("%s: no timestamp rule", p)
			continue
		}
		m := window.FindStringSubmatch(rule)
		if info.Timestamped != (m != nil) {
			t.Errorf("%s: Timestamped %v but the rule says %q", p, info.Timestamped, rule)
		}
		if m != nil && fmt.Sprint(int(info.DefaultTolerance/time.Second)) != m[1] {
			t.Errorf("%s: default tolerance %s but the rule says %s s", p, info.DefaultTolerance, m[1])
		}
		if familyOwnHarness[p] || p == "hmac" || p == "monday" {
			continue // fetched keys; configured; a JWT whose exp the signer sets
		}
		keys := testKeys(t, p)
		at := func(d time.Duration, tol time.Duration) error {
			cfg := testConfig(p, keys[0].verify)
			cfg.Tolerance = tol
			return verify(t, p, cfg, signed(t, p, keys[0], t0.Add(d)), t0)
		}
		switch {
		case m != nil:
			n := info.DefaultTolerance
			for _, d := range []time.Duration{n - 2*time.Second, -n + 2*time.Second} {
				if err := at(d, 0); err != nil {
					t.Errorf("%s: signed %s from now, inside the stated %s: %v", p, d, n, err)
				}
			}
			for _, d := range []time.Duration{n + 2*time.Second, -n - 2*time.Second} {
				if err := at(d, 0); !errors.Is(err, ErrStale) {
					t.Errorf("%s: signed %s from now, outside the stated %s: %v, want ErrStale", p, d, n, err)
				}
			}
		case strings.Contains(rule, "not checked unless tolerance is set"):
			for _, d := range []time.Duration{time.Hour, -time.Hour} {
				if err := at(d, 0); err != nil {
					t.Errorf("%s: signed %s from now without a tolerance: %v", p, d, err)
				}
				if err := at(d, 5*time.Minute); !errors.Is(err, ErrStale) {
					t.Errorf("%s: signed %s from now, tolerance 5m: %v, want ErrStale", p, d, err)
				}
			}
		default:
			for _, d := range []time.Duration{time.Hour, -time.Hour} {
				if err := at(d, 0); err != nil {
					t.Errorf("%s: rule %q, but signed %s from now: %v", p, rule, d, err)
				}
			}
		}
	}
}

// docs/provider-proofs.md says of every provider whether it has an SDK oracle, a published
// vector, or neither and why: a provider added without a line there fails here.
func TestProviderProofsNamesEveryProvider(t *testing.T) {
	doc, err := os.ReadFile("../docs/provider-proofs.md")
	if err != nil {
		t.Fatal(err)
	}
	text := string(doc)
	oracles, _, _ := strings.Cut(strings.SplitN(text, "<!-- oracles:begin -->", 2)[1], "<!-- oracles:end -->")
	_, neither, _ := strings.Cut(text, "## Neither, and why")
	neither, _, _ = strings.Cut(neither, "\n## ")
	for _, p := range Providers() {
		name := "`" + p + "`"
		n := strings.Count(oracles, "| "+name+" |") + strings.Count(neither, name)
		if p == "recurly" {
			n++ // the published vector without an oracle, named in its own paragraph
		}
		if n != 1 {
			t.Errorf("%s is named %d times in docs/provider-proofs.md's lists, want once", p, n)
		}
	}
}
