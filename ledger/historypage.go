package ledger

import (
	"context"
	"encoding/base64"
	"fmt"
	"sort"
	"strings"
	"time"
)

// HistoryQuery asks for one page of a scope's history (HistoryPage).
type HistoryQuery struct {
	Scope string
	// Limit is how many entries the page holds at most: DefaultHistoryPage
	// when zero, at most MaxHistoryPage.
	Limit int
	// Before is the Next of the previous page; empty starts with the
	// newest entries.
	Before string
}

// HistoryPage is one page of a scope's history.
type HistoryPage struct {
	// Entries are newest first, in History's order reversed: by the time
	// of their latest claim, then by id.
	Entries []Entry
	// Next continues with the entries older than this page's; empty when
	// there are none.
	Next string
}

const (
	// DefaultHistoryPage is a history page's size when the query names
	// none.
	DefaultHistoryPage = 50
	// MaxHistoryPage is the largest history page.
	MaxHistoryPage = 1000
)

// HistoryPage returns one page of a scope's history, newest first: what
// History lists, a page at a time, reading only the spilled records the
// page needs, so that its cost depends on the page's size and not on the
// scope's. Walking a scope from the newest page to the oldest lists each
// entry once, writes between pages included: an entry claimed meanwhile
// is newer than the walk's pages (a fresh walk shows it), an entry moved
// out of the document stays where it was in the order. An entry claimed
// again meanwhile moves to the newest end, as in History, and so leaves
// the pages still to come.
func (vw Views) HistoryPage(ctx context.Context, q HistoryQuery) (HistoryPage, error) {
	l := vw.l
	limit, cur, err := q.parse()
	if err != nil {
		return HistoryPage{}, err
	}
	d, err := l.readFull(ctx, q.Scope)
	if err != nil {
		return HistoryPage{}, err
	}
	return l.historyPage(ctx, d, limit, cur)
}

// parse checks the query: its page size and its cursor (nil: none).
func (q HistoryQuery) parse() (int, *historyCursor, error) {
	limit := q.Limit
	switch {
	case limit == 0:
		limit = DefaultHistoryPage
	case limit < 0 || limit > MaxHistoryPage:
		return 0, nil, fmt.Errorf("%w: a history page holds 1 to %d entries, not %d", ErrInvalid, MaxHistoryPage, limit)
	}
	if q.Before == "" {
		return limit, nil, nil
	}
	c, err := parseHistoryCursor(q.Before)
	if err != nil {
		return 0, nil, err
	}
	return limit, &c, nil
}

// historyPage is HistoryPage on the scope's document d, as read.
func (l *Ledger) historyPage(ctx context.Context, d *document, limit int, cur *historyCursor) (HistoryPage, error) {
	q := HistoryQuery{Scope: d.Scope}
	var found []Entry
	for _, e := range d.Entries {
		if cur.after(e) {
			found = append(found, *e)
		}
	}
	// The chunks (and pages of chunks) that may hold an entry before the
	// cursor, the one with the newest claim first; one of unknown bounds
	// may hold any. A page is read when its turn comes, and its chunks
	// join the rest.
	var todo []historyGroup
	add := func(g historyGroup) {
		if cur != nil && g.first != 0 && g.first > cur.at.UnixMilli() {
			return // every entry of it is newer than the cursor
		}
		todo = append(todo, g)
	}
	for _, p := range d.SpillPages {
		add(historyGroup{first: p.First, last: p.Last, page: &p})
	}
	for _, c := range d.Spilled {
		add(historyGroup{first: c.First, last: c.Last, chunk: c})
	}
	cutoff := l.now().Add(-l.opts.Retention)
	from := map[string]uint64{} // chunk of each spilled entry found
	more := false
	for len(todo) > 0 {
		sort.SliceStable(todo, func(i, j int) bool { return todo[i].newestLast() > todo[j].newestLast() })
		g := todo[0]
		todo = todo[1:]
		if len(found) >= limit {
			sortNewestFirst(found)
			if g.last != 0 && found[limit-1].ClaimedAt.UnixMilli() > g.last {
				// This group and every one after it hold only
				// entries older than a full page.
				more = true
				break
			}
			found = found[:min(len(found), limit+1)]
		}
		if g.page != nil && g.page.Level > 0 {
			ps, err := l.readPagesOf(ctx, q.Scope, *g.page)
			if err != nil {
				return HistoryPage{}, err
			}
			for _, p := range ps {
				add(historyGroup{first: p.First, last: p.Last, page: &p})
			}
			continue
		}
		if g.page != nil {
			cs, err := l.readPage(ctx, q.Scope, *g.page)
			if err != nil {
				return HistoryPage{}, err
			}
			for _, c := range cs {
				add(historyGroup{first: c.First, last: c.Last, chunk: c})
			}
			continue
		}
		c := g.chunk
		rs, err := l.readChunks(ctx, q.Scope, []spillChunk{c})
		if err != nil {
			return HistoryPage{}, err
		}
		for _, r := range rs {
			e := &r.Entry
			if d.spilledCopyStale(e.ID, c.N) || e.SettledAt.Before(cutoff) || !cur.after(e) {
				continue
			}
			if n, dup := from[e.ID]; dup {
				// Two copies and no record of the move (chunks
				// written before Moved was kept): the later holds.
				if n > c.N {
					continue
				}
				found = dropEntry(found, e.ID)
			}
			from[e.ID] = c.N
			found = append(found, *e)
		}
	}
	sortNewestFirst(found)
	if len(found) > limit {
		found, more = found[:limit], true
	}
	page := HistoryPage{Entries: found}
	if more && len(found) > 0 {
		page.Next = historyCursor{at: found[len(found)-1].ClaimedAt, id: found[len(found)-1].ID}.String()
	}
	return page, nil
}

// historyGroup is a chunk, or a page of chunks, a history page may read.
type historyGroup struct {
	first, last int64 // the bounds of its claims; zero: unknown
	chunk       spillChunk
	page        *spillPage
}

// newestLast is the bound on the newest claim of a group's entries for
// ordering, a group of unknown bounds first.
func (g historyGroup) newestLast() int64 {
	if g.last == 0 {
		return 1<<63 - 1
	}
	return g.last
}

func sortNewestFirst(es []Entry) {
	sort.Slice(es, func(i, j int) bool {
		if !es[i].ClaimedAt.Equal(es[j].ClaimedAt) {
			return es[i].ClaimedAt.After(es[j].ClaimedAt)
		}
		return es[i].ID > es[j].ID
	})
}

func dropEntry(es []Entry, id string) []Entry {
	for i := range es {
		if es[i].ID == id {
			return append(es[:i], es[i+1:]...)
		}
	}
	return es
}

// historyCursor is a position in a history walk: the last entry listed.
type historyCursor struct {
	at time.Time
	id string
}

// after reports whether e comes after the cursor in a newest-first walk
// (older claim, or the same and a lower id). A nil cursor is the start.
func (c *historyCursor) after(e *Entry) bool {
	if c == nil {
		return true
	}
	if !e.ClaimedAt.Equal(c.at) {
		return e.ClaimedAt.Before(c.at)
	}
	return e.ID < c.id
}

func (c historyCursor) String() string {
	return base64.RawURLEncoding.EncodeToString([]byte(c.at.UTC().Format(time.RFC3339Nano) + "|" + c.id))
}

func parseHistoryCursor(s string) (historyCursor, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		at, id, ok := strings.Cut(string(b), "|")
		if t, perr := time.Parse(time.RFC3339Nano, at); ok && perr == nil && id != "" {
			return historyCursor{at: t, id: id}, nil
		}
	}
	return historyCursor{}, fmt.Errorf("%w: history cursor %q is not one a history page gave", ErrInvalid, s)
}
