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
func (d *Dispatcher) startTake(entryID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.taking == nil {
		d.taking = map[string]bool{}
	}
	if d.taking[entryID] {
		return false
	}
	d.taking[entryID] = true
	return true
}

func (d *Dispatcher) endTake(entryID string) {
	d.mu.Lock()
	delete(d.taking, entryID)
	d.mu.Unlock()
}

// take claims a due delivery in the slot sl reserved for it and, if it is
// still due, delivers it. A failed take leaves the delivery due.
func (d *Dispatcher) take(s *source, sl *slot, q ledger.QueueItem, swept time.Time) {
	ctx, cancel := context.WithTimeout(d.forwards, settleTimeout)
	t, err := d.l.TakeDelivery(ctx, q.Scope, q.EntryID, s.src.Lease())
	cancel()
	d.endTake(q.EntryID)
	if err != nil || !t.OK {
		sl.Release()
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
	d.metrics.lag.WithLabelValues(q.Source).Observe(max(swept.Sub(dueAt(q)), 0).Seconds())
	sl.used = true
	d.deliver(s, t, &ledger.QueuedEvent{})
}

// freeSlots counts the free slots of unpaused sources: a sweep with none
// has nothing to take.
func (d *Dispatcher) freeSlots() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	free := 0
	for _, s := range d.sources {
		if !s.paused {
			free += cap(s.slots) - len(s.slots)
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
