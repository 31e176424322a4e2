package ledger

import (
	"fmt"
	"sort"
	"time"
)

// This file is conversation-aware delivery on top of the queue: per-scope
// order, newest wins for supersede runs, and debounce. Every rule is a
// pure function of the scope document, applied inside the same Transact
// as Enqueue and TakeDelivery, so any number of dispatchers in any number
// of processes keep it. See the package documentation, "Conversation-aware
// delivery".

// Order is a queued delivery's ordering rule.
type Order string

// Orders.
const (
	// OrderNone: deliveries of a scope go out independently.
	OrderNone Order = ""
	// OrderScope: one delivery of the scope in flight at a time, in
	// contextAt order (receipt order, then entry id, on ties).
	OrderScope Order = "scope"
)

// Debounce holds a scope's newest event until the scope has been quiet
// for Quiet, or MaxWait has passed since the first held event, and then
// delivers only the newest, on behalf of all of them. Zero Quiet: off.
type Debounce struct {
	Quiet   time.Duration `json:"quiet,omitempty" yaml:"quiet"`
	MaxWait time.Duration `json:"maxWait,omitempty" yaml:"max_wait"`
}

// MaxCovers bounds the event ids a covering delivery keeps (and lists in
// Replyonce-Covers): the newest MaxCovers. CoverCount stays exact.
const MaxCovers = 100

// Settled statuses of conversation-aware delivery. Neither is forwarded;
// both are final and kept for one retention like a delivered item.
const (
	// DeliverySuperseded: a newer event on the scope began a run that
	// supersedes this event's run (runs: supersede) before it was taken.
	DeliverySuperseded DeliveryStatus = "superseded"
	// DeliveryCoalesced: a debounced event that a newer one on the scope
	// covers (CoveredBy); the covering delivery stands for it.
	DeliveryCoalesced DeliveryStatus = "coalesced"
)

// finished reports whether the item is settled for good (a replay aside).
func (q *QueueItem) finished() bool {
	switch q.Status {
	case DeliveryDelivered, DeliveryRejected, DeliverySuperseded, DeliveryCoalesced:
		return true
	}
	return false
}

// waiting: the item still has to be delivered (queued, or delivering with
// a claim that ran out: due again).
func (q *QueueItem) waiting(now time.Time) bool {
	return q.Status == DeliveryQueued || (q.Status == DeliveryDelivering && !now.Before(q.LeaseUntil))
}

// inFlight: a dispatcher holds the item now.
func (q *QueueItem) inFlight(now time.Time) bool {
	return q.Status == DeliveryDelivering && now.Before(q.LeaseUntil)
}

// orderedBefore is the scope order: contextAt, then receipt, then entry id.
func orderedBefore(p, q *QueueItem) bool {
	if !p.ContextAt.Equal(q.ContextAt) {
		return p.ContextAt.Before(q.ContextAt)
	}
	if !p.ReceivedAt.Equal(q.ReceivedAt) {
		return p.ReceivedAt.Before(q.ReceivedAt)
	}
	return p.EntryID < q.EntryID
}

// blocked reports whether an OrderScope item that waits must go on
// waiting: another item of its scope is in flight, or one ordered before
// it waits too. Dead, rejected and settled items block nothing: the scope
// moves on. An item in flight is never blocked: its claim running out is
// what makes it (and the scope) move again, so its due time must count.
func (d *document) blocked(q *QueueItem, now time.Time) bool { return d.blockedAll(now)(q) }

// takeable is Due plus the scope's order.
func (d *document) takeable(q *QueueItem, now time.Time) bool {
	return q.Due(now) && !d.blocked(q, now)
}

// blockedAll is blocked for every item of the document in one pass (the
// head of the waiting items and the items in flight are found once), for
// the loops that ask about each item: the due time of a write and
// Due. It reads the document as it is now; do not mutate between.
func (d *document) blockedAll(now time.Time) func(q *QueueItem) bool {
	var head *QueueItem
	inFlight := false
	for _, p := range d.Queue {
		switch {
		case p.inFlight(now):
			inFlight = true
		case p.waiting(now):
			if head == nil || orderedBefore(p, head) {
				head = p
			}
		}
	}
	return func(q *QueueItem) bool {
		if Order(q.Order) != OrderScope || !q.waiting(now) {
			return false
		}
		return inFlight || head != q
	}
}

// depth counts the scope's deliveries still waiting or in flight, parked
// ones included.
func (d *document) depth() int {
	n := d.parkedCount()
	for _, q := range d.Queue {
		if q.Status == DeliveryQueued || q.Status == DeliveryDelivering {
			n++
		}
	}
	return n
}

// settleItem ends a waiting item without forwarding it: its deliver entry
// is settled not applied (never landed, so no run sees the scope as
// changed by it), and the item is kept with status and reason.
func (d *document) settleItem(q *QueueItem, status DeliveryStatus, reason string, now time.Time) {
	q.Status, q.LastError, q.FinishedAt, q.LeaseUntil, q.NextAt = status, reason, now, time.Time{}, time.Time{}
	if e := d.Entries[q.EntryID]; e != nil && e.State == StatePending {
		e.State, e.SettledAt, e.Error = StateFailed, now, reason
	}
}

// supersedeWaiting settles every waiting item whose run a newer
// supersede-mode run has superseded: newest wins, and the newer run's
// agent answers for the conversation. Items in flight are left alone;
// their run learns it on its next claim (refused superseded).
func (d *document) supersedeWaiting(now time.Time) []*QueueItem {
	var out []*QueueItem
	for _, q := range d.Queue {
		if !q.waiting(now) {
			continue
		}
		r := d.Runs[q.RunID]
		if r == nil || r.Mode != ModeSupersede || r.Ended || r.Cancelled {
			continue
		}
		if n := newerRun(d, r); n != nil {
			q.SupersededBy = n.ID
			d.settleItem(q, DeliverySuperseded, "superseded by run "+n.ID, now)
			out = append(out, q)
		}
	}
	sortItems(out)
	return out
}

// supersededInFlight maps the entry ids of deliveries in flight whose
// supersede-mode run a newer run supersedes to that run's id.
func (d *document) supersededInFlight(now time.Time) map[string]string {
	out := map[string]string{}
	for id, q := range d.Queue {
		if !q.inFlight(now) {
			continue
		}
		if r := d.Runs[q.RunID]; r != nil && r.Mode == ModeSupersede && !r.Ended && !r.Cancelled {
			if n := newerRun(d, r); n != nil {
				out[id] = n.ID
			}
		}
	}
	return out
}

// coalesce folds the source's held events on the scope (debounced, never
// forwarded yet) and the new one into the newest of them in scope order,
// which is delivered for all once the scope is quiet or the oldest has
// waited MaxWait. The others are settled coalesced, naming it.
func (d *document) coalesce(nq *QueueItem, deb Debounce, now time.Time) []*QueueItem {
	group := []*QueueItem{nq}
	for _, p := range d.Queue {
		if p != nq && p.Source == nq.Source && p.Quiet > 0 && p.Status == DeliveryQueued && p.Attempts == 0 {
			group = append(group, p)
		}
	}
	sortItems(group)
	head := group[len(group)-1]
	var covers []string
	count := 0
	held := now
	for _, p := range group {
		if p.CoverCount > 0 {
			covers, count = append(covers, p.Covers...), count+p.CoverCount
		} else {
			covers, count = append(covers, p.EventID), count+1
		}
		if !p.HeldSince.IsZero() && p.HeldSince.Before(held) {
			held = p.HeldSince
		}
	}
	var out []*QueueItem
	for _, p := range group[:len(group)-1] {
		if p.CoverCount > 0 {
			// p covered earlier events: they are covered by head now.
			for _, c := range d.Queue {
				if c.Status == DeliveryCoalesced && c.Source == p.Source && c.CoveredBy == p.EventID {
					c.CoveredBy = head.EventID
				}
			}
		}
		p.CoveredBy, p.Covers, p.CoverCount = head.EventID, nil, 0
		d.settleItem(p, DeliveryCoalesced, "coalesced into "+head.EventID, now)
		out = append(out, p)
	}
	if len(covers) > MaxCovers {
		covers = covers[len(covers)-MaxCovers:]
	}
	head.Covers, head.CoverCount, head.HeldSince = covers, count, held
	head.NextAt = now.Add(deb.Quiet)
	if deb.MaxWait > 0 && held.Add(deb.MaxWait).Before(head.NextAt) {
		head.NextAt = held.Add(deb.MaxWait)
	}
	return out
}

func sortItems(qs []*QueueItem) {
	sort.Slice(qs, func(i, j int) bool { return orderedBefore(qs[i], qs[j]) })
}

func (o Order) valid() error {
	switch o {
	case OrderNone, OrderScope:
		return nil
	}
	return fmt.Errorf("%w: order %q (want %q or empty)", ErrInvalid, o, OrderScope)
}

func (b Debounce) valid() error {
	switch {
	case b.Quiet < 0:
		return fmt.Errorf("%w: debounce quiet must not be negative", ErrInvalid)
	case b.Quiet == 0 && b.MaxWait != 0:
		return fmt.Errorf("%w: debounce max wait needs a quiet time", ErrInvalid)
	case b.Quiet > 0 && b.MaxWait != 0 && b.MaxWait < b.Quiet:
		return fmt.Errorf("%w: debounce max wait %s is shorter than quiet %s", ErrInvalid, b.MaxWait, b.Quiet)
	}
	return nil
}

func copyItems(qs []*QueueItem) []QueueItem {
	if len(qs) == 0 {
		return nil
	}
	out := make([]QueueItem, len(qs))
	for i, q := range qs {
		out[i] = *q
	}
	return out
}
