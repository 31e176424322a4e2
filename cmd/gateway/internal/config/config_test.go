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

// The queued-delivery settings are checked at start, naming their field.
func TestQueueSettings(t *testing.T) {
	withForward := func(extra string) string {
		return strings.Replace(base, "timeout: ${TIMEOUT}}", "timeout: ${TIMEOUT}, "+extra+"}", 1)
	}
	vars := lookup(map[string]string{"SECRET": "s", "TIMEOUT": "1s"})
	for _, tc := range []struct{ yaml, want string }{
		{withForward("mode: later"), `sources.s.forward.mode: "later" is not one of queued, inline`},
		{withForward("mode: queued, concurrency: -1"), "sources.s.forward.concurrency: must be positive"},
		{withForward("mode: queued, retry: {schedule: [0s, -5s]}"), "sources.s.forward.retry.schedule[1]: must not be negative"},
		{withForward("mode: queued, retry: {max_age: -1h}"), "sources.s.forward.retry.max_age: must not be negative"},
		{withForward("reject: [404]"), "sources.s.forward.reject[0]: 404 says the setup"},
		{withForward("reject: [500]"), "sources.s.forward.reject[0]: 500 is not a 4xx status"},
	} {
		cfg, err := Parse([]byte(tc.yaml), vars)
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.yaml, err, tc.want)
		}
	}
	// queued is the default, with the Standard Webhooks schedule.
	def, err := Parse([]byte(base), vars)
	if err != nil {
		t.Fatal(err)
	}
	defSrcs, err := def.BuildSources()
	if err != nil {
		t.Fatal(err)
	}
	if q := defSrcs[0].Queue(); q.Mode != "queued" || q.Concurrency != 16 || len(q.Schedule) != 10 || q.Schedule[9] != 24*time.Hour {
		t.Fatalf("default queue settings: %+v", q)
	}
	cfg, err := Parse([]byte(withForward("mode: queued, concurrency: 4, retry: {schedule: [0s, 1m], max_age: 1h}, reject: [402]")), vars)
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := cfg.BuildSources()
	if err != nil {
		t.Fatal(err)
	}
	q := srcs[0].Queue()
	if q.Mode != "queued" || q.Concurrency != 4 || len(q.Schedule) != 2 || q.Schedule[1] != time.Minute || q.MaxAge != time.Hour || q.Reject[0] != 402 {
		t.Fatalf("queue settings: %+v", q)
	}
}
