package config

import (
	"strings"
	"testing"
	"time"
)

func lookup(vars map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
}

const base = `sources:
  s:
    provider: github
    secrets: [${SECRET}]
    forward: {url: "http://127.0.0.1:9000/x", timeout: ${TIMEOUT}}
`

func TestVariablesAreValuesNeverYAML(t *testing.T) {
	// A secret full of YAML syntax stays one string.
	secret := `a: b, [c] {d} # e $$ "f"`
	cfg, err := Parse([]byte(base), lookup(map[string]string{"SECRET": secret, "TIMEOUT": "3s"}))
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Sources["s"]
	if len(s.Secrets) != 1 || s.Secrets[0] != secret {
		t.Fatalf("secrets = %q, want [%q]", s.Secrets, secret)
	}
	if s.Forward.Timeout != 3*time.Second {
		t.Fatalf("a variable feeding a duration: %v", s.Forward.Timeout)
	}
}

func TestDollarEscapes(t *testing.T) {
	y := strings.Replace(base, "[${SECRET}]", `["pa$$word-${SECRET}"]`, 1)
	cfg, err := Parse([]byte(y), lookup(map[string]string{"SECRET": "x", "TIMEOUT": "1s"}))
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Sources["s"].Secrets[0]; got != "pa$word-x" {
		t.Fatalf("secret = %q, want pa$word-x", got)
	}
}

func TestFieldNamedErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unset", base, "sources.s.secrets[0]: ${SECRET} is not set"},
		{"bad duration", strings.Replace(base, "${TIMEOUT}", "soon", 1), "sources.s.forward.timeout"},
		{"unknown top-level key", "lisen: x\n" + base, "lisen: unknown field"},
		{"bad variable name", strings.Replace(base, "${TIMEOUT}", "${1X}", 1), "a variable name is letters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), lookup(map[string]string{"SECRET": "s", "TIMEOUT": "1s"}))
			if tc.name == "unset" {
				_, err = Parse([]byte(tc.yaml), lookup(nil))
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestDefaults(t *testing.T) {
	cfg, err := Parse([]byte(base), lookup(map[string]string{"SECRET": "s", "TIMEOUT": "1s"}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Store.Kind != "bolt" || cfg.Store.Path != "data/ledger.db" || cfg.Listen != "127.0.0.1:8080" {
		t.Fatalf("defaults: %+v", cfg)
	}
	for in, want := range map[string]ByteSize{"1MiB": 1 << 20, "512KiB": 512 << 10, "2000": 2000, "1 MB": 1000000} {
		if got, err := ParseByteSize(in); err != nil || got != want {
			t.Errorf("ParseByteSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	if _, err := ParseByteSize("-1KiB"); err == nil {
		t.Error("negative size accepted")
	}
}

// ${VAR} feeds a field of any type, decided by the field's Go type and not
// by its name: numbers, durations and sizes get the variable's value as
// YAML reads it, while a string field keeps a numeric-looking value as text.
func TestVariablesFeedFieldsByType(t *testing.T) {
	y := `store: {kind: bolt, path: "${PATH_NUM}"}
ledger: {replay_cache: ${CACHE}, max_attempts: ${ATTEMPTS}, pending_ttl: ${TTL}}
server: {idle_timeout: ${IDLE}}
sources:
  s:
    provider: github
    secrets: ["${SECRET}"]
    max_body: ${BODY}
    forward: {url: "http://127.0.0.1:9000/x"}
`
	cfg, err := Parse([]byte(y), lookup(map[string]string{
		"PATH_NUM": "0012", "CACHE": "77", "ATTEMPTS": "5", "TTL": "90s", "IDLE": "3m", "SECRET": "123", "BODY": "2KiB",
	}))
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Ledger.ReplayCache != 77 || cfg.Ledger.MaxAttempts != 5 || cfg.Ledger.PendingTTL != 90*time.Second {
		t.Errorf("ledger = %+v, want replay_cache 77, max_attempts 5, pending_ttl 90s", cfg.Ledger)
	}
	if cfg.Server.IdleTimeout != 3*time.Minute {
		t.Errorf("server.idle_timeout = %v, want 3m", cfg.Server.IdleTimeout)
	}
	if s := cfg.Sources["s"]; s.MaxBody != 2048 || s.Secrets[0] != "123" {
		t.Errorf("source = max_body %d secrets %q, want 2048 and [123]", s.MaxBody, s.Secrets)
	}
	if cfg.Store.Path != "0012" {
		t.Errorf("store.path = %q, want the text 0012", cfg.Store.Path)
	}
}
