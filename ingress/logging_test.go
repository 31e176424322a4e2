package ingress_test

import (
	"net/http"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/replyonce/gateway/ingress"
)

// At log.level warn an operator still sees an agent outage (warn) and a
// store outage (error); routine answers stay at info.
func TestFailuresShowAtWarn(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	h := newLoggedHarness(t, zap.New(core),
		githubSource("github"),
		githubSource("down", func(c *ingress.SourceConfig) { c.Forward.URL = "http://127.0.0.1:1/events" }))

	if r := h.postGitHub(t, "github", "d-fine"); r.Status != http.StatusOK {
		t.Fatalf("delivery: %s", r)
	}
	if n := logs.Len(); n != 0 {
		t.Fatalf("a delivered event logged %d lines at warn or above: %v", n, logs.All())
	}
	if r := h.postGitHub(t, "down", "d-agent-down"); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("agent down: %s", r)
	}
	agent := logs.TakeAll()
	if len(agent) != 1 || agent[0].Level != zapcore.WarnLevel || agent[0].ContextMap()["status"] != int64(503) {
		t.Fatalf("agent down logged %v, want one warn line with status 503", agent)
	}
	h.store.down.Store(true)
	if r := h.postGitHub(t, "github", "d-store-down"); r.Status != http.StatusServiceUnavailable {
		t.Fatalf("store down: %s", r)
	}
	store := logs.TakeAll()
	if len(store) != 1 || store[0].Level != zapcore.ErrorLevel {
		t.Fatalf("store down logged %v, want one error line", store)
	}
}

// A flood of bad signatures logs a bounded number of lines, each with the
// reason, and the line after a quiet window says how many were left out.
func TestUnauthorizedFloodIsBounded(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	h := newLoggedHarness(t, zap.New(core), githubSource("github"))
	for i := range 200 {
		req := h.newRequest(t, http.MethodPost, "/hooks/github", githubHeader("d-probe"), []byte(`{"forged":`+strings.Repeat("1", i%3+1)+`}`))
		req.Header.Set("X-Hub-Signature-256", "sha256=00")
		if r := h.do(t, req); r.Status != http.StatusUnauthorized {
			t.Fatalf("forged request %d: %s", i, r)
		}
	}
	lines := logs.FilterMessage("webhook").All()
	if len(lines) == 0 || len(lines) > 10 {
		t.Fatalf("200 forged requests logged %d lines, want between 1 and 10", len(lines))
	}
	if lines[0].Level != zapcore.InfoLevel || lines[0].ContextMap()["reason"] == nil {
		t.Fatalf("a 401 line: %v", lines[0])
	}
	h.clock.Advance(2 * 60e9)
	req := h.newRequest(t, http.MethodPost, "/hooks/github", githubHeader("d-probe"), []byte(`{}`))
	req.Header.Set("X-Hub-Signature-256", "sha256=00")
	h.do(t, req)
	last := logs.FilterMessage("webhook").All()
	if n := len(last); n != len(lines)+1 || last[n-1].ContextMap()["suppressed"] != int64(200-len(lines)) {
		t.Fatalf("after the window: %d lines, last %v", n, last[n-1].ContextMap())
	}
}

// A duplicate's line names the delivery that reached the agent, not 0.
func TestDuplicateLogsOriginalDelivery(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	h := newLoggedHarness(t, zap.New(core), githubSource("github"))
	h.postGitHub(t, "github", "d-twice")
	h.postGitHub(t, "github", "d-twice")
	lines := logs.FilterMessage("webhook").All()
	if len(lines) != 2 || lines[1].ContextMap()["decision"] != "duplicate" || lines[1].ContextMap()["delivery"] != int64(1) {
		t.Fatalf("lines: %v", lines)
	}
}
