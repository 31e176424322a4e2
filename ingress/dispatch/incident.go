package dispatch

import (
	"context"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ledger"
)

// incidentWarnEvery bounds the warn lines of one incident after its first:
// at most one per source per minute, with the counts since the last one.
const incidentWarnEvery = time.Minute

// recoveryCountLimit bounds the scopes read to count a source's waiting
// events for the recovery line.
const recoveryCountLimit = 1000

// incident follows one source's run of failed attempts in this process,
// so that the log reads as the story of an outage rather than one line per
// attempt: a warn at the first failure, at most one warn a minute while it
// lasts, one info line when the agent answers again. Each attempt's own
// line stays at info.
type incident struct {
	mu       sync.Mutex
	failing  bool
	since    time.Time // the first failed attempt of the incident
	failures int       // failed attempts since then
	lastWarn time.Time
	warned   int // failures counted in the last warn line
	lastErr  string
}

// failed is called after each attempt the agent failed (no answer, 5xx,
// 429, a configuration fault): it logs the incident's first failure, and
// then its progress at most once per incidentWarnEvery.
func (d *Dispatcher) failed(s *source, out forward.Outcome, fields []zap.Field) {
	now := d.now()
	reason := ""
	if out.Err != nil {
		reason = out.Err.Error()
	}
	in := &s.incident
	in.mu.Lock()
	in.lastErr = reason
	if !in.failing {
		in.failing, in.since, in.failures, in.lastWarn, in.warned = true, now, 1, now, 1
		in.mu.Unlock()
		d.log.Warn("dispatch: the agent is failing; events are kept and retried",
			append(fields, zap.String("error", reason))...)
		return
	}
	in.failures++
	if now.Sub(in.lastWarn) < incidentWarnEvery {
		in.mu.Unlock()
		return
	}
	newly, total, since := in.failures-in.warned, in.failures, in.since
	in.lastWarn, in.warned = now, in.failures
	in.mu.Unlock()
	d.log.Warn("dispatch: the agent is still failing",
		zap.String("source", s.src.Name), zap.Int("failed_attempts", total), zap.Int("failed_since_last_line", newly),
		zap.Duration("failing_for", now.Sub(since).Round(time.Second)), zap.String("error", reason))
}

// answered is called after each attempt the agent answered (2xx, or a
// rejection, which is an answer too): when it ends an incident it logs one
// info line saying how long it lasted and how many events wait.
func (d *Dispatcher) answered(s *source) {
	in := &s.incident
	in.mu.Lock()
	if !in.failing {
		in.mu.Unlock()
		return
	}
	now := d.now()
	down, failures := now.Sub(in.since).Round(time.Second), in.failures
	in.failing, in.failures, in.warned, in.lastErr = false, 0, 0, ""
	in.mu.Unlock()
	fields := []zap.Field{zap.String("source", s.src.Name), zap.Duration("failing_for", down), zap.Int("failed_attempts", failures)}
	ctx, cancel := context.WithTimeout(d.forwards, settleTimeout)
	waiting, err := d.l.ListDeliveries(ctx, ledger.DeliveryFilter{Source: s.src.Name, Status: ledger.DeliveryQueued, Limit: recoveryCountLimit})
	cancel()
	if err != nil {
		d.log.Info("dispatch: agent answering again after "+down.String(), append(fields, zap.NamedError("count_error", err))...)
		return
	}
	d.log.Info("dispatch: agent answering again after "+down.String()+"; "+plural(len(waiting), "event")+" waiting",
		append(fields, zap.Int("waiting", len(waiting)))...)
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
