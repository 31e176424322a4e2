package main

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// `gateway events tail` is a live view of the event log, as `stripe
// listen` is of Stripe's: each event as it is received and each attempt's
// outcome as it happens, from every instance, since it reads the store
// through the admin API (GET /v1/deliveries) rather than one instance's
// memory. It polls: the received index orders scopes by their newest
// event, not by their last change, so each poll lists the events received
// since a watermark and asks for the attempts of those whose state moved.

// tailEvery is how often tail polls the admin API.
const tailEvery = 500 * time.Millisecond

// tailSkew is how far before its watermark tail lists, for the clocks of
// the instances that stamp received_at and the API's whole seconds.
const tailSkew = time.Minute

// tailScopes is how many of the scopes that received an event last one
// poll reads at most.
const tailScopes = 1000

// tailStatuses are the statuses --status takes ("paused" is a state of
// the source, not of the event: tail does not take it).
var tailStatuses = []ledger.DeliveryStatus{ledger.DeliveryQueued, ledger.DeliveryDelivering, ledger.DeliveryDelivered,
	ledger.DeliveryRejected, ledger.DeliveryFailed, ledger.DeliveryDead, ledger.DeliverySuperseded, ledger.DeliveryCoalesced}

// tailed is what tail printed of one event.
type tailed struct {
	shown      bool         // the event's line
	attempts   map[int]bool // attempt lines, by attempt number
	sig        string       // the list's view of it when its attempts were last read
	receivedAt time.Time
	pending    bool // it may still get attempts (queued, delivering, failed inline)
}

// tailer turns successive listings into new lines: an event and an
// attempt are printed once each, whatever the number of polls that see
// them.
type tailer struct {
	out      io.Writer
	statuses map[string]bool // empty: every status
	events   map[string]*tailed
}

func newTailer(out io.Writer, statuses map[string]bool) *tailer {
	return &tailer{out: out, statuses: statuses, events: map[string]*tailed{}}
}

func tailKey(q ledgerapi.DeliveryItemJSON) string {
	return q.Source + "\x00" + q.Scope + "\x00" + q.EventID
}

// signature is what of a listed event changes when an attempt is
// recorded or its state moves.
func signature(q ledgerapi.DeliveryItemJSON) string {
	return fmt.Sprintf("%s|%d|%d|%d|%d|%s|%s", q.Status, q.Attempts, q.Failures, q.Replays, q.LastStatus, q.LastError, q.FinishedAt)
}

func pendingStatus(s string) bool {
	switch ledger.DeliveryStatus(s) {
	case ledger.DeliveryQueued, ledger.DeliveryDelivering, ledger.DeliveryFailed:
		return true
	}
	return false
}

// baseline records what is in the log already: tail prints what happens
// after it started, not the history (events list is for that).
func (t *tailer) baseline(items []ledgerapi.DeliveryItemJSON) {
	for _, q := range items {
		e := &tailed{shown: true, attempts: map[int]bool{}, sig: signature(q), receivedAt: q.ReceivedAt, pending: pendingStatus(q.Status)}
		for n := 1; n <= q.Attempts; n++ {
			e.attempts[n] = true
		}
		t.events[tailKey(q)] = e
	}
}

// needAttempts reports whether q's attempts should be read: its state
// moved since they were last read, or it has attempts not printed yet.
func (t *tailer) needAttempts(q ledgerapi.DeliveryItemJSON) bool {
	e := t.events[tailKey(q)]
	if e == nil {
		return q.Attempts > 0
	}
	if e.sig != signature(q) {
		return true
	}
	return t.wanted(q) && len(e.attempts) < q.Attempts && ledger.DeliveryStatus(q.Status) != ledger.DeliveryDelivering
}

func (t *tailer) wanted(q ledgerapi.DeliveryItemJSON) bool {
	return len(t.statuses) == 0 || t.statuses[q.Status]
}

// take prints what is new of q: its line when first seen, then every
// attempt of attempts not printed before. attempts is nil when they were
// not read this time. An event or attempt whose event is not in a
// --status printed is left for a later poll that finds it in one.
func (t *tailer) take(q ledgerapi.DeliveryItemJSON, attempts []ledgerapi.AttemptJSON) {
	key := tailKey(q)
	e := t.events[key]
	if e == nil {
		e = &tailed{attempts: map[int]bool{}}
		t.events[key] = e
	}
	e.receivedAt, e.pending = q.ReceivedAt, pendingStatus(q.Status)
	if !t.wanted(q) {
		return
	}
	if !e.shown {
		e.shown = true
		fmt.Fprintln(t.out, eventLine(q))
	}
	if attempts == nil {
		return
	}
	e.sig = signature(q)
	sort.Slice(attempts, func(i, j int) bool { return attempts[i].N < attempts[j].N })
	for _, a := range attempts {
		if e.attempts[a.N] {
			continue
		}
		e.attempts[a.N] = true
		fmt.Fprintln(t.out, attemptLine(q, a))
	}
}

// watermark is the receipt time the next poll lists from: the oldest
// event that may still get an attempt, else the newest seen, else now;
// events older than it are forgotten.
func (t *tailer) watermark(now time.Time) time.Time {
	var oldestPending, newest time.Time
	for _, e := range t.events {
		if e.pending && (oldestPending.IsZero() || e.receivedAt.Before(oldestPending)) {
			oldestPending = e.receivedAt
		}
		if e.receivedAt.After(newest) {
			newest = e.receivedAt
		}
	}
	w := now
	switch {
	case !oldestPending.IsZero():
		w = oldestPending
	case !newest.IsZero() && newest.Before(now):
		w = newest
	}
	w = w.Add(-tailSkew)
	for k, e := range t.events {
		if e.receivedAt.Before(w.Add(-time.Second)) { // the API's since is whole seconds
			delete(t.events, k)
		}
	}
	return w
}

const tailTime = "2006-01-02T15:04:05.000Z07:00"

// eventLine is an event as it is received.
func eventLine(q ledgerapi.DeliveryItemJSON) string {
	how := "queued"
	if q.Inline {
		how = "inline"
	}
	return fmt.Sprintf("%s  %s  %s  scope %s  received (%s)  %s", q.ReceivedAt.UTC().Format(tailTime), printable(q.Source),
		printable(q.EventID), printable(q.Scope), how, q.Status)
}

// attemptLine is one attempt's outcome: the agent's status, latency and
// the error in plain words (forward.AgentError's text, as recorded).
func attemptLine(q ledgerapi.DeliveryItemJSON, a ledgerapi.AttemptJSON) string {
	agent := "agent -"
	if a.AgentStatus != 0 {
		agent = fmt.Sprintf("agent %d", a.AgentStatus)
	}
	latency := time.Duration(a.LatencyMs * float64(time.Millisecond)).Round(time.Millisecond)
	outcome := a.Outcome
	if a.Late {
		outcome += " (late)"
	}
	line := fmt.Sprintf("%s  %s  %s  scope %s  attempt %d  %s  %s  %s", a.At.UTC().Format(tailTime), printable(q.Source),
		printable(q.EventID), printable(q.Scope), a.N, outcome, agent, latency)
	if a.Error != "" {
		line += "  " + printable(a.Error)
	}
	return line
}

// eventsTail prints events and attempts as they happen until ctx ends
// (Ctrl-C), which is a normal end: exit 0.
func (a *App) eventsTail(ctx context.Context, args []string) error {
	var f eventFlags
	fs := a.flags("events tail")
	adminFlags(fs, &f.ledgerFlags)
	fs.StringVar(&f.source, "source", "", "only this source")
	fs.StringVar(&f.status, "status", "", "only events in these statuses, comma-separated: queued, delivering, delivered, rejected, failed, dead, superseded, coalesced")
	pos, err := parseInterspersed(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return usageError{fmt.Sprintf("events tail: takes no arguments\n\n%s", eventsUsage)}
	}
	statuses, err := tailStatusSet(f.status)
	if err != nil {
		return err
	}
	client, err := a.ledgerClient(f.ledgerFlags)
	if err != nil {
		return err
	}
	t := newTailer(a.Stdout, statuses)
	list := func(since time.Time) ([]ledgerapi.DeliveryItemJSON, error) {
		rctx, cancel := context.WithTimeout(ctx, f.timeout)
		defer cancel()
		return client.Deliveries(rctx, ledgerapi.DeliveryFilter{Source: f.source, Since: since, Limit: tailScopes})
	}
	items, err := list(t.watermark(a.Clock()))
	if err != nil {
		return explain(err)
	}
	t.baseline(items)
	what := "every source"
	if f.source != "" {
		what = "source " + printable(f.source)
	}
	fmt.Fprintf(a.Stderr, "tailing events of %s from every instance sharing the store (Ctrl-C to stop)\n", what)
	tick := time.NewTicker(tailEvery)
	defer tick.Stop()
	var lastErr string
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		err := a.tailPoll(ctx, client, t, list, f.timeout)
		if ctx.Err() != nil {
			return nil
		}
		// A gateway restarting or a store down for a moment ends no tail:
		// say so once and keep polling.
		if msg := fmt.Sprint(err); err != nil && msg != lastErr {
			fmt.Fprintf(a.Stderr, "events tail: %v (retrying)\n", explain(err))
			lastErr = msg
		} else if err == nil {
			lastErr = ""
		}
	}
}

func (a *App) tailPoll(ctx context.Context, client *ledgerapi.Client, t *tailer,
	list func(time.Time) ([]ledgerapi.DeliveryItemJSON, error), timeout time.Duration) error {
	items, err := list(t.watermark(a.Clock()))
	if err != nil {
		return err
	}
	for _, q := range items {
		var attempts []ledgerapi.AttemptJSON
		if t.wanted(q) && t.needAttempts(q) {
			rctx, cancel := context.WithTimeout(ctx, timeout)
			d, err := client.ShowDelivery(rctx, q.Scope, q.Source, q.EventID)
			cancel()
			if err != nil {
				return err
			}
			attempts = d.Attempts
			if attempts == nil {
				attempts = []ledgerapi.AttemptJSON{}
			}
		}
		t.take(q, attempts)
	}
	return nil
}

// tailStatusSet reads --status: statuses separated by commas.
func tailStatusSet(s string) (map[string]bool, error) {
	set := map[string]bool{}
	if s == "" {
		return set, nil
	}
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		ok := false
		for _, st := range tailStatuses {
			ok = ok || string(st) == name
		}
		if !ok {
			return nil, usageError{fmt.Sprintf("events tail: --status %q: want queued, delivering, delivered, rejected, failed, dead, superseded or coalesced, separated by commas", name)}
		}
		set[name] = true
	}
	return set, nil
}
