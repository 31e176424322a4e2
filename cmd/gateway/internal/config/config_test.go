package config

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ingress/field"
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
	if len(s.Signature.Secrets) != 1 || s.Signature.Secrets[0] != secret {
		t.Fatalf("secrets = %q, want [%q]", s.Signature.Secrets, secret)
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
	if got := cfg.Sources["s"].Signature.Secrets[0]; got != "pa$word-x" {
		t.Fatalf("secret = %q, want pa$word-x", got)
	}
}

func TestFieldNamedErrors(t *testing.T) {
	for _, tc := range []struct{ name, yaml, want string }{
		{"unset", base, "sources.s.secrets[0]: ${SECRET} is not set"},
		{"bad duration", strings.Replace(base, "${TIMEOUT}", "soon", 1), "sources.s.forward.timeout"},
		{"unknown top-level key", "lisen: x\n" + base, "lisen: unknown field"},
		{"bad variable name", strings.Replace(base, "${TIMEOUT}", "${1X}", 1), "a variable name is letters"},
		{"negative tls check", "tls: {cert: c.pem, key: k.pem, check_every: -1m}\n" + base, "tls.check_every: -1m0s is negative"},
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
}

// One run lists every problem of the file, each naming its field and line,
// with a hint of what to write instead.
func TestEveryProblemInOneRun(t *testing.T) {
	const file = `listen: 127.0.0.1:8080
store: {kind: bolts}
sources:
  s:
    provider: github
    secrets: [${SECRET}, ${EMPTY}]
    max_body: 1MB
    forwrd: {url: "http://127.0.0.1:9000/x"}
    retry_after: 10
`
	_, err := Parse([]byte(file), lookup(map[string]string{"EMPTY": ""}))
	problems := field.List(err)
	want := []string{
		"store.kind: \"bolts\" is not one of memory, bolt, postgres, redis, did you mean `bolt`? (line 2)",
		"sources.s.secrets[0]: ${SECRET} is not set (line 6)",
		"sources.s.secrets[1]: ${EMPTY} is set but empty (line 6)",
		"sources.s.max_body: \"1MB\" is ambiguous (1000 or 1024?): write 1MiB, or the number of bytes (line 7)",
		"sources.s.forwrd: unknown field, did you mean `forward`? (line 8)",
		"sources.s.retry_after: 10 has no unit: write 10s (or 10ms, 10m) (line 9)",
	}
	var got []string
	for _, p := range problems {
		got = append(got, p.Error())
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("problems:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if err.Error() != strings.Join(want, "\n") {
		t.Fatalf("errors.Join text:\n%s", err)
	}
}

// A field whose value was already reported does not also get the
// consequences of that value being missing.
func TestNoKnockOnProblems(t *testing.T) {
	y := strings.Replace(base, "${TIMEOUT}", "3s", 1)
	_, err := Parse([]byte(y), lookup(nil))
	if p := field.List(err); len(p) != 1 || p[0].Field != "sources.s.secrets[0]" {
		t.Fatalf("problems: %v", err)
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
		{withForward("mode: queued, accept_wait: 2s"), "sources.s.forward.accept_wait: 2s is not between 0 and 1s"},
		{withForward("mode: queued, accept_wait: -1ms"), "sources.s.forward.accept_wait: -1ms is not between 0 and 1s"},
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
	if q := defSrcs[0].Queued().Policy; q.Mode != "queued" || q.Concurrency != 16 || *q.AcceptWait != 50*time.Millisecond || !slices.Equal(q.Retry.Backoff.Schedule, dispatch.DefaultSchedule) {
		t.Fatalf("default queue settings: %+v", q)
	}
	cfg, err := Parse([]byte(withForward("mode: queued, concurrency: 4, accept_wait: 0s, retry: {schedule: [0s, 1m], max_age: 1h}, reject: [402]")), vars)
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := cfg.BuildSources()
	if err != nil {
		t.Fatal(err)
	}
	q := srcs[0].Queued().Policy
	if q.Mode != "queued" || q.Concurrency != 4 || *q.AcceptWait != 0 || len(q.Retry.Backoff.Schedule) != 2 || q.Retry.Backoff.Schedule[1] != time.Minute || q.Retry.Backoff.MaxAge != time.Hour || q.Retry.Reject[0] != 402 {
		t.Fatalf("queue settings: %+v", q)
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
	if s := cfg.Sources["s"]; s.MaxBody != 2048 || s.Signature.Secrets[0] != "123" {
		t.Errorf("source = max_body %d secrets %q, want 2048 and [123]", s.MaxBody, s.Signature.Secrets)
	}
	if cfg.Store.Path != "0012" {
		t.Errorf("store.path = %q, want the text 0012", cfg.Store.Path)
	}
}

// forward.respond: agent reaches the source, and with the default queued
// mode it is refused naming the field and what to write instead.
func TestRespondSettings(t *testing.T) {
	withForward := func(extra string) string {
		return strings.Replace(base, "timeout: ${TIMEOUT}}", "timeout: ${TIMEOUT}, "+extra+"}", 1)
	}
	vars := lookup(map[string]string{"SECRET": "s", "TIMEOUT": "1s"})
	for _, tc := range []struct{ yaml, want string }{
		{withForward("respond: agent"), "sources.s.forward.respond: agent needs forward.mode: inline: a queued source answers the provider before the agent runs"},
		{withForward("mode: inline, respond: agent, respond_limit: 1MB"), "sources.s.forward.respond_limit"},
		{withForward("mode: inline, respond: agent, respond_limit: 2MiB"), "sources.s.forward.respond_limit: 2097152 bytes: want 1 to 1048576"},
		{withForward("mode: inline, respond: yes"), `sources.s.forward.respond: "yes" is not one of gateway, agent`},
	} {
		cfg, err := Parse([]byte(tc.yaml), vars)
		if err == nil {
			_, err = cfg.BuildSources()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.yaml, err, tc.want)
		}
	}
	cfg, err := Parse([]byte(withForward("mode: inline, respond: agent, respond_limit: 16KiB")), vars)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cfg.BuildSources(); err != nil {
		t.Fatalf("an inline source with respond: agent: %v", err)
	}
	if f := cfg.Sources["s"].Forward; f.Respond != "agent" || f.RespondLimit != 16<<10 {
		t.Fatalf("forward = %+v", f)
	}
}
