package ledger

import (
	"context"
	"slices"
	"sort"
	"time"
)

// RunInfo is one run of a scope as an operator sees it: its fencing token,
// how many deliveries it had, and whether it may still write.
type RunInfo struct {
	ID        string
	Mode      Mode
	Token     uint64 // the token of its latest delivery
	Delivery  int
	ContextAt time.Time
	// LastActive is the last time the run began a delivery, claimed or
	// heartbeat.
	LastActive time.Time
	Wrote      bool
	EndedAt    time.Time
	EndReason  string
	// Fenced is why the run may no longer write (superseded, run_ended,
	// run_cancelled), or empty while it may.
	Fenced Reason
}

// Conversation is everything the ledger keeps about one scope: its runs,
// its effect entries and its queued deliveries, read in one store read so
// the three agree with each other.
type Conversation struct {
	Scope string
	// Token is the last fencing token handed out on the scope.
	Token   uint64
	Runs    []RunInfo   // by token, oldest first
	Entries []Entry     // by claim time
	Queue   []QueueItem // by receipt time
}

// Conversation reads a scope's runs, entries and queued deliveries. It
// changes nothing.
func (vw Views) Conversation(ctx context.Context, scope string) (Conversation, error) {
	l := vw.l
	d, err := l.readWhole(ctx, scope)
	if err != nil {
		return Conversation{}, err
	}
	if err := l.loadAllRuns(ctx, d); err != nil {
		return Conversation{}, err
	}
	return conversationOf(d, d.history()), nil
}

// ConversationPage is Conversation a page at a time, so that a long scope
// costs a page to show: one page of the scope's entries (see HistoryPage),
// oldest first, whose Next continues with older entries; the queued
// deliveries received in the page's span of time, from its oldest entry's
// claim on (from the start on the last page) up to where the newer page's
// span begins (open on the first page), so that the pages together list
// every delivery once; and the runs the page's entries and deliveries
// name, with those the scope's document holds (the live and recent ones).
// A run that has left the document and that no entry or delivery names
// (one that began and ended without writing) is listed by Conversation
// only.
func (vw Views) ConversationPage(ctx context.Context, q HistoryQuery) (Conversation, string, error) {
	l := vw.l
	limit, cur, err := q.parse()
	if err != nil {
		return Conversation{}, "", err
	}
	d, err := l.readFull(ctx, q.Scope)
	if err != nil {
		return Conversation{}, "", err
	}
	p, err := l.historyPage(ctx, d, limit, cur)
	if err != nil {
		return Conversation{}, "", err
	}
	var since, until time.Time
	if p.Next != "" && len(p.Entries) > 0 {
		since = p.Entries[len(p.Entries)-1].ClaimedAt
	}
	if cur != nil {
		until = cur.at
	}
	items, err := l.queueItems(ctx, d, since, until)
	if err != nil {
		return Conversation{}, "", err
	}
	// queueItems reads the chunks that meet the span and may answer more;
	// the span's edges are the pages'.
	items = slices.DeleteFunc(items, func(q QueueItem) bool {
		return (!since.IsZero() && q.ReceivedAt.Before(since)) || (!until.IsZero() && !q.ReceivedAt.Before(until))
	})
	named := make([]string, 0, len(p.Entries)+len(items))
	for _, e := range p.Entries {
		named = append(named, e.RunID)
	}
	for _, q := range items {
		named = append(named, q.RunID)
	}
	if err := l.loadRuns(ctx, d, named); err != nil {
		return Conversation{}, "", err
	}
	slices.Reverse(p.Entries)
	c := conversationOf(d, p.Entries)
	c.Queue = items
	return c, p.Next, nil
}

// conversationOf is the conversation of d with entries.
func conversationOf(d *document, entries []Entry) Conversation {
	scope := d.Scope
	c := Conversation{Scope: scope, Token: d.Token, Entries: entries, Runs: make([]RunInfo, 0, len(d.Runs)),
		Queue: make([]QueueItem, 0, len(d.Queue))}
	for _, r := range d.Runs {
		info := RunInfo{ID: r.ID, Mode: r.Mode, Token: r.Token, Delivery: r.Delivery, ContextAt: r.ContextAt,
			LastActive: r.LastActive, Wrote: r.Wrote, EndedAt: r.EndedAt, EndReason: r.EndReason}
		switch {
		case r.Cancelled:
			info.Fenced = ReasonRunCancelled
		case r.Ended:
			info.Fenced = ReasonRunEnded
		case r.Mode == ModeSupersede && newerRun(d, r) != nil, r.Mode == ModeExclusive && r.LostLease:
			info.Fenced = ReasonSuperseded
		}
		c.Runs = append(c.Runs, info)
	}
	sort.Slice(c.Runs, func(i, j int) bool { return c.Runs[i].Token < c.Runs[j].Token })
	for _, q := range d.Queue {
		c.Queue = append(c.Queue, *q)
	}
	sort.Slice(c.Queue, func(i, j int) bool {
		if !c.Queue[i].ReceivedAt.Equal(c.Queue[j].ReceivedAt) {
			return c.Queue[i].ReceivedAt.Before(c.Queue[j].ReceivedAt)
		}
		return c.Queue[i].EntryID < c.Queue[j].EntryID
	})
	return c
}
