package dispatch

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress/dispatch/alerts"
	"github.com/replyonce/gateway/ledger"
)

const (
	// incidentWarnEvery bounds the warn lines of one incident after its
	// first: at most one per source per minute, with the counts since the
	// last one.
	incidentWarnEvery = time.Minute
	// healthSaveEvery bounds the writes of a failing source's health
	// record by one process: its first failure is written at once, later
	// ones at most once a second, added up.
	healthSaveEvery = time.Second
	// healthReadEvery is how often a sweep reads the health record, to
	// learn of incidents other processes recorded (so that the first
	// answer here ends them) and to write failures not yet saved.
	healthReadEvery = time.Second
	// recoveryCountLimit bounds the scopes whose waiting events are made
	// due at once when an incident ends; the rest keep their schedule.
	recoveryCountLimit = 1000
)

// incident follows one source's run of failed attempts, so that the log
// reads as the story of an outage rather than one line per attempt: a
// warn at the first failure, at most one warn a minute while it lasts, one
// info line when the agent answers again. Each attempt's own line stays at
// info. The incident is also recorded in the store (ledger
// RecordAgentFailures), which is what source health reads on every
// instance; the recovery line is written by the process whose answer ended
// the stored incident, so there is one across instances.
type incident struct {
	mu       sync.Mutex
	failing  bool      // this process saw the last attempt fail
	since    time.Time // the first failed attempt seen here
	failures int       // failed attempts seen here since then
	lastWarn time.Time
	warned   int // failures counted in the last warn line
	// unsaved failures are not yet added to the store's record, last
	// written at saved; stored says the store's record was failing when
	// last read or written here.
	unsaved int
	lastErr string
	saved   time.Time
	stored  bool
	// alerted is the start of the last incident this process raised the
	// failing alert for: raised once per incident here, and the ledger
	// claim makes it once across instances.
	alerted time.Time
	// unsavedFrom is when the earliest of the unsaved failed attempts
	// started.
	unsavedFrom time.Time
	// answeredFrom is when the latest attempt the agent answered started:
	// a failure of an attempt started before it (sent while the agent was
	// still down, failing only after it came back) is not a new incident.
	answeredFrom time.Time
}

// failed is called after each attempt the agent failed (no answer, 5xx,
// 429, a configuration fault): it logs the incident's first failure, and
// then its progress at most once per incidentWarnEvery, and records it in
// the store.
//
// started is when the attempt started: one that started before an attempt
// the agent answered says nothing new about the agent, so it opens no
// incident (it still counts toward forward.pause_after).
func (d *Dispatcher) failed(s *source, out forward.Outcome, fields []zap.Field, started time.Time) {
	now := d.now()
	reason := ""
	if out.Err != nil {
		reason = out.Err.Error()
	}
	in := &s.incident
	in.mu.Lock()
	if started.Before(in.answeredFrom) {
		in.mu.Unlock()
		if n := s.src.Policy.PauseAfter; n > 0 && breakerFault(out.Status) {
			d.countFault(s, n, reason)
		}
		return
	}
	in.lastErr = reason
	if in.unsaved == 0 || started.Before(in.unsavedFrom) {
		in.unsavedFrom = started
	}
	in.unsaved++
	save := !in.stored || now.Sub(in.saved) >= healthSaveEvery
	if !in.failing {
		in.failing, in.since, in.failures, in.lastWarn, in.warned = true, now, 1, now, 1
		in.mu.Unlock()
		d.log.Warn("dispatch: the agent is failing; events are kept and retried",
			append(fields, zap.String("error", reason))...)
	} else {
		in.failures++
		warn := now.Sub(in.lastWarn) >= incidentWarnEvery
		newly, total, since := in.failures-in.warned, in.failures, in.since
		if warn {
			in.lastWarn, in.warned = now, in.failures
		}
		in.mu.Unlock()
		if warn {
			d.log.Warn("dispatch: the agent is still failing",
				zap.String("source", s.src.Name), zap.Int("failed_attempts", total), zap.Int("failed_since_last_line", newly),
				zap.Duration("failing_for", now.Sub(since).Round(time.Second)), zap.String("error", reason))
		}
	}
	if save {
		d.saveFailures(s)
	}
	if n := s.src.Policy.PauseAfter; n > 0 && breakerFault(out.Status) {
		d.countFault(s, n, reason)
	}
}

// breakerFault says whether an agent's status counts toward
// forward.pause_after: the answers that point at the gateway's
// configuration, which retrying cannot fix.
func breakerFault(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusGone:
		return true
	}
	return false
}

// countFault counts one configuration-fault answer in the store and, on
// the count that reaches a multiple of pauseAfter (one process across
// instances), pauses the source: its events keep queueing, and resume
// delivers them.
func (d *Dispatcher) countFault(s *source, pauseAfter int, reason string) {
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	faults, err := d.l.Sources().RecordAgentFault(ctx, s.src.Name, reason)
	if err != nil {
		d.metrics.storeErrors.WithLabelValues(s.src.Name).Inc()
		d.log.Warn("dispatch: counting a configuration fault for forward.pause_after failed", zap.String("source", s.src.Name), zap.Error(err))
		return
	}
	if faults%pauseAfter != 0 {
		return
	}
	if err := d.l.Sources().SetSourcePaused(ctx, s.src.Name, true); err != nil {
		d.metrics.storeErrors.WithLabelValues(s.src.Name).Inc()
		d.log.Error("dispatch: forward.pause_after reached but pausing the source failed", zap.String("source", s.src.Name), zap.Error(err))
		return
	}
	// As the admin API's pause: stopped here at once, other processes
	// within a poll.
	d.PauseNow(s.src.Name, true)
	d.log.Warn("dispatch: the source paused itself: its agent refused "+strconv.Itoa(faults)+" times in a row (forward.pause_after); events keep queueing, fix the agent or the configuration and run gateway sources resume "+s.src.Name,
		zap.String("source", s.src.Name), zap.Int("faults", faults), zap.String("error", reason))
	if d.alerts != nil {
		// The incident's start names the alert's scope; a record that
		// cannot be read names it by now, which only risks a second alert.
		since := d.now()
		if set, err := d.l.Sources().AgentHealths(ctx); err == nil && set[s.src.Name].Failing {
			since = set[s.src.Name].Since
		}
		d.alerts.Raise(alerts.Alert{Kind: alerts.Paused, Source: s.src.Name, Incident: since, Error: reason, Failures: faults, At: d.now()})
	}
}

// saveFailures adds s's unsaved failures to the store's health record.
func (d *Dispatcher) saveFailures(s *source) {
	in := &s.incident
	in.mu.Lock()
	n, reason, from := in.unsaved, in.lastErr, in.unsavedFrom
	in.unsaved, in.saved, in.stored = 0, d.now(), true
	in.mu.Unlock()
	if n == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	h, err := d.l.Sources().RecordAgentFailures(ctx, s.src.Name, n, reason, from)
	cancel()
	if err == nil && !h.Failing {
		// Stragglers of an incident another instance has ended: not an
		// incident here either.
		in.mu.Lock()
		in.failing, in.failures, in.warned, in.stored = false, 0, 0, false
		in.mu.Unlock()
		return
	}
	if err == nil {
		d.alertFailing(s, h)
	}
	if err != nil {
		in.mu.Lock()
		in.unsaved += n // tried again at the next failure or sweep
		in.mu.Unlock()
		d.metrics.storeErrors.WithLabelValues(s.src.Name).Inc()
		d.log.Warn("dispatch: recording the agent's failures for source health failed", zap.String("source", s.src.Name), zap.Error(err))
	}
}

// alertFailing raises the failing alert of s's stored incident h once it
// has reached alerts.after_failures attempts or lasted alerts.after: once
// per incident here, and the ledger claim makes it once across instances.
func (d *Dispatcher) alertFailing(s *source, h ledger.AgentHealth) {
	now := d.now()
	if !h.Failing || !d.alerts.Failing(h.Failures, h.Since, now) {
		return
	}
	in := &s.incident
	in.mu.Lock()
	raise := !in.alerted.Equal(h.Since)
	in.alerted = h.Since
	in.mu.Unlock()
	if raise {
		d.alerts.Raise(alerts.Alert{Kind: alerts.Failing, Source: s.src.Name, Incident: h.Since,
			Error: h.LastError, Failures: h.Failures, Lasted: now.Sub(h.Since), At: now})
	}
}

// answered is called after each attempt the agent answered (2xx, or a
// rejection, which is an answer too). When the source has an incident,
// here or in the store, it ends it; the process that ends the stored one
// logs one info line saying how long it lasted and how many events wait.
// Without an incident it costs nothing: no store step.
func (d *Dispatcher) answered(s *source, started time.Time) {
	in := &s.incident
	in.mu.Lock()
	if started.After(in.answeredFrom) {
		in.answeredFrom = started
	}
	local, since := in.failing, in.since
	if !local && !in.stored {
		in.mu.Unlock()
		return
	}
	in.failing, in.failures, in.warned, in.unsaved, in.stored = false, 0, 0, 0, false
	in.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	defer cancel()
	was, ended, err := d.l.Sources().EndAgentIncident(ctx, s.src.Name)
	lasted := d.now().Sub(was.Since)
	if ended && d.alerts.Failing(was.Failures, was.Since, d.now()) {
		// One process ends the stored incident; the claim keeps it once
		// even so. An incident too short to raise the failing alert
		// raises no recovery either.
		d.alerts.Raise(alerts.Alert{Kind: alerts.Recovered, Source: s.src.Name, Incident: was.Since,
			Lasted: lasted, Error: was.LastError, Failures: was.Failures, At: d.now()})
	}
	switch {
	case err != nil:
		d.metrics.storeErrors.WithLabelValues(s.src.Name).Inc()
		d.log.Warn("dispatch: recording the agent's recovery for source health failed", zap.String("source", s.src.Name), zap.Error(err))
		if !local {
			return
		}
		lasted = d.now().Sub(since)
	case !ended:
		return // another process ended it, and said so
	}
	lasted = lasted.Round(time.Second)
	fields := []zap.Field{zap.String("source", s.src.Name), zap.Duration("failing_for", lasted)}
	// The agent answers: what waits for a later retry is due now, taken
	// at the source's concurrency like any due delivery.
	due, err := d.l.Queue().DueNow(ctx, s.src.Name, recoveryCountLimit)
	if err != nil {
		d.metrics.storeErrors.WithLabelValues(s.src.Name).Inc()
		d.log.Warn("dispatch: agent answering again after "+lasted.String()+"; making its waiting events due failed, they keep their schedule",
			append(fields, zap.Error(err))...)
		return
	}
	d.Notify()
	d.log.Info("dispatch: agent answering again after "+lasted.String()+"; "+plural(due, "waiting event")+" now due",
		append(fields, zap.Int("now_due", due))...)
}

// readHealth is the sweep's look at the store's health record, at most
// once per healthReadEvery: it learns which sources other processes found
// failing, and writes failures not yet saved. A record that cannot be
// read stops nothing.
func (d *Dispatcher) readHealth(ctx context.Context) {
	now := time.Now()
	if now.Sub(d.healthRead) < healthReadEvery {
		return
	}
	d.healthRead = now
	for _, s := range d.sources {
		s.incident.mu.Lock()
		flush := s.incident.unsaved > 0
		s.incident.mu.Unlock()
		if flush {
			d.saveFailures(s)
		}
	}
	set, err := d.l.Sources().AgentHealths(ctx)
	if err != nil && !errors.Is(err, ledger.ErrCorruptControl) {
		d.log.Warn("dispatch: reading source health failed", zap.Error(err))
		return
	}
	for name, s := range d.sources {
		s.incident.mu.Lock()
		s.incident.stored = set[name].Failing
		s.incident.mu.Unlock()
		// A source failing for alerts.after raises its alert here, however
		// few attempts failed: the sweep reads the record every second on
		// every instance, attempt or not.
		d.alertFailing(s, set[name])
	}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.Itoa(n) + " " + what + "s"
}
