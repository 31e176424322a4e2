package ledger

import (
	"context"
	"sort"
	"sync"
	"time"
)

// DueQuery says which queued deliveries Due lists.
type DueQuery struct {
	// Limit bounds the deliveries listed and the scopes read for them
	// (default 100).
	Limit int
	// From starts the listing at that place in the due index (a scope's
	// earliest due time; zero: from the start): the page after one whose
	// last scope sits at From, with that page's scopes in Skip.
	From time.Time
	// Skip lists scopes not to read: a dispatcher passes the scopes it is
	// taking deliveries of right now, which the index still lists as due
	// until their takes land, so that a sweep neither reads their
	// documents again nor finds its page filled with them. As many further
	// scopes are read from the index as Skip has, so that a page comes
	// back empty only when the index lists nothing else. A cap at Limit
	// more gave empty pages whenever a dispatcher was taking more than
	// twice Limit scopes at once, as one holding eight times a
	// forward.concurrency of 24 or more does in a drain on bolt, whose
	// takes wait for a shared commit; finding nothing due, the dispatcher
	// waited for its next poll (a 100,000-event drain at concurrency 32:
	// 2,400 events/s against 8,900 at 16; issue #29). Skip is bounded by
	// what the caller holds.
	Skip map[string]bool
}

// Due lists up to q.Limit queued deliveries that are due now, earliest
// first, from up to q.Limit scopes found through the store's index.
func (qu Queue) Due(ctx context.Context, q DueQuery) ([]QueueItem, error) {
	l := qu.l
	limit, from, skip := q.Limit, q.From, q.Skip
	if limit <= 0 {
		limit = 100
	}
	now := l.now()
	var (
		listed []string
		err    error
	)
	if from.IsZero() {
		listed, err = l.store.ScopesDue(ctx, now, limit+len(skip))
	} else {
		listed, err = l.store.ScopesDueBetween(ctx, from, now, limit+len(skip))
	}
	if err != nil {
		return nil, err
	}
	scopes := listed[:0:0]
	for _, s := range listed {
		if !skip[s] && len(scopes) < limit {
			scopes = append(scopes, s)
		}
	}
	docs, err := l.readAll(ctx, scopes)
	if err != nil {
		return nil, err
	}
	var out []QueueItem
	for _, d := range docs {
		blocked := d.blockedAll(now)
		for _, q := range d.Queue {
			if q.Due(now) && !blocked(q) {
				out = append(out, *q)
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].dueAt(), out[j].dueAt()
		if !a.Equal(b) {
			return a.Before(b)
		}
		return out[i].EntryID < out[j].EntryID
	})
	if len(out) > limit {
		out = out[:limit]
	}
	return out, nil
}

// CountDue returns how many scopes have a delivery due now, from the
// store's due index: the size of the due backlog in scopes (a scope with
// order: scope lists one at a time). Deliveries held by a dispatcher,
// waiting for a later retry or parked for a paused source are not due.
func (qu Queue) CountDue(ctx context.Context) (int, error) {
	l := qu.l
	return l.store.CountDue(ctx, l.now())
}

// readAhead bounds the documents readAll reads at once. A dispatcher
// draining a backlog reads a page of due documents per sweep, one round
// trip each: 8 at once left Postgres and Redis waiting on the network
// (gateway bench --backlog 10000, alternated, 2 runs: Postgres 2,258 /
// 1,911 -> 4,086 / 3,873 events/s drained at 32; Redis within its noise).
const readAhead = 32

// readAll reads the documents of scopes, in that order, several at a time:
// a page of the due index is a page of documents, and reading them one
// after the other would make every sweep wait for as many round trips as
// the page has scopes.
func (l *Ledger) readAll(ctx context.Context, scopes []string) ([]*document, error) {
	docs := make([]*document, len(scopes))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error // the page fails with it; the reads it cancelled do not count
	)
	slots := make(chan struct{}, readAhead)
	for i, s := range scopes {
		slots <- struct{}{}
		wg.Go(func() {
			defer func() { <-slots }()
			d, err := l.read(ctx, s)
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
					cancel()
				}
				mu.Unlock()
				return
			}
			docs[i] = d
		})
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	return docs, nil
}
