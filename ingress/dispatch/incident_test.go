package dispatch_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ledger"
)

// An outage reads as a story in the log: one warn at the first failed
// attempt with the reason in plain words, at most one warn a minute while
// it lasts (with counts), one info line when the agent answers again; the
// attempt record keeps the same plain words for `events show`.
func TestIncidentLogFollowsAnOutage(t *testing.T) {
	h := newHarness(t, queuedSource())
	var down atomic.Bool
	down.Store(true)
	h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		if down.Load() {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	const plain = "the agent refused the gateway's credentials (401 Unauthorized): check forward.signing_secret and forward.headers"
	ids := []string{"o-1", "o-2", "o-3"}
	for _, id := range ids {
		h.post(t, id)
	}
	settle(t, h.d)
	warns := func() []observer.LoggedEntry {
		return h.logs.FilterLevelExact(zapcore.WarnLevel).AllUntimed()
	}
	if w := warns(); len(w) != 1 || !strings.Contains(w[0].Message, "the agent is failing") || w[0].ContextMap()["error"] != plain {
		t.Fatalf("after 3 failed attempts, warn lines %+v; want one naming %q", w, plain)
	}
	recs, err := h.ledger.Queue().AttemptsOf(context.Background(), h.item(t, "o-1"))
	if err != nil || len(recs) != 1 || recs[0].Error != plain {
		t.Fatalf("attempt records %+v, %v; want the plain words", recs, err)
	}

	// The second attempts, within the minute: no further warn.
	h.clock.Advance(5 * time.Second)
	h.sweep(t)
	if w := warns(); len(w) != 1 {
		t.Fatalf("%d warn lines within the first minute, want 1: %+v", len(w), w)
	}
	// The third attempts, minutes later: one warn with the counts.
	h.clock.Advance(5 * time.Minute)
	h.sweep(t)
	w := warns()
	if len(w) != 2 || !strings.Contains(w[1].Message, "still failing") {
		t.Fatalf("warn lines %+v, want a second one saying still failing", w)
	}
	if m := w[1].ContextMap(); m["failed_attempts"] != int64(7) || m["failed_since_last_line"] != int64(6) || m["error"] != plain {
		t.Fatalf("still failing line %v, want 7 failed attempts (the first of this round), 6 since the last line", m)
	}

	// The agent is fixed: one recovery line, at info.
	down.Store(false)
	h.clock.Advance(30 * time.Minute)
	h.sweep(t)
	for _, id := range ids {
		if q := h.item(t, id); q.Status != ledger.DeliveryDelivered {
			t.Fatalf("%s: %s, want delivered", id, q.Status)
		}
	}
	rec := h.logs.FilterMessageSnippet("agent answering again").AllUntimed()
	if len(rec) != 1 || rec[0].Level != zapcore.InfoLevel || !strings.Contains(rec[0].Message, "after 35m5s") {
		t.Fatalf("recovery lines %+v, want one info line saying after 35m5s", rec)
	}
	if w := warns(); len(w) != 2 {
		t.Fatalf("warn lines after recovery %+v, want still 2", w)
	}
}

// Attempts sent while the agent was down can fail after it is back, since
// several are in flight at once: such a failure, of an attempt that
// started before one the agent answered, opens no second incident, so an
// outage has one recovery line, not one per straggler.
func TestAStragglerOfAnOutageOpensNoNewIncident(t *testing.T) {
	h := newHarness(t, queuedSource())
	refused := forward.Outcome{Kind: forward.Retry, Err: errors.New("nothing is listening")}
	t0 := h.clock.Now()
	h.d.AttemptEnded("github", refused, t0) // the outage
	h.clock.Advance(time.Second)
	h.d.AttemptEnded("github", forward.Outcome{Kind: forward.Delivered, Status: 200}, h.clock.Now()) // the agent is back
	h.d.AttemptEnded("github", refused, t0.Add(500*time.Millisecond))                                // sent before, failed after
	h.clock.Advance(time.Second)
	h.d.AttemptEnded("github", forward.Outcome{Kind: forward.Delivered, Status: 200}, h.clock.Now())
	if n := h.logs.FilterMessageSnippet("the agent is failing").Len(); n != 1 {
		t.Fatalf("%d incidents opened, want 1", n)
	}
	if n := h.logs.FilterMessageSnippet("agent answering again").Len(); n != 1 {
		t.Fatalf("%d recovery lines, want 1", n)
	}
	// A failure of an attempt started after the answer is a new incident.
	h.d.AttemptEnded("github", refused, h.clock.Now())
	if n := h.logs.FilterMessageSnippet("the agent is failing").Len(); n != 2 {
		t.Fatalf("%d incidents after a fresh failure, want 2", n)
	}
}
