package ledger

import (
	"context"
	"time"
)

// Listing every queued event newest first. The due and review indexes
// find only work (queued, delivering) and what waits for an operator
// (dead, rejected); a delivered event sits in neither. The received index
// (Write.ReceivedAt, Store.ScopesReceived) orders every scope that holds
// queued events by its newest event, so a walk down it meets events newest
// first whatever their status. A scope's events are listed together, at
// its newest event's place: exact newest-first order across scopes that
// hold one event each (the default scope rule, {source}:{eventId}), and a
// conversation's older events right after its newest one otherwise.

// newestReceived is the newest receipt time of the scope's kept queue
// items, in the document, parked (waits.go) or spilled out with their entries (the bounds of
// the chunks and pages not past cutoff, the retention cutoff: the items of
// one past it are all past their dropAt); zero when it holds none, which
// takes the scope out of the index.
func (d *document) newestReceived(cutoff time.Time) time.Time {
	var t time.Time
	for _, q := range d.Queue {
		if q.ReceivedAt.After(t) {
			t = q.ReceivedAt
		}
	}
	if r := d.outside(); r != nil && r.Items > 0 {
		switch {
		case !refTime(r.ItemsUntil).Before(cutoff):
			// Every listing of the record that holds items is
			// within retention.
			t = latest(t, refTime(r.RecvLast))
		case !d.wholeLists():
			return t // void: the record is read first
		}
		// Put back, the record's listings are counted below.
	}
	bound := func(items int, last int64, until time.Time) {
		if items > 0 && !until.Before(cutoff) {
			if r := time.Unix(0, last).UTC(); r.After(t) {
				t = r
			}
		}
	}
	for _, c := range d.Spilled {
		bound(c.Items, c.RecvLast, c.Until)
	}
	for _, p := range d.SpillPages {
		bound(p.Items, p.RecvLast, p.Until)
	}
	for _, c := range d.Waits {
		if r := time.Unix(0, c.Recv).UTC(); r.After(t) {
			t = r
		}
	}
	return t
}

// DeliveryCursor is where a newest-first listing stopped: the index
// position of the last scope read and, when the page filled up inside that
// scope, the last event listed from it (ReceivedAt zero when the scope was
// listed whole).
type DeliveryCursor struct {
	ScopeAt
	ReceivedAt time.Time
	EntryID    string
}

// DeliveryPage is one page of RecentDeliveries.
type DeliveryPage struct {
	Items []QueueItem
	// Next continues after Items; nil when the index is exhausted.
	Next *DeliveryCursor
	// Scanned is how many scopes were read. Partial says the filter's
	// Limit on scopes read stopped the page before it filled up: Next
	// continues the walk.
	Scanned int
	Partial bool
}

// itemAfter reports whether q comes after (ReceivedAt, EntryID) in
// newest-first order.
func itemAfter(q QueueItem, at time.Time, id string) bool {
	if !q.ReceivedAt.Equal(at) {
		return q.ReceivedAt.Before(at)
	}
	return q.EntryID < id
}

func (f DeliveryFilter) matches(q QueueItem) bool {
	return (f.Source == "" || q.Source == f.Source) && (f.Status == "" || q.Status == f.Status) &&
		(f.SourceIn == nil || f.SourceIn[q.Source]) &&
		(f.EventID == "" || q.EventID == f.EventID) &&
		!q.ReceivedAt.Before(f.Since) && (f.Until.IsZero() || q.ReceivedAt.Before(f.Until))
}

// RecentDeliveries lists up to size queued deliveries of every scope (the
// filter's Scope is ignored), newest first, whatever their status, through
// the received index; after continues from a previous page's Next. It
// reads at most f.Limit scopes (default 1000). Until starts the walk at
// scopes whose newest event was received before it, so a scope that has
// received an event since is not listed.
func (vw Views) RecentDeliveries(ctx context.Context, f DeliveryFilter, after *DeliveryCursor, size int) (DeliveryPage, error) {
	l := vw.l
	if f.Limit <= 0 {
		f.Limit = 1000
	}
	if size <= 0 {
		size = 50
	}
	var page DeliveryPage
	var from []ScopeAt // the index position of each item's scope
	// take lists the matching items of one scope, newest first, after
	// the given event (zero: from its newest). One item more than the
	// page is looked for, so that the last page says so (Next nil) rather
	// than leading to an empty one; take reports whether it was found,
	// and then sets Next after the page's last item.
	take := func(at ScopeAt, afterAt time.Time, afterID string) (bool, error) {
		d, err := l.readFull(ctx, at.Scope)
		if err != nil {
			return false, err
		}
		page.Scanned++
		// Of the items spilled out, only the chunks the page lists
		// from are read.
		until := f.Until
		if !afterAt.IsZero() && (until.IsZero() || afterAt.Before(until)) {
			until = afterAt.Add(time.Nanosecond)
		}
		full := false
		err = l.itemsNewestFirst(ctx, d, f.Since, until, func(q *QueueItem) bool {
			if !afterAt.IsZero() && !itemAfter(*q, afterAt, afterID) || !f.matches(*q) {
				return true
			}
			if len(page.Items) == size {
				last := page.Items[size-1]
				page.Next = &DeliveryCursor{ScopeAt: from[size-1], ReceivedAt: last.ReceivedAt, EntryID: last.EntryID}
				full = true
				return false
			}
			page.Items, from = append(page.Items, *q), append(from, at)
			return true
		})
		return full, err
	}
	var pos ScopeAt
	switch {
	case after != nil:
		pos = after.ScopeAt
		if !after.ReceivedAt.IsZero() {
			full, err := take(after.ScopeAt, after.ReceivedAt, after.EntryID)
			if err != nil || full {
				return page, err
			}
		}
	case !f.Until.IsZero():
		pos = ScopeAt{At: f.Until} // strictly older than Until, any scope
	}
	for page.Scanned < f.Limit {
		batch, err := l.store.ScopesReceived(ctx, pos, min(64, f.Limit-page.Scanned))
		if err != nil {
			return page, err
		}
		if len(batch) == 0 {
			return page, nil
		}
		for _, at := range batch {
			if !f.Since.IsZero() && at.At.Before(f.Since) {
				return page, nil // every older scope's events are older still
			}
			full, err := take(at, time.Time{}, "")
			if err != nil || full {
				return page, err
			}
			pos = at
		}
	}
	page.Next, page.Partial = &DeliveryCursor{ScopeAt: pos}, true
	return page, nil
}
