package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// logLines parses a JSON log, failing on any line that is not JSON.
func logLines(t *testing.T, log string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("a raw line in the log: %q", l)
		}
		out = append(out, m)
	}
	return out
}

// Through serve at log.level warn: a store outage and an agent outage
// each leave a line (error, warn), routine lines do not, and durations
// carry their unit.
func TestLogsAtWarnThroughServe(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "volume")
	writeFile(t, blocker, "the volume is not mounted yet")
	cfg := `listen: 127.0.0.1:0
admin: {listen: 127.0.0.1:0}
store: {kind: bolt, path: ` + filepath.Join(blocker, "ledger.db") + `}
log: {level: warn, format: json}
sources:
  stripe:
    provider: stripe
    secrets: [${STRIPE_SECRET}]
    forward: {mode: inline, url: "http://127.0.0.1:` + freePort(t) + `/events", timeout: 1s}
`
	path := filepath.Join(dir, "gateway.yaml")
	writeFile(t, path, cfg)
	g := startGatewayWith(t, path, func(a *App) { a.StoreRetry = 50 * time.Millisecond })
	client := newClient(t)

	body, hdr := stripeEvent(t, "evt_warn_store", nil)
	if r := post(t, client, g.hook("stripe"), body, hdr); r.status != http.StatusServiceUnavailable {
		t.Fatalf("store down: %d %v", r.status, r.body)
	}
	if err := os.Remove(blocker); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the store to open", func() bool { return readyz(t, client, g) == http.StatusOK })
	body, hdr = stripeEvent(t, "evt_warn_agent", nil)
	if r := post(t, client, g.hook("stripe"), body, hdr); r.status != http.StatusServiceUnavailable {
		t.Fatalf("agent down: %d %v", r.status, r.body)
	}
	g.stop(t)

	var storeLine, agentLine map[string]any
	for _, l := range logLines(t, g.stderr.String()) {
		if l["level"] == "info" || l["level"] == "debug" {
			t.Errorf("an %s line at log.level warn: %v", l["level"], l)
		}
		if l["msg"] != "webhook" {
			continue
		}
		switch l["event_id"] {
		case "evt_warn_store":
			storeLine = l
		case "evt_warn_agent":
			agentLine = l
		}
		lat, ok := l["latency"].(string)
		if d, err := time.ParseDuration(lat); !ok || err != nil || d <= 0 {
			t.Errorf("latency %v has no unit", l["latency"])
		}
	}
	if storeLine == nil || storeLine["level"] != "error" || storeLine["status"] != float64(503) {
		t.Errorf("store down: line %v, want an error line with status 503\n%s", storeLine, g.stderr.String())
	}
	if agentLine == nil || agentLine["level"] != "warn" || agentLine["status"] != float64(503) {
		t.Errorf("agent down: line %v, want a warn line with status 503\n%s", agentLine, g.stderr.String())
	}
}

// The store libraries' own output (go-redis, pgx) goes through the
// gateway's logger: a real serve process retrying an unreachable Postgres
// and an unreachable Redis writes nothing but JSON lines to stderr.
func TestLibraryOutputIsJSONLines(t *testing.T) {
	for name, store := range map[string]string{
		"postgres": "{kind: postgres, url: 'postgres://postgres@127.0.0.1:" + freePort(t) + "/test?sslmode=disable&connect_timeout=1'}",
		"redis":    "{kind: redis, url: 'redis://127.0.0.1:" + freePort(t) + "/0?max_retries=-1&dial_timeout=500ms'}",
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "gateway.yaml")
			writeFile(t, path, `listen: 127.0.0.1:0
admin: {listen: ""}
store: `+store+`
log: {level: debug, format: json}
sources:
  stripe:
    provider: stripe
    secrets: [${STRIPE_SECRET}]
    forward: {mode: inline, url: "http://127.0.0.1:9/events"}
`)
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperGatewayProcess$", "-test.count=1")
			cmd.Env = append(os.Environ(), childConfigEnv+"="+path)
			stderr, err := cmd.StderrPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			listening := make(chan string, 1)
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					if a, ok := strings.CutPrefix(sc.Text(), "LISTEN "); ok {
						listening <- a
					}
				}
			}()
			logs := make(chan string, 1)
			go func() { b, _ := io.ReadAll(stderr); logs <- string(b) }()
			select {
			case addr := <-listening:
				// A webhook while the store is down: the request path's
				// store errors are logged too.
				body, hdr := stripeEvent(t, "evt_library_"+name, nil)
				post(t, newClient(t), "http://"+addr+"/hooks/stripe", body, hdr)
			case <-time.After(30 * time.Second):
				t.Error("the child did not start listening with its store down")
			}
			time.Sleep(2500 * time.Millisecond) // a few retries: 1 s, then 2 s
			_ = cmd.Process.Signal(syscall.SIGKILL)
			out := <-logs
			_ = cmd.Wait()
			lines := logLines(t, out)
			t.Logf("%d JSON lines from the child", len(lines))
			retries := 0
			for _, l := range lines {
				if l["msg"] == "store unreachable at start; serving 503 and retrying" {
					retries++
				}
			}
			if retries < 2 {
				t.Fatalf("%d retry lines, want at least 2:\n%s", retries, out)
			}
		})
	}
}
