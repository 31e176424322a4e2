package dispatch

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/replyonce/gateway/ledger"
)

// startTake marks a due delivery as being taken by this process, so that
// a sweep running before the take is recorded does not try it again; false
// when it is already marked.
func (d *Dispatcher) startTake(q ledger.QueueItem) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.taking == nil {
		d.taking = map[string]string{}
	}
	if _, ok := d.taking[q.EntryID]; ok {
		return false
	}
	d.taking[q.EntryID] = q.Scope
	return true
}

func (d *Dispatcher) endTake(q ledger.QueueItem) {
	d.mu.Lock()
	delete(d.taking, q.EntryID)
	d.mu.Unlock()
}

// scopesTaking lists the scopes that takes are under way for: a sweep
// skips them in the due index (ledger.DueQuery.Skip).
func (d *Dispatcher) scopesTaking() map[string]bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make(map[string]bool, len(d.taking))
	for _, scope := range d.taking {
		out[scope] = true
	}
	return out
}

// take claims a due delivery in the place sl reserved for it and, if it
// is still due, delivers it. A failed take leaves the delivery due. A
// take whose answer comes too late to forward within its claim (by the
// injected clock; the store call itself is cut at Source.takeBudget) is
// abandoned unsent: given back while the claim is still this process's,
// left to run out otherwise. The
// event's record is read beside the take, not after it: the due index
// names its blob, so a swept delivery waits for one store round trip
// before its forward, not two.
func (d *Dispatcher) take(s *source, sl *Slot, q ledger.QueueItem, swept time.Time) {
	ctx, cancel := context.WithTimeout(d.forwards, min(settleTimeout, s.src.takeBudget()))
	type read struct {
		ev  ledger.QueuedEvent
		err error
	}
	readDone := make(chan read, 1)
	d.workers.run(func() {
		ev, err := d.l.Queue().QueuedEventOf(ctx, q)
		readDone <- read{ev, err}
	})
	t, err := d.l.Queue().TakeDelivery(ctx, q.Scope, q.EntryID, s.src.Lease())
	if err != nil || !t.OK {
		cancel() // the read's answer is not needed
	}
	r := <-readDone
	cancel()
	d.endTake(q)
	if err != nil || !t.OK {
		sl.Release()
		if err != nil || t.Superseded {
			d.mayBeDue.Store(true) // it stays due, or the run that superseded it may be
		}
		if err != nil && d.forwards.Err() == nil {
			d.metrics.storeErrors.WithLabelValues(s.src.Name).Inc()
			d.log.Warn("dispatch: taking a due delivery failed; it stays due", zap.String("source", q.Source),
				zap.String("event_id", q.EventID), zap.Error(err))
		}
		if err == nil && t.Superseded {
			d.conv.Superseded(q.Source, 1)
			d.log.Info("dispatch: superseded before delivery; the newer run answers for the scope", zap.String("source", q.Source),
				zap.String("event_id", q.EventID), zap.String("run_id", q.RunID), zap.String("superseded_by", t.Item.SupersededBy))
		}
		return
	}
	if now := d.now(); now.After(s.src.StartBy(t.Item.LeaseUntil)) {
		fields := []zap.Field{zap.String("source", q.Source), zap.String("event_id", q.EventID), zap.String("run_id", t.Run.ID),
			zap.Int("delivery", t.Run.Delivery), zap.Time("claim_until", t.Item.LeaseUntil)}
		if now.Before(t.Item.LeaseUntil) {
			sl.used = true
			defer d.done(s)
			d.giveBack(s, t, "not sent: the store answered the take too late to forward within its claim", fields)
			return
		}
		sl.Release()
		d.metrics.attempts.WithLabelValues(s.src.Name, "given_back").Inc()
		d.log.Warn("dispatch: the store answered the take after its claim ran out; abandoned unsent, another process may deliver it", fields...)
		return
	}
	d.metrics.lag.WithLabelValues(q.Source).Observe(max(swept.Sub(dueAt(q)), 0).Seconds())
	sl.used = true
	ev := &ledger.QueuedEvent{} // deliver reads it again
	if r.err == nil && t.Item.Blob == q.Blob {
		ev = &r.ev
	}
	d.deliver(s, t, ev)
}

// freeSlots counts the unpaused sources that may hold one more delivery:
// a sweep with none has nothing to take.
func (d *Dispatcher) freeSlots() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	free := 0
	for _, s := range d.sources {
		if !s.paused && s.mayHold() {
			free++
		}
	}
	return free
}

// gaugeEvery is how often a sweep reads a whole page of due deliveries for
// the queue gauges, however few slots are free: the gauges must show a
// backlog best exactly when every slot is busy.
const gaugeEvery = 5 * time.Second

// gaugeDue says whether this sweep refreshes the queue gauges.
func (d *Dispatcher) gaugeDue() bool {
	now := d.now()
	if !d.lastGauge.IsZero() && now.Sub(d.lastGauge) < gaugeEvery {
		return false
	}
	d.lastGauge = now
	return true
}
