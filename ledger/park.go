package ledger

import (
	"context"
	"fmt"
	"hash/fnv"
	"time"
)

// Parking keeps a paused source's due deliveries out of every other
// source's way. The due index is read earliest first, a page at a time, so
// a paused source with a page of due events in front would otherwise hold
// back every source behind it. A dispatcher that finds a due delivery of a
// paused source parks it: the item stays queued, stops being due, and its
// document's DueAt becomes the source's parking time, a fixed instant far
// in the future (ParkedAt), where no sweep of due work ever reads. When
// the source is resumed, any dispatcher finds its parked scopes at exactly
// that instant (Store.ScopesDueBetween) and unparks them, and they are due
// again at their old time. All of it is ordinary Transacts on the scope
// documents, so it holds across any number of instances: a crash half-way
// leaves items parked, and the next pass over the parking time finds them.

// parkBase is the start of the parking times: after any real due time and
// before farFuture, so operators' listings (ListDeliveries) still see
// parked items through the due index.
var parkBase = time.Date(2199, 1, 1, 0, 0, 0, 0, time.UTC)

// ParkedAt is the due-index time of a source's parked deliveries: parkBase
// plus the source name's 32-bit FNV-1a hash in milliseconds (at most 50
// days on; milliseconds because Redis scores are). Two sources whose names
// hash alike share one; unparking checks the source of every item, so
// sharing costs reads, never a wrong unpark.
func ParkedAt(source string) time.Time {
	h := fnv.New32a()
	_, _ = h.Write([]byte(source))
	return parkBase.Add(time.Duration(h.Sum32()) * time.Millisecond)
}

// ParkDeliveries parks the deliveries of source on scope that are due now
// (waiting, or held by a dispatcher whose claim ran out), in one store
// step, and returns how many it parked. A parked item keeps its place in
// the retry schedule and its attempt count.
func (qu Queue) ParkDeliveries(ctx context.Context, scope, source string) (int, error) {
	l := qu.l
	if scope == "" || source == "" {
		return 0, fmt.Errorf("%w: scope and source are required", ErrInvalid)
	}
	n := 0
	err := l.transact(ctx, scope, func(d *document, now time.Time) (bool, error) {
		n = 0
		for _, q := range d.Queue {
			if q.Source != source || !q.Due(now) {
				continue
			}
			if q.Status == DeliveryDelivering {
				// Its holder is gone; the claim stays run out, as a take
				// would find it.
				q.Status, q.NextAt, q.LeaseUntil = DeliveryQueued, now, time.Time{}
			}
			q.Parked = true
			n++
		}
		return n > 0, nil
	})
	if err != nil {
		return 0, err
	}
	if n > 0 {
		l.observe(Event{Type: "park", Scope: scope})
	}
	return n, nil
}

// UnparkSource unparks the parked deliveries of source on up to limit
// scopes found at its parking time, and reports on how many scopes it
// unparked something: while that is not zero there may be more. Call it
// once the source is resumed.
func (qu Queue) UnparkSource(ctx context.Context, source string, limit int) (int, error) {
	l := qu.l
	if source == "" {
		return 0, fmt.Errorf("%w: source is empty", ErrInvalid)
	}
	if limit <= 0 {
		limit = 100
	}
	at := ParkedAt(source)
	scopes, err := l.store.ScopesDueBetween(ctx, at, at, limit)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, scope := range scopes {
		changed := false
		err := l.transact(ctx, scope, func(d *document, now time.Time) (bool, error) {
			changed = false
			for _, q := range d.Queue {
				if q.Parked && q.Source == source {
					q.Parked, changed = false, true
				}
			}
			return changed, nil
		})
		if err != nil {
			return n, err
		}
		if changed {
			n++
			l.observe(Event{Type: "unpark", Scope: scope})
		}
	}
	return n, nil
}
