package ledgerapi

import (
	"cmp"
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// What the admin console needs beyond the CLI's endpoints: a scope's
// whole conversation in one answer (or with a page of its entries), a page of deliveries newest first with
// a cursor, and the refusals this process handed out. The console calls
// them through the Client like any other caller.

// RunInfoJSON is one run of a scope.
type RunInfoJSON struct {
	RunID      string    `json:"run_id"`
	Mode       string    `json:"mode"`
	Token      uint64    `json:"token"`
	Delivery   int       `json:"delivery"`
	ContextAt  time.Time `json:"context_at"`
	LastActive time.Time `json:"last_active"`
	Wrote      bool      `json:"wrote,omitempty"`
	EndedAt    time.Time `json:"ended_at,omitzero"`
	EndReason  string    `json:"end_reason,omitempty"`
	// Fenced says why the run may no longer write: superseded,
	// run_ended or run_cancelled. Empty while it may.
	Fenced string `json:"fenced,omitempty"`
}

// RefusalJSON is a claim the ledger refused, as this process answered it.
type RefusalJSON struct {
	At      time.Time `json:"at"`
	Scope   string    `json:"scope"`
	Intent  string    `json:"intent"`
	Summary string    `json:"summary,omitempty"`
	RunID   string    `json:"run_id,omitempty"`
	Token   uint64    `json:"token,omitempty"`
	Reason  string    `json:"reason"`
}

// TimelineJSON answers GET /v1/scopes/{scope}/timeline: everything the
// ledger keeps about a scope, read at once, plus the refusals this gateway
// process answered on it since it started (a refusal changes nothing in
// the ledger, so it is not stored there).
type TimelineJSON struct {
	Scope      string             `json:"scope"`
	Token      uint64             `json:"token"`
	Runs       []RunInfoJSON      `json:"runs"`
	Entries    []EntryJSON        `json:"entries"`
	Deliveries []DeliveryItemJSON `json:"deliveries"`
	Refusals   []RefusalJSON      `json:"refusals"`
	// Attempts are the attempts of each delivery by its entry_id, oldest
	// first, when asked for (attempts=1): those of the newest
	// TimelineAttempts deliveries.
	Attempts map[string][]AttemptJSON `json:"attempts,omitempty"`
	// EntriesNext, when the timeline was asked for a page of entries
	// (entries=N, before), continues with older entries: pass it as
	// before. Empty when there are none.
	EntriesNext string `json:"entries_next,omitempty"`
}

// TimelineAttempts is how many of a scope's newest deliveries a timeline
// lists the attempts of, when asked for them.
const TimelineAttempts = 500

// refusalLog keeps the last refusals per scope for the conversation view,
// bounded in scopes and per scope so that a flood of refused claims costs
// a fixed amount of memory.
type refusalLog struct {
	mu     sync.Mutex
	byKey  map[string][]RefusalJSON
	order  []string // scopes, oldest first, for eviction
	scopes int
	each   int
}

func newRefusalLog(scopes, each int) *refusalLog {
	return &refusalLog{byKey: map[string][]RefusalJSON{}, scopes: scopes, each: each}
}

func (l *refusalLog) add(r RefusalJSON) {
	l.mu.Lock()
	defer l.mu.Unlock()
	list, ok := l.byKey[r.Scope]
	if !ok {
		if len(l.order) >= l.scopes {
			delete(l.byKey, l.order[0])
			l.order = l.order[1:]
		}
		l.order = append(l.order, r.Scope)
	}
	list = append(list, r)
	if len(list) > l.each {
		list = list[len(list)-l.each:]
	}
	l.byKey[r.Scope] = list
}

func (l *refusalLog) of(scope string) []RefusalJSON {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]RefusalJSON{}, l.byKey[scope]...)
}

func (s *server) timeline(r *http.Request) (any, error) {
	scope := r.PathValue("scope")
	q, paged, err := historyQuery(r, scope, "entries")
	if err != nil {
		return nil, err
	}
	var c ledger.Conversation
	var next string
	if paged {
		c, next, err = s.l.Views().ConversationPage(r.Context(), q)
	} else {
		c, err = s.l.Views().Conversation(r.Context(), scope)
	}
	if err != nil {
		return nil, err
	}
	out := TimelineJSON{Scope: scope, Token: c.Token, Runs: make([]RunInfoJSON, 0, len(c.Runs)), Entries: entriesToJSON(c.Entries),
		Deliveries: itemsJSON(c.Queue).Deliveries, Refusals: s.refusals.of(scope), EntriesNext: next}
	for _, ri := range c.Runs {
		out.Runs = append(out.Runs, RunInfoJSON{RunID: ri.ID, Mode: string(ri.Mode), Token: ri.Token, Delivery: ri.Delivery,
			ContextAt: utc(ri.ContextAt), LastActive: utc(ri.LastActive), Wrote: ri.Wrote, EndedAt: utc(ri.EndedAt),
			EndReason: ri.EndReason, Fenced: string(ri.Fenced)})
	}
	switch r.URL.Query().Get("attempts") {
	case "", "0":
	case "1":
		out.Attempts = map[string][]AttemptJSON{}
		// c.Queue is oldest first: the newest TimelineAttempts.
		for _, q := range c.Queue[max(0, len(c.Queue)-TimelineAttempts):] {
			if q.Attempts == 0 && len(q.InlineAttempts) == 0 {
				continue
			}
			as, err := s.attemptsOf(r.Context(), q)
			if err != nil {
				return nil, err
			}
			out.Attempts[q.EntryID] = as
		}
	default:
		return nil, fmt.Errorf("%w: attempts must be 0 or 1", ledger.ErrInvalid)
	}
	return out, nil
}

// Timeline returns a scope's runs, entries, queued deliveries and the
// refusals the serving process answered on it.
func (c *Client) Timeline(ctx context.Context, scope string) (TimelineJSON, error) {
	var out TimelineJSON
	err := c.do(ctx, http.MethodGet, "/v1/scopes/"+url.PathEscape(scope)+"/timeline", nil, &out)
	return out, err
}

// TimelineWithAttempts is Timeline with the attempts of the newest
// TimelineAttempts deliveries.
func (c *Client) TimelineWithAttempts(ctx context.Context, scope string) (TimelineJSON, error) {
	var out TimelineJSON
	err := c.do(ctx, http.MethodGet, "/v1/scopes/"+url.PathEscape(scope)+"/timeline?attempts=1", nil, &out)
	return out, err
}

// TimelineRequest asks for a scope's timeline with a page of its entries.
type TimelineRequest struct {
	Scope    string
	Attempts bool // the attempts of the newest TimelineAttempts deliveries
	// Entries is how many of the scope's entries the timeline lists, the
	// newest before Before (a TimelineJSON.EntriesNext; empty: the
	// newest); zero lists ledger.DefaultHistoryPage.
	Entries int
	Before  string
}

// TimelinePage is Timeline one page at a time (ledger.Views.ConversationPage):
// a page of the scope's entries (oldest first, like Timeline's), the
// deliveries received in the page's span of time and the runs they name,
// instead of all of them.
func (c *Client) TimelinePage(ctx context.Context, tr TimelineRequest) (TimelineJSON, error) {
	q := url.Values{}
	q.Set("entries", strconv.Itoa(cmp.Or(tr.Entries, ledger.DefaultHistoryPage)))
	if tr.Before != "" {
		q.Set("before", tr.Before)
	}
	if tr.Attempts {
		q.Set("attempts", "1")
	}
	var out TimelineJSON
	err := c.do(ctx, http.MethodGet, "/v1/scopes/"+url.PathEscape(tr.Scope)+"/timeline?"+q.Encode(), nil, &out)
	return out, err
}

// PageRequest asks for one page of deliveries, newest first.
type PageRequest struct {
	DeliveryFilter
	EventID string    // only this event id
	Until   time.Time // received before
	Size    int       // deliveries per page; default 50, at most 500
	Cursor  string    // from the previous page's Next
}

// PageJSON answers GET /v1/deliveries with page=N.
type PageJSON struct {
	Deliveries []DeliveryItemJSON `json:"deliveries"`
	// Next continues the listing after the last delivery on this page;
	// empty on the last page.
	Next string `json:"next,omitempty"`
	// Scanned is how many matching deliveries the read scope held (with
	// a scope), or how many scopes the page read (without one). When
	// Partial is set, the scope bound (limit) stopped the read before the
	// page filled up: Next goes on with older scopes.
	Scanned int  `json:"scanned"`
	Partial bool `json:"partial,omitempty"`
}

const maxPage = 500

// cursor is a position in newest-first order: the last item of a page.
func cursorOf(q DeliveryItemJSON) string {
	return base64.RawURLEncoding.EncodeToString([]byte(q.ReceivedAt.UTC().Format(time.RFC3339Nano) + "|" + q.EntryID))
}

func parseCursor(s string) (time.Time, string, error) {
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err == nil {
		at, id, ok := strings.Cut(string(b), "|")
		if ok {
			t, perr := time.Parse(time.RFC3339Nano, at)
			if perr == nil {
				return t, id, nil
			}
		}
	}
	return time.Time{}, "", fmt.Errorf("%w: cursor %q is not one this API gave", ledger.ErrInvalid, s)
}

// before reports whether a comes after b in newest-first order.
func newestFirst(a, b DeliveryItemJSON) bool {
	if !a.ReceivedAt.Equal(b.ReceivedAt) {
		return a.ReceivedAt.After(b.ReceivedAt)
	}
	return a.EntryID > b.EntryID
}

// page serves GET /v1/deliveries with page=N: the filter's matches newest
// first, N at a time, continued by cursor. Without a scope it walks the
// received index (recentPage); within one scope it sorts that scope's
// deliveries.
func (s *server) page(r *http.Request, f DeliveryFilter) (any, error) {
	q := r.URL.Query()
	size, err := strconv.Atoi(q.Get("page"))
	if err != nil || size < 1 || size > maxPage {
		return nil, fmt.Errorf("%w: page must be an integer from 1 to %d", ledger.ErrInvalid, maxPage)
	}
	var until time.Time
	if v := q.Get("until"); v != "" {
		if until, err = time.Parse(time.RFC3339, v); err != nil {
			return nil, fmt.Errorf("%w: until %q is not RFC 3339", ledger.ErrInvalid, v)
		}
	}
	var after *DeliveryItemJSON
	if v := q.Get("cursor"); v != "" && q.Get("scope") != "" {
		at, id, err := parseCursor(v)
		if err != nil {
			return nil, err
		}
		after = &DeliveryItemJSON{ReceivedAt: at, EntryID: id}
	}
	eventID := q.Get("event_id")
	lf, err := s.ledgerFilter(r.Context(), f)
	if err != nil {
		return nil, err
	}
	if f.Scope == "" {
		lf.EventID, lf.Until = eventID, until
		return s.recentPage(r, lf, size)
	}
	if lf.Limit <= 0 {
		lf.Limit = 1000
	}
	items, err := s.l.Queue().ListDeliveries(r.Context(), lf)
	if err != nil {
		return nil, err
	}
	out := PageJSON{Deliveries: []DeliveryItemJSON{}}
	matches := make([]DeliveryItemJSON, 0, len(items))
	scopes := map[string]bool{}
	for _, it := range items {
		scopes[it.Scope] = true
		if eventID != "" && it.EventID != eventID || !until.IsZero() && !it.ReceivedAt.Before(until) {
			continue
		}
		matches = append(matches, itemJSON(it))
	}
	out.Scanned = len(matches)
	out.Partial = f.Scope == "" && len(scopes) >= lf.Limit
	sort.Slice(matches, func(i, j int) bool { return newestFirst(matches[i], matches[j]) })
	start := 0
	if after != nil {
		start = sort.Search(len(matches), func(i int) bool { return newestFirst(*after, matches[i]) })
	}
	end := min(start+size, len(matches))
	out.Deliveries = append(out.Deliveries, matches[start:end]...)
	if end < len(matches) && end > start {
		out.Next = cursorOf(matches[end-1])
	}
	return out, nil
}

// DeliveriesPage lists one page of deliveries, newest first.
func (c *Client) DeliveriesPage(ctx context.Context, p PageRequest) (PageJSON, error) {
	q := url.Values{}
	for k, v := range map[string]string{"source": p.Source, "status": p.Status, "scope": p.Scope, "event_id": p.EventID, "cursor": p.Cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if !p.Since.IsZero() {
		q.Set("since", p.Since.UTC().Format(time.RFC3339))
	}
	if !p.Until.IsZero() {
		q.Set("until", p.Until.UTC().Format(time.RFC3339))
	}
	if p.Limit > 0 {
		q.Set("limit", strconv.Itoa(p.Limit))
	}
	size := p.Size
	if size <= 0 {
		size = 50
	}
	q.Set("page", strconv.Itoa(min(size, maxPage)))
	var out PageJSON
	err := c.do(ctx, http.MethodGet, "/v1/deliveries?"+q.Encode(), nil, &out)
	return out, err
}
