package main

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

func runCheck(t *testing.T, yaml string, vars map[string]string) (string, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	app := &App{Stdout: &out, Stderr: io.Discard, LookupEnv: env(vars)}
	err := app.Run(context.Background(), []string{"check", "--config", path})
	return out.String(), err
}

const validSource = `sources:
  stripe:
    provider: stripe
    secrets: [${STRIPE_SECRET}]
    forward: {url: "http://127.0.0.1:9000/events"}
`

func TestCheckNamesTheField(t *testing.T) {
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"unknown provider", strings.Replace(validSource, "provider: stripe", "provider: strype", 1), "sources.stripe.provider"},
		{"missing secret", strings.Replace(validSource, "secrets: [${STRIPE_SECRET}]", "secrets: []", 1), "sources.stripe"},
		{"unset variable", strings.Replace(validSource, "${STRIPE_SECRET}", "${NOT_SET_ANYWHERE}", 1), "sources.stripe.secrets[0]: ${NOT_SET_ANYWHERE} is not set"},
		{"bad template", validSource + "    event_id: \"{jsn:id}\"\n", "sources.stripe.event_id"},
		{"bad runs", validSource + "    runs: sometimes\n", "sources.stripe.runs"},
		{"bad forward url", strings.Replace(validSource, "http://127.0.0.1:9000/events", "ftp://x", 1), "sources.stripe.forward.url"},
		{"unknown key", validSource + "    retries: 3\n", "sources.stripe.retries: unknown field"},
		{"bad store", "store: {kind: mongo}\n" + validSource, "store.kind"},
		{"open admin without token", "admin: {listen: 0.0.0.0:8081}\n" + validSource, "admin.token"},
		{"allowed host with a port", "admin: {listen: 127.0.0.1:8081, allowed_hosts: [gateway, \"gw:8081\"]}\n" + validSource, "admin.allowed_hosts[1]"},
		{"short admin token", "admin: {listen: 0.0.0.0:8081, token: short}\n" + validSource, "admin.token: is 5 bytes, want at least 16"},
		{"allowed host wildcard", "admin: {listen: 127.0.0.1:8081, allowed_hosts: [\"*.example\"]}\n" + validSource, "admin.allowed_hosts[0]"},
		{"bad size", validSource + "    max_body: lots\n", "max_body"},
		{"no sources", "listen: 127.0.0.1:8080\n", "sources"},
		{"cap without a max", "ledger: {caps: {reply: {window: 5m}}}\n" + validSource, "ledger.caps.reply.max: must be at least 1"},
		{"cap without a window", "ledger: {caps: {reply: {max: 3}}}\n" + validSource, "ledger.caps.reply.window: must be positive"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := runCheck(t, tc.yaml, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want it to mention %q", err, tc.want)
			}
		})
	}
}

func TestCheckPrintsRoutes(t *testing.T) {
	out, err := runCheck(t, validSource, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "POST /hooks/stripe") || !strings.Contains(out, "event_id={json:id}") {
		t.Fatalf("output:\n%s", out)
	}
}

// Every example configuration in configs/ passes check (with its
// variables set).
func TestExampleConfigsPassCheck(t *testing.T) {
	files, err := filepath.Glob("../../configs/*.yaml")
	more, _ := filepath.Glob("../../examples/*gateway*.yaml")
	files = append(files, more...)
	if err != nil || len(files) == 0 {
		t.Fatalf("no configs found: %v", err)
	}
	vars := map[string]string{}
	for _, name := range []string{"GATEWAY_ADMIN_TOKEN", "DATABASE_URL", "AGENT_TOKEN", "GITHUB_WEBHOOK_SECRET", "SLACK_SIGNING_SECRET",
		"SHOPIFY_SECRET", "SHOPIFY_PREVIOUS_SECRET", "CRM_WEBHOOK_SECRET", "STRIPE_WEBHOOK_SECRET", "NYLAS_WEBHOOK_SECRET"} {
		vars[name] = "test-value-" + name
	}
	vars["AGENT_URL"] = "http://agent:9000/events"
	for _, name := range []string{"FORWARD_SIGNING_SECRET", "CLERK_WEBHOOK_SECRET", "STANDARD_WEBHOOK_SECRET", "WEBHOOK_SECRET"} {
		vars[name] = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	}
	vars["DATABASE_URL"] = "postgres://postgres@127.0.0.1:5432/test"
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := runCheck(t, string(data), vars); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
}

// A file with five mistakes: check prints all five, one per line, each
// with its field, in one run.
func TestCheckPrintsEveryProblem(t *testing.T) {
	const file = `lisen: 127.0.0.1:8080
server: {shutdown_grace: 30}
sources:
  stripe:
    provider: stripe
    secrets: [${STRIPE_SECRT}]
    max_body: 1MB
    forward: {url: "http://127.0.0.1:9000/events", timeout: ${FORWARD_TIMEOUT}}
`
	_, err := runCheck(t, file, map[string]string{"FORWARD_TIMEOUT": ""})
	if err == nil {
		t.Fatal("check accepted a broken file")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{
		"5 problems:",
		"  lisen: unknown field, did you mean `listen`? (line 1)",
		"  server.shutdown_grace: 30 has no unit: write 30s",
		"  sources.stripe.secrets[0]: ${STRIPE_SECRT} is not set (line 6)",
		"  sources.stripe.max_body: \"1MB\" is ambiguous",
		"  sources.stripe.forward.timeout: ${FORWARD_TIMEOUT} is set but empty (line 8)",
	}
	if len(lines) != len(want) {
		t.Fatalf("check printed %d lines, want %d:\n%s", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d = %q, want it to contain %q", i, lines[i], w)
		}
	}
}

// One source with four mistakes of its own: check names all four in one
// run (not the first), suggests the provider meant, calls a missing URL
// missing, and refuses conversation settings that would do nothing
// without a scope rule.
func TestCheckPrintsEveryProblemOfASource(t *testing.T) {
	const file = `sources:
  chat:
    provider: strpe
    secrets: [whsec_x]
    forward:
      mode: queued
      order: scope
      debounce: {quiet: 2s, max_wait: 10s}
`
	_, err := runCheck(t, file, nil)
	if err == nil {
		t.Fatal("check accepted a broken source")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{
		"4 problems:",
		"  sources.chat.provider: unknown provider \"strpe\", did you mean `stripe`?",
		"  sources.chat.forward.url: missing:",
		"  sources.chat.forward.order: needs scope:",
		"  sources.chat.forward.debounce: needs scope:",
	}
	if len(lines) != len(want) {
		t.Fatalf("check printed %d lines, want %d:\n%s", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.Contains(lines[i], w) {
			t.Errorf("line %d = %q, want it to contain %q", i, lines[i], w)
		}
	}
}

// A valid source that forwards without forward.signing_secret passes
// check with one warning naming it; a signed one gets none.
func TestCheckWarnsOfUnsignedForwards(t *testing.T) {
	file := validSource + `  signed:
    provider: github
    secrets: [x]
    forward: {url: "http://127.0.0.1:9000/gh", signing_secret: "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}
`
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(file), 0o600); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	app := &App{Stdout: &out, Stderr: &errOut, LookupEnv: env(map[string]string{"STRIPE_SECRET": "whsec_x"})}
	if err := app.Run(context.Background(), []string{"check", "--config", path}); err != nil {
		t.Fatal(err)
	}
	got := strings.TrimSpace(errOut.String())
	if got != "warning: sources.stripe.forward.signing_secret is not set: the agent cannot tell the gateway's forwards from anyone else's requests to its URL" {
		t.Fatalf("check's warnings:\n%s", got)
	}
}

func TestCheckSaysAdminDisabled(t *testing.T) {
	out, err := runCheck(t, "admin: {listen: \"\"}\n"+validSource, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "admin disabled") {
		t.Fatalf("output:\n%s", out)
	}
}

// The compose example's gateway passes check with exactly the environment
// the compose file gives it (${VAR:-default} as compose expands it, with
// nothing set in the shell).
func TestComposeConfigPassesCheck(t *testing.T) {
	raw, err := os.ReadFile("../../examples/docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var compose struct {
		Services map[string]struct {
			Environment map[string]string `yaml:"environment"`
			Volumes     []string          `yaml:"volumes"`
			Ports       []string          `yaml:"ports"`
		} `yaml:"services"`
	}
	if err := yaml.Unmarshal(raw, &compose); err != nil {
		t.Fatal(err)
	}
	gw, ok := compose.Services["gateway"]
	if !ok {
		t.Fatal("docker-compose.yml has no gateway service")
	}
	vars := map[string]string{}
	dflt := regexp.MustCompile(`\$\{[A-Z_]+:-([^}]*)\}`)
	for k, v := range gw.Environment {
		vars[k] = dflt.ReplaceAllString(v, "$1")
	}
	config := ""
	for _, v := range gw.Volumes {
		if host, target, _ := strings.Cut(strings.TrimSuffix(v, ":ro"), ":"); target == "/etc/replyonce/gateway.yaml" {
			config = filepath.Join("../../examples", host)
		}
	}
	if config == "" {
		// No mount: the image's own default config.
		config = "../../configs/docker.yaml"
	}
	data, err := os.ReadFile(config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := runCheck(t, string(data), vars); err != nil {
		t.Fatalf("%s with the compose environment %v: %v", config, vars, err)
	}
	// The console is reachable from the host running Compose, and only
	// from it: the admin port is published on loopback, the webhook port
	// on every interface.
	if !slices.Contains(gw.Ports, "127.0.0.1:8081:8081") || !slices.Contains(gw.Ports, "8080:8080") {
		t.Fatalf("gateway ports %q, want the webhook port 8080 published and the admin port 8081 on 127.0.0.1 only", gw.Ports)
	}
	if !strings.Contains(string(data), "listen: 0.0.0.0:8081") {
		t.Fatalf("%s: the admin listener is not on 0.0.0.0:8081 inside the container, so the published port reaches nothing", config)
	}
}

// check shows which sources let the agent answer, and refuses
// respond: agent on a queued source naming the field.
func TestCheckShowsRespond(t *testing.T) {
	inline := strings.Replace(validSource, `forward: {url: "http://127.0.0.1:9000/events"}`,
		`forward: {url: "http://127.0.0.1:9000/events", mode: inline, respond: agent, respond_limit: 16KiB}`, 1)
	out, err := runCheck(t, inline, nil)
	if err != nil || !strings.Contains(out, "the agent answers (up to 16384 bytes)") {
		t.Fatalf("check: %v\n%s", err, out)
	}
	_, err = runCheck(t, strings.Replace(inline, "mode: inline", "mode: queued", 1), nil)
	if err == nil || !strings.Contains(err.Error(), "sources.stripe.forward.respond: agent needs forward.mode: inline") {
		t.Fatalf("respond: agent on a queued source: %v", err)
	}
}
