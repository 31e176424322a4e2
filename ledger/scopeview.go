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

// ConversationPage is Conversation with one page of the scope's entries
// (see HistoryPage), oldest first, instead of all of them; the page's
// Next continues with older entries. Runs and queued deliveries are all
// there, as in Conversation.
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
	if err := l.loadAllRuns(ctx, d); err != nil {
		return Conversation{}, "", err
	}
	p, err := l.historyPage(ctx, d, limit, cur)
	if err != nil {
		return Conversation{}, "", err
	}
	items, err := l.queueItems(ctx, d, time.Time{}, time.Time{})
	if err != nil {
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
