package ledger

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"
)

// QueueItems returns a scope's queued deliveries, oldest first.
func (qu Queue) QueueItems(ctx context.Context, scope string) ([]QueueItem, error) {
	return qu.l.queueItemsOf(ctx, scope, time.Time{}, time.Time{})
}

// queueItemsOf is QueueItems, reading of the items spilled out only the
// chunks that may hold one received at or after since and before until
// (zero: no bound); the answer may hold others.
func (l *Ledger) queueItemsOf(ctx context.Context, scope string, since, until time.Time) ([]QueueItem, error) {
	d, err := l.readFull(ctx, scope)
	if err != nil {
		return nil, err
	}
	return l.queueItems(ctx, d, since, until)
}

// queueItems lists the items of d, those in it and those spilled out with
// their entries (see spill.go) that retention keeps, oldest received
// first. Of the spilled ones it reads only the chunks whose received
// bounds meet [since, until) (zero: no bound).
func (l *Ledger) queueItems(ctx context.Context, d *document, since, until time.Time) ([]QueueItem, error) {
	var out []QueueItem
	err := l.itemsNewestFirst(ctx, d, since, until, func(q *QueueItem) bool {
		out = append(out, *q)
		return true
	})
	if err != nil {
		return nil, err
	}
	slices.Reverse(out)
	return out, nil
}

// itemsNewestFirst calls each with the items of d, newest received first
// (by ReceivedAt, then entry id, both descending), until it returns false:
// those in the document and those spilled out with their entries, as the
// document would list them (a copy back in the document, or in a later
// chunk, is listed from there; one past its dropAt not at all). Of the
// spilled ones it reads only the chunks (and pages) whose received bounds
// meet [since, until) (zero: no bound), and of those only as many as the
// items each takes need: a chunk is read once every item newer than its
// newest is listed.
func (l *Ledger) itemsNewestFirst(ctx context.Context, d *document, since, until time.Time, each func(q *QueueItem) bool) error {
	meets := func(items int, first, last int64) bool {
		return items > 0 && (since.IsZero() || last >= since.UnixNano()) && (until.IsZero() || first < until.UnixNano())
	}
	type group struct {
		last  int64 // the newest receipt in it
		chunk spillChunk
		page  *spillPage
	}
	var todo []group
	for _, p := range d.SpillPages {
		if meets(p.Items, p.RecvFirst, p.RecvLast) {
			todo = append(todo, group{last: p.RecvLast, page: &p})
		}
	}
	for _, c := range d.Spilled {
		if meets(c.Items, c.RecvFirst, c.RecvLast) {
			todo = append(todo, group{last: c.RecvLast, chunk: c})
		}
	}
	ready := make([]*QueueItem, 0, len(d.Queue)) // found, not yet listed
	for _, q := range d.Queue {
		ready = append(ready, q)
	}
	now := l.now()
	for {
		sort.SliceStable(todo, func(i, j int) bool { return todo[i].last > todo[j].last })
		sort.Slice(ready, func(i, j int) bool {
			a, b := ready[i], ready[j]
			if !a.ReceivedAt.Equal(b.ReceivedAt) {
				return a.ReceivedAt.After(b.ReceivedAt)
			}
			return a.EntryID > b.EntryID
		})
		// List what no unread group can hold anything newer than.
		n := 0
		for _, q := range ready {
			if len(todo) > 0 && q.ReceivedAt.UnixNano() <= todo[0].last {
				break
			}
			if !each(q) {
				return nil
			}
			n++
		}
		ready = ready[n:]
		if len(todo) == 0 {
			return nil
		}
		g := todo[0]
		todo = todo[1:]
		if g.page != nil && g.page.Level > 0 {
			ps, err := l.readPagesOf(ctx, d.Scope, *g.page)
			if err != nil {
				return err
			}
			for _, p := range ps {
				if meets(p.Items, p.RecvFirst, p.RecvLast) {
					todo = append(todo, group{last: p.RecvLast, page: &p})
				}
			}
			continue
		}
		if g.page != nil {
			cs, err := l.readPage(ctx, d.Scope, *g.page)
			if err != nil {
				return err
			}
			for _, c := range cs {
				if meets(c.Items, c.RecvFirst, c.RecvLast) {
					todo = append(todo, group{last: c.RecvLast, chunk: c})
				}
			}
			continue
		}
		rs, err := l.readChunk(ctx, d.Scope, g.chunk.N)
		if err != nil {
			return err
		}
		for _, r := range rs {
			// Every copy but the one in force is stale: an item
			// moved back into the document is in Moved until no
			// chunk holds an older copy of it (pruneMoved).
			q := r.Item
			if q == nil || d.Queue[r.ID] != nil || d.spilledCopyStale(r.ID, g.chunk.N) || q.dropAt(l.opts.Retention).Before(now) {
				continue
			}
			ready = append(ready, q)
		}
	}
}

// QueuedEventOf reads the event record of a queued delivery.
func (qu Queue) QueuedEventOf(ctx context.Context, q QueueItem) (QueuedEvent, error) {
	l := qu.l
	if q.carriesEvent() {
		return decodeEvent(q.embedded())
	}
	if q.Inline && q.Blob == "" {
		return inlineEvent(q), nil // forward.keep_body was off: no body kept
	}
	b, err := l.store.ReadBlob(ctx, q.Scope, eventBlob(q.Blob))
	if err != nil {
		return QueuedEvent{}, err
	}
	if b == nil {
		return QueuedEvent{}, fmt.Errorf("%w: the event record of %s %s is gone", ErrUnknownEntry, q.Source, q.EventID)
	}
	return decodeEvent(b)
}

// AttemptsOf reads the attempt records of a queued delivery, oldest first.
// An attempt still in flight (or whose holder crashed) has none.
func (qu Queue) AttemptsOf(ctx context.Context, q QueueItem) ([]AttemptRecord, error) {
	l := qu.l
	if q.Inline {
		return append([]AttemptRecord(nil), q.InlineAttempts...), nil
	}
	out, err := l.records(ctx, q, "attempt", q.Attempts, attemptBlob, q.heldRecord)
	if err != nil {
		return nil, err
	}
	if len(q.Records) > 0 {
		out = append(out, q.Records...)
		sort.SliceStable(out, func(i, j int) bool { return out[i].N < out[j].N })
	}
	trials, err := l.records(ctx, q, "trial", q.Trials, trialBlob, nil)
	if err != nil {
		return nil, err
	}
	out = append(out, trials...)
	if q.Trials > 0 {
		sort.SliceStable(out, func(i, j int) bool { return out[i].At.Before(out[j].At) })
	}
	return out, nil
}

// records reads the count records of q named by blob (attempts or
// trials), in their order, skipping those never written and those held
// in the item (held may be nil).
func (l *Ledger) records(ctx context.Context, q QueueItem, what string, count int, blob func(nonce string, n int) string, held func(n int) bool) ([]AttemptRecord, error) {
	var out []AttemptRecord
	for n := 1; n <= count; n++ {
		if held != nil && held(n) {
			continue
		}
		b, err := l.store.ReadBlob(ctx, q.Scope, blob(q.Blob, n))
		if err != nil {
			return nil, err
		}
		if b == nil {
			continue
		}
		var r AttemptRecord
		if err := unmarshalRecord(b, &r); err != nil {
			return nil, fmt.Errorf("ledger: %s record %d of %s %s: %w", what, n, q.Source, q.EventID, err)
		}
		out = append(out, r)
	}
	return out, nil
}

// DeliveryFilter selects queued deliveries for operators.
type DeliveryFilter struct {
	Source string
	// Status is one of the DeliveryStatus values, or "" for every status.
	Status DeliveryStatus
	// Scope lists one scope's deliveries, whatever their status, without
	// an index.
	Scope   string
	EventID string    // only this event id
	Since   time.Time // received at or after
	Until   time.Time // received before (zero: no bound)
	Limit   int       // scopes read; default 100
	// SourceIn, when not nil, keeps only these sources (the paused ones,
	// for the operator's "paused" filter).
	SourceIn map[string]bool
}

// farFuture lists every entry of a time index.
var farFuture = time.Date(2200, 1, 1, 0, 0, 0, 0, time.UTC) // within UnixNano's range, which bolt keys on

// ListDeliveries lists queued deliveries by filter, oldest received first.
// Waiting and delivering ones are found through the due index, rejected
// and dead ones through the review index (they wait for an operator,
// however old); finished ones (delivered, superseded, coalesced), and every
// status at once, through the received index, from the Limit scopes that
// received an event last.
func (qu Queue) ListDeliveries(ctx context.Context, f DeliveryFilter) ([]QueueItem, error) {
	l := qu.l
	if f.Limit <= 0 {
		f.Limit = 100
	}
	var scopes []string
	switch {
	case f.Scope != "":
		scopes = []string{f.Scope}
	case f.Status == "" || f.Status == DeliveryDelivered || f.Status == DeliverySuperseded || f.Status == DeliveryCoalesced || f.Status == DeliveryFailed:
		start := ScopeAt{At: f.Until}
		ss, err := l.store.ScopesReceived(ctx, start, f.Limit)
		if err != nil {
			return nil, err
		}
		for _, s := range ss {
			if !f.Since.IsZero() && s.At.Before(f.Since) {
				break
			}
			scopes = append(scopes, s.Scope)
		}
	default:
		seen := map[string]bool{}
		add := func(ss []string) {
			for _, s := range ss {
				if !seen[s] {
					seen[s] = true
					scopes = append(scopes, s)
				}
			}
		}
		if f.Status == DeliveryQueued || f.Status == DeliveryDelivering {
			ss, err := l.store.ScopesDue(ctx, farFuture, f.Limit)
			if err != nil {
				return nil, err
			}
			add(ss)
		}
		if f.Status == DeliveryDead || f.Status == DeliveryRejected {
			ss, err := l.store.ScopesToReview(ctx, l.now(), f.Limit)
			if err != nil {
				return nil, err
			}
			add(ss)
		}
	}
	var out []QueueItem
	for _, s := range scopes {
		items, err := l.queueItemsOf(ctx, s, f.Since, f.Until)
		if err != nil {
			return nil, err
		}
		for _, q := range items {
			if f.matches(q) {
				out = append(out, q)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].ReceivedAt.Equal(out[j].ReceivedAt) {
			return out[i].ReceivedAt.Before(out[j].ReceivedAt)
		}
		return out[i].EntryID < out[j].EntryID
	})
	return out, nil
}

// FindDelivery returns the queued delivery of one event on scope, in the
// document or spilled out with its entry.
func (qu Queue) FindDelivery(ctx context.Context, scope, source, eventID string) (QueueItem, error) {
	items, err := qu.QueueItems(ctx, scope)
	if err != nil {
		return QueueItem{}, err
	}
	for _, q := range items {
		if q.Source == source && q.EventID == eventID {
			return q, nil
		}
	}
	return QueueItem{}, fmt.Errorf("%w: no queued delivery of %s %s on scope %q", ErrUnknownEntry, source, eventID, scope)
}
