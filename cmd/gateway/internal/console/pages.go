package console

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/replyonce/gateway/cmd/gateway/internal/when"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// bodyShown is how much of a body the event page shows; the rest is a
// download.
const bodyShown = 32 << 10

// pageSize is the events list's page.
const pageSize = 50

// filter is the events list's form, as the query string carries it.
type filter struct {
	Source, Status, Scope, EventID, Since, Until string
}

func filterOf(r *http.Request) filter {
	q := r.URL.Query()
	if r.Method == http.MethodPost {
		q = r.PostForm
	}
	return filter{Source: strings.TrimSpace(q.Get("source")), Status: q.Get("status"), Scope: strings.TrimSpace(q.Get("scope")),
		EventID: strings.TrimSpace(q.Get("event_id")), Since: q.Get("since"), Until: q.Get("until")}
}

// Pairs is the filter as link arguments.
func (f filter) Pairs() []string {
	return []string{"source", f.Source, "status", f.Status, "scope", f.Scope, "event_id", f.EventID, "since", f.Since, "until", f.Until}
}

// Link is the events list for this filter.
func (f filter) Link() string { return link("/events", f.Pairs()...) }

// ReplayLink is the bulk replay confirmation for this filter.
func (f filter) ReplayLink() string { return link("/events/replay", f.Pairs()...) }

// timeOf reads a form time: the browser's datetime-local (taken as UTC,
// as the console shows every time) or RFC 3339.
func timeOf(field, v string, now time.Time) (time.Time, error) {
	if v == "" {
		return time.Time{}, nil
	}
	t, err := when.Parse(v, now, "2006-01-02T15:04:05", "2006-01-02T15:04")
	if err != nil {
		return time.Time{}, &httpError{status: http.StatusBadRequest, msg: field + ": " + strconv.Quote(v) + " is not a time (use 2006-01-02T15:04, UTC, or a span back from now: 10m, 1h, 2d)"}
	}
	return t, nil
}

func (f filter) api(now time.Time) (ledgerapi.PageRequest, error) {
	since, err := timeOf("since", f.Since, now)
	if err != nil {
		return ledgerapi.PageRequest{}, err
	}
	until, err := timeOf("until", f.Until, now)
	if err != nil {
		return ledgerapi.PageRequest{}, err
	}
	return ledgerapi.PageRequest{DeliveryFilter: ledgerapi.DeliveryFilter{Source: f.Source, Status: f.Status, Scope: f.Scope, Since: since},
		EventID: f.EventID, Until: until}, nil
}

// statuses offered by the filter; the list itself shows whatever status
// the API answers.
var statuses = []string{"queued", "delivering", "delivered", "rejected", "failed", "dead", "superseded", "coalesced", "paused"}

func (c *Console) events(w http.ResponseWriter, r *http.Request, s *session) error {
	f := filterOf(r)
	data := map[string]any{"F": f, "Statuses": statuses, "Sources": c.sources}
	req, err := f.api(c.now())
	if err != nil {
		return err
	}
	req.Size, req.Cursor = pageSize, r.URL.Query().Get("cursor")
	var page ledgerapi.PageJSON
	if f.Source != "" && f.EventID != "" && f.Scope == "" {
		// One event by its id: the default scope finds it whatever its
		// status, delivered included.
		d, err := c.api.ShowDelivery(r.Context(), "", f.Source, f.EventID)
		switch {
		case err == nil:
			if f.Status == "" || f.Status == d.Delivery.Status {
				page.Deliveries = []ledgerapi.DeliveryItemJSON{d.Delivery}
			}
		case errors.Is(err, ledger.ErrUnknownEntry) || errors.Is(err, ledger.ErrUnknownRun) || isNotFound(err):
			if page, err = c.api.DeliveriesPage(r.Context(), req); err != nil {
				return err
			}
		default:
			return err
		}
	} else if page, err = c.api.DeliveriesPage(r.Context(), req); err != nil {
		return err
	}
	data["Page"] = page
	if page.Next != "" {
		data["NextLink"] = link("/events", append(f.Pairs(), "cursor", page.Next)...)
	}
	data["CanReplay"] = f.Status != "" && f.Status != "delivering"
	c.render(w, r, s, http.StatusOK, "events", "Events", data)
	return nil
}

func isNotFound(err error) bool {
	var ae *ledgerapi.Error
	return errors.As(err, &ae) && ae.Status == http.StatusNotFound
}

// eventRef names one event as the event page's query and forms carry it.
type eventRef struct{ Scope, Source, EventID string }

func refOf(get func(string) string) (eventRef, error) {
	ref := eventRef{Scope: get("scope"), Source: get("source"), EventID: get("event_id")}
	if ref.Source == "" || ref.EventID == "" {
		return ref, &httpError{status: http.StatusBadRequest, msg: "source and event_id are required"}
	}
	return ref, nil
}

// Link is the event's page.
func (e eventRef) Link() string {
	return link("/event", "source", e.Source, "event_id", e.EventID, "scope", e.Scope)
}

// bodyView is an event body as the page shows it.
type bodyView struct {
	Text      string
	JSON      bool
	Binary    bool
	Truncated bool
	Size      int
}

func viewBody(ev ledgerapi.EventJSON) bodyView {
	if ev.BodyBase64 {
		raw, _ := base64.StdEncoding.DecodeString(ev.Body)
		return bodyView{Binary: true, Size: len(raw), Truncated: true}
	}
	v := bodyView{Text: ev.Body, Size: len(ev.Body)}
	if json.Valid([]byte(ev.Body)) {
		var buf bytes.Buffer
		if json.Indent(&buf, []byte(ev.Body), "", "  ") == nil {
			v.Text, v.JSON = buf.String(), true
		}
	}
	if len(v.Text) > bodyShown {
		cut := bodyShown
		for cut > 0 && !utf8Start(v.Text[cut]) {
			cut--
		}
		v.Text, v.Truncated = v.Text[:cut], true
	}
	return v
}

func utf8Start(b byte) bool { return b&0xC0 != 0x80 }

// waitingFor says in a sentence what an unfinished delivery waits for.
func waitingFor(d ledgerapi.DeliveryItemJSON, paused bool, now time.Time) string {
	switch d.Status {
	case "queued":
		if paused {
			return "Its source is paused: nothing is dispatched until it is resumed."
		}
		if d.NextAt.After(now) {
			return "Its next attempt, due " + ago(now, d.NextAt) + " (" + stamp(d.NextAt) + ")."
		}
		return "A dispatcher to take it: it is due now."
	case "delivering":
		return "The agent's answer: a dispatcher holds it until " + stamp(d.LeaseUntil) + ", then it is due again."
	case "dead":
		return "A person: its retry schedule ran out. Replay it to deliver it again."
	case "rejected":
		if d.Inline {
			return "Nothing: the agent rejected the event itself, and the provider was told so."
		}
		return "Nothing: the agent rejected the event itself. Replay it if that was a mistake."
	case "failed":
		return "The provider's retry: the agent did not take the event inline, so the provider was answered 503 and delivers it again."
	}
	return ""
}

// shownEvent reads the event the query names, and its reference with the
// scope the ledger found it on.
func (c *Console) shownEvent(r *http.Request) (eventRef, ledgerapi.DeliveryJSON, error) {
	ref, err := refOf(r.URL.Query().Get)
	if err != nil {
		return ref, ledgerapi.DeliveryJSON{}, err
	}
	d, err := c.api.ShowDelivery(r.Context(), ref.Scope, ref.Source, ref.EventID)
	if err != nil {
		return ref, d, err
	}
	ref.Scope = d.Delivery.Scope
	return ref, d, nil
}

func (c *Console) event(w http.ResponseWriter, r *http.Request, s *session) error {
	ref, d, err := c.shownEvent(r)
	if err != nil {
		return err
	}
	tl, err := c.api.Timeline(r.Context(), ref.Scope)
	if err != nil {
		return err
	}
	var run *ledgerapi.RunInfoJSON
	for i := range tl.Runs {
		if tl.Runs[i].RunID == d.Delivery.RunID {
			run = &tl.Runs[i]
		}
	}
	paused, err := c.api.PausedSources(r.Context())
	if err != nil {
		return err
	}
	isPaused := false
	for _, p := range paused {
		isPaused = isPaused || p == d.Delivery.Source
	}
	names := make([]string, 0, len(d.Event.Header))
	for k := range d.Event.Header {
		names = append(names, k)
	}
	sort.Strings(names)
	// Trials (sent to another URL) are listed among the attempts, newest
	// first by time since they are numbered apart, but not drawn: the
	// picture is the event's own deliveries.
	var oldest []ledgerapi.AttemptJSON
	var tried *ledgerapi.AttemptJSON
	wantTrial, _ := strconv.Atoi(r.URL.Query().Get("tried"))
	for i, a := range d.Attempts {
		if a.To == "" {
			oldest = append(oldest, a)
		} else if a.N == wantTrial {
			tried = &d.Attempts[i]
		}
	}
	sort.Slice(oldest, func(i, j int) bool { return oldest[i].N < oldest[j].N })
	attempts := append([]ledgerapi.AttemptJSON{}, d.Attempts...)
	sort.SliceStable(attempts, func(i, j int) bool { return attempts[i].At.After(attempts[j].At) })
	c.render(w, r, s, http.StatusOK, "event", "Event "+ref.EventID, map[string]any{
		"Ref": ref, "D": d.Delivery, "Event": d.Event, "Body": viewBody(d.Event), "HeaderNames": names,
		"Attempts": attempts, "Picture": attemptPicture(d.Delivery, oldest, c.now()), "Run": run, "Waiting": waitingFor(d.Delivery, isPaused, c.now()), "Paused": isPaused,
		"ScopeLink": link("/scope", "scope", ref.Scope), "BodyLink": link("/event/body", "source", ref.Source, "event_id", ref.EventID, "scope", ref.Scope),
		"Replayed": r.URL.Query().Get("replayed") != "", "Tried": tried,
	})
	return nil
}

// replayConfirm asks before one event is replayed, as a bulk replay does:
// the agent receives the event once more.
func (c *Console) replayConfirm(w http.ResponseWriter, r *http.Request, s *session) error {
	ref, d, err := c.shownEvent(r)
	if err != nil {
		return err
	}
	c.render(w, r, s, http.StatusOK, "replay", "Replay event "+ref.EventID, map[string]any{"D": d.Delivery, "Back": ref.Link()})
	return nil
}

// trial sends the event once to another URL (POST /v1/deliveries/trial)
// and shows the event page with the trial's outcome.
func (c *Console) trial(w http.ResponseWriter, r *http.Request, s *session) error {
	ref, err := refOf(r.PostFormValue)
	if err != nil {
		return err
	}
	rec, err := c.api.Trial(r.Context(), ledgerapi.TrialRequest{Scope: ref.Scope, Source: ref.Source, EventID: ref.EventID, To: r.PostFormValue("to")})
	if err != nil {
		return err
	}
	redirect(w, r, link("/event", "source", ref.Source, "event_id", ref.EventID, "scope", ref.Scope, "tried", strconv.Itoa(rec.N)))
	return nil
}

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// eventBody downloads the raw body as an attachment, never rendered.
func (c *Console) eventBody(w http.ResponseWriter, r *http.Request, s *session) error {
	ref, err := refOf(r.URL.Query().Get)
	if err != nil {
		return err
	}
	d, err := c.api.ShowDelivery(r.Context(), ref.Scope, ref.Source, ref.EventID)
	if err != nil {
		return err
	}
	body := []byte(d.Event.Body)
	if d.Event.BodyBase64 {
		if body, err = base64.StdEncoding.DecodeString(d.Event.Body); err != nil {
			return err
		}
	}
	name := unsafeName.ReplaceAllString(ref.Source+"-"+ref.EventID, "_")
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Disposition", `attachment; filename="`+name+`.body"`)
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
	return nil
}

func (c *Console) replay(w http.ResponseWriter, r *http.Request, s *session) error {
	ref, err := refOf(r.PostFormValue)
	if err != nil {
		return err
	}
	if _, err := c.api.Replay(r.Context(), ledgerapi.ReplayRequest{Scope: ref.Scope, Source: ref.Source, EventID: ref.EventID}); err != nil {
		return err
	}
	redirect(w, r, link("/event", "source", ref.Source, "event_id", ref.EventID, "scope", ref.Scope, "replayed", "1"))
	return nil
}

// bulkFilter is the filter a bulk replay takes: it needs a status, as the
// API does, so that it never replays delivered events by accident.
func bulkFilter(f filter, now time.Time) (ledgerapi.DeliveryFilter, error) {
	req, err := f.api(now)
	if err != nil {
		return ledgerapi.DeliveryFilter{}, err
	}
	if f.Status == "" || f.Status == "delivering" {
		return ledgerapi.DeliveryFilter{}, &httpError{status: http.StatusBadRequest, msg: "A bulk replay needs a status filter (queued, delivered with a scope, rejected or dead)."}
	}
	if f.EventID != "" || !req.Until.IsZero() {
		return ledgerapi.DeliveryFilter{}, &httpError{status: http.StatusBadRequest, msg: "A bulk replay takes source, status, scope and since; name one event on its own page instead."}
	}
	return req.DeliveryFilter, nil
}

func (c *Console) bulkConfirm(w http.ResponseWriter, r *http.Request, s *session) error {
	f := filterOf(r)
	lf, err := bulkFilter(f, c.now())
	if err != nil {
		return err
	}
	targets, err := c.api.Deliveries(r.Context(), lf)
	if err != nil {
		return err
	}
	refs := make([]eventRef, 0, len(targets))
	for _, t := range targets {
		refs = append(refs, eventRef{Scope: t.Scope, Source: t.Source, EventID: t.EventID})
	}
	c.render(w, r, s, http.StatusOK, "bulk", "Replay events", map[string]any{"F": f, "Targets": refs, "Count": len(refs)})
	return nil
}

func (c *Console) bulkReplay(w http.ResponseWriter, r *http.Request, s *session) error {
	f := filterOf(r)
	lf, err := bulkFilter(f, c.now())
	if err != nil {
		return err
	}
	done, err := c.api.Replay(r.Context(), ledgerapi.ReplayRequest{Filter: &lf})
	if err != nil {
		return err
	}
	c.render(w, r, s, http.StatusOK, "bulk", "Replay events", map[string]any{"F": f, "Done": true, "Count": len(done)})
	return nil
}

// maxMoments is how many of a conversation's latest moments the page
// shows unless asked for all.
const maxMoments = 500

// conversationEntries is how many of a conversation's effect entries one
// page of it reads and shows, the newest first; a link lists the older
// ones, as many again, so that a long conversation costs a page.
const conversationEntries = 200

// moment is one line of a conversation's timeline.
type moment struct {
	At      time.Time
	When    string // At as shown
	Class   string // the status's CSS class
	TokenS  string
	Order   int // breaks ties: received, claim, settle, refusal, finish
	Kind    string
	Status  string
	What    string
	RunID   string
	Token   uint64
	Detail  string
	Link    string
	EntryID string
	// Neutral: an ending that is no failure (folded, superseded), shown
	// without a status colour; DetailLink links the detail (the event a
	// folded one was delivered in).
	Neutral    bool
	DetailLink string
}

func (c *Console) conversation(w http.ResponseWriter, r *http.Request, s *session) error {
	scope := r.URL.Query().Get("scope")
	if scope == "" {
		redirect(w, r, "/conversations")
		return nil
	}
	before := r.URL.Query().Get("before")
	tl, err := c.api.TimelinePage(r.Context(), ledgerapi.TimelineRequest{Scope: scope, Attempts: true,
		Entries: conversationEntries, Before: before})
	if err != nil {
		return err
	}
	lines := tl
	if before != "" {
		// A page of older entries, with the events received in its span
		// of time and their runs. Attempts and refusals are the newest
		// page's: the attempts of the newest deliveries, the refusals
		// this process answered lately.
		lines = ledgerapi.TimelineJSON{Scope: tl.Scope, Entries: tl.Entries, Deliveries: tl.Deliveries, Runs: tl.Runs}
	}
	all := moments(lines, c.now())
	shown, earlier := all, 0
	if r.URL.Query().Get("all") == "" && len(all) > maxMoments {
		earlier = len(all) - maxMoments
		shown = all[earlier:]
	}
	data := map[string]any{"Scope": scope, "T": tl, "Moments": shown, "Older": before != "",
		"Earlier": earlier, "AllLink": link("/scope", "scope", scope, "before", before, "all", "1"),
		"Newest": link("/scope", "scope", scope), "PageSize": conversationEntries}
	if tl.EntriesNext != "" {
		data["OlderLink"] = link("/scope", "scope", scope, "before", tl.EntriesNext)
	}
	c.render(w, r, s, http.StatusOK, "scope", "Conversation "+scope, data)
	return nil
}

// moments merges a scope's deliveries, their attempts, entries, runs and
// refusals into one time line, oldest first. A delivery's own ledger entry
// (its deliver claim) is not a line of its own: its attempts are, each
// with the number the event page gives it, so the page has one numbering
// (attempt N, fencing token T). A coalesced or superseded event is no
// failure: it ends neutrally, "folded into" the event delivered for it or
// "superseded by run" the newer run.
func moments(tl ledgerapi.TimelineJSON, now time.Time) []moment {
	out := make([]moment, 0, 2*len(tl.Entries)+3*len(tl.Deliveries)+len(tl.Refusals))
	deliverEntries := make(map[string]bool, len(tl.Deliveries))
	for _, d := range tl.Deliveries {
		deliverEntries[d.EntryID] = true
		ref := eventRef{Scope: d.Scope, Source: d.Source, EventID: d.EventID}
		what := d.Source + " " + d.EventID
		detail := strconv.Itoa(d.BodyBytes) + " bytes"
		if d.Inline {
			detail += ", forwarded inline"
		}
		if d.CoverCount > 1 {
			detail += ", delivered on behalf of " + strconv.Itoa(d.CoverCount) + " events"
		}
		out = append(out, moment{At: d.ReceivedAt, Order: 0, Kind: "event received", Status: d.Status, What: what,
			RunID: d.RunID, Detail: detail, Link: ref.Link(), Neutral: d.Status == "coalesced" || d.Status == "superseded"})
		attempts, listed := tl.Attempts[d.EntryID]
		for _, a := range attempts {
			detail := "attempt " + strconv.Itoa(a.N)
			if a.AgentStatus != 0 {
				detail += ", agent answered " + strconv.Itoa(a.AgentStatus)
			}
			detail += " in " + strconv.FormatFloat(a.LatencyMs, 'f', 1, 64) + " ms"
			if a.Late {
				detail += ", late: another delivery had taken over"
			}
			if a.Error != "" {
				detail += ": " + a.Error
			}
			out = append(out, moment{At: a.At, Order: 1, Kind: "attempt", Status: a.Outcome, What: what, RunID: d.RunID, Token: a.Token,
				Detail: detail, Link: ref.Link()})
		}
		if !listed && tl.Attempts == nil && d.Attempts > 0 {
			// An API without attempts on its timeline: the count at least.
			out[len(out)-1].Detail += ", " + strconv.Itoa(d.Attempts) + " attempt(s)"
		}
		if d.FinishedAt.IsZero() {
			continue
		}
		end := moment{At: d.FinishedAt, Order: 4, Kind: "delivery finished", Status: d.Status, What: what, RunID: d.RunID, Link: ref.Link()}
		switch d.Status {
		case "coalesced":
			end.Kind, end.Neutral, end.Detail = "folded", true, "folded into "+d.CoveredBy
			if d.CoveredBy != "" {
				end.DetailLink = eventRef{Scope: d.Scope, Source: d.Source, EventID: d.CoveredBy}.Link()
			}
		case "superseded":
			end.Kind, end.Neutral, end.Detail = "superseded", true, "superseded by run "+d.SupersededBy
		default:
			if d.LastStatus != 0 {
				end.Detail = "agent answered " + strconv.Itoa(d.LastStatus)
			}
		}
		out = append(out, end)
	}
	for _, e := range tl.Entries {
		if deliverEntries[e.ID] {
			continue // the delivery's attempts tell it
		}
		what := e.Intent
		if e.Summary != "" {
			what += " — " + e.Summary
		}
		claim := moment{At: e.ClaimedAt, Order: 2, Kind: "claim", Status: "claimed", What: what, RunID: e.RunID, Token: e.Token, EntryID: e.ID}
		if e.Attempt > 1 {
			claim.Detail = "claim attempt " + strconv.Itoa(e.Attempt)
		}
		out = append(out, claim)
		state, abandoned := entryState(e.State, e.Abandoned, e.Deadline, e.Redeliverable, now)
		if e.SettledAt.IsZero() && state == "pending" {
			continue
		}
		detail := ""
		if abandoned {
			detail = "abandoned: never settled within its pending TTL"
		}
		if e.ResolvedBy != "" {
			detail = strings.TrimSpace(detail + " resolved by " + e.ResolvedBy)
		}
		if e.Error != "" && !abandoned {
			detail = strings.TrimSpace(detail + " " + e.Error)
		}
		at := e.SettledAt
		if at.IsZero() {
			at = e.ClaimedAt
			if abandoned && !e.Deadline.IsZero() {
				at = e.Deadline
			}
		}
		out = append(out, moment{At: at, Order: 3, Kind: settleKind(state), Status: state, What: what, RunID: e.RunID,
			Token: e.Token, Detail: detail, EntryID: e.ID})
	}
	for _, f := range tl.Refusals {
		what := f.Intent
		if f.Summary != "" {
			what += " — " + f.Summary
		}
		out = append(out, moment{At: f.At, Order: 3, Kind: "refused", Status: f.Reason, What: what, RunID: f.RunID, Token: f.Token})
	}
	for _, ru := range tl.Runs {
		if !ru.EndedAt.IsZero() {
			out = append(out, moment{At: ru.EndedAt, Order: 5, Kind: "run ended", Status: ru.Fenced, What: ru.EndReason, RunID: ru.RunID, Token: ru.Token})
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if !out[i].At.Equal(out[j].At) {
			return out[i].At.Before(out[j].At)
		}
		return out[i].Order < out[j].Order
	})
	// Formatted here once rather than through template functions, which
	// cost a reflective call each on a page of thousands of lines.
	for i := range out {
		m := &out[i]
		m.When, m.Class = stamp(m.At), statusClass(m.Status)
		if m.Neutral {
			m.Class = "st-other"
		}
		if m.Token != 0 {
			m.TokenS = strconv.FormatUint(m.Token, 10)
		}
	}
	return out
}

// entryState is ledger.ShownState for the console's strings: the state an
// entry is shown with on every page and in the CLI.
func entryState(state string, abandoned bool, deadline time.Time, redeliverable bool, now time.Time) (string, bool) {
	st, ab := ledger.ShownState(ledger.State(state), abandoned, redeliverable, deadline, now)
	return string(st), ab
}

func settleKind(state string) string {
	switch state {
	case "committed":
		return "commit"
	case "failed":
		return "not applied"
	case "ambiguous":
		return "ambiguous"
	}
	return state
}

func (c *Console) ambiguous(w http.ResponseWriter, r *http.Request, s *session) error {
	es, err := c.api.Ambiguous(r.Context(), 100)
	if err != nil {
		return err
	}
	type row struct {
		ledger.Entry
		State     string
		Abandoned bool
	}
	rows := make([]row, 0, len(es))
	now := c.now()
	for _, e := range es {
		st, ab := entryState(string(e.State), e.Abandoned, e.Deadline(), e.Redeliverable, now)
		rows = append(rows, row{Entry: e, State: st, Abandoned: ab})
	}
	c.render(w, r, s, http.StatusOK, "ambiguous", "Ambiguous entries", map[string]any{"Entries": rows,
		"Resolved": r.URL.Query().Get("resolved"), "By": r.URL.Query().Get("by"), "At": r.URL.Query().Get("at"), "Outcome": r.URL.Query().Get("outcome")})
	return nil
}

func outcomeOf(v string) (ledger.Outcome, error) {
	switch o := ledger.Outcome(v); o {
	case ledger.OutcomeCommitted, ledger.OutcomeNotApplied:
		return o, nil
	}
	return "", &httpError{status: http.StatusBadRequest, msg: "outcome must be committed or not_applied"}
}

func (c *Console) resolveConfirm(w http.ResponseWriter, r *http.Request, s *session) error {
	q := r.URL.Query()
	outcome, err := outcomeOf(q.Get("outcome"))
	if err != nil {
		return err
	}
	scope, id := q.Get("scope"), q.Get("entry_id")
	hist, err := c.api.History(r.Context(), scope)
	if err != nil {
		return err
	}
	var entry *ledger.Entry
	for i := range hist {
		if hist[i].ID == id {
			entry = &hist[i]
		}
	}
	if entry == nil {
		return &httpError{status: http.StatusNotFound, msg: "no entry " + strconv.Quote(id) + " on scope " + strconv.Quote(scope)}
	}
	state, abandoned := entryState(string(entry.State), entry.Abandoned, entry.Deadline(), entry.Redeliverable, c.now())
	c.render(w, r, s, http.StatusOK, "resolve", "Resolve an entry", map[string]any{"E": entry, "Outcome": string(outcome),
		"State": state, "Abandoned": abandoned})
	return nil
}

func (c *Console) resolve(w http.ResponseWriter, r *http.Request, s *session) error {
	outcome, err := outcomeOf(r.PostFormValue("outcome"))
	if err != nil {
		return err
	}
	who := strings.TrimSpace(r.PostFormValue("who"))
	if who == "" {
		return &httpError{status: http.StatusBadRequest, msg: "who: type your name, so the ledger records who resolved the entry"}
	}
	e, err := c.api.Resolve(r.Context(), ledger.Resolution{Scope: r.PostFormValue("scope"), EntryID: r.PostFormValue("entry_id"), Outcome: outcome, Who: who})
	if err != nil {
		return err
	}
	redirect(w, r, link("/ambiguous", "resolved", e.ID, "by", e.ResolvedBy, "at", stamp(e.SettledAt), "outcome", string(e.State)))
	return nil
}

func (c *Console) sourcesPage(w http.ResponseWriter, r *http.Request, s *session) error {
	paused, err := c.api.PausedSources(r.Context())
	if err != nil {
		return err
	}
	set := map[string]bool{}
	for _, p := range paused {
		set[p] = true
	}
	type row struct {
		Name   string
		Paused bool
		// Mode, Health, Since, LastError: from the store's source health
		// (an inline source has no Pause button: pause applies to queued
		// delivery).
		Mode, Health, Since, LastError string
	}
	health := map[string]ledgerapi.SourceHealthJSON{}
	// Without the health endpoint (an API that lacks it) the page still
	// pauses and resumes; health shows as unknown.
	if hs, err := c.api.SourcesHealth(r.Context()); err == nil {
		for _, h := range hs {
			health[h.Source] = h
		}
	} else {
		c.log.Warn("console: reading source health failed", zap.Error(err))
	}
	mk := func(n string, p bool) row {
		h := health[n]
		return row{Name: n, Paused: p, Mode: h.Mode, Health: h.Health, Since: h.Since, LastError: h.LastError}
	}
	var rows []row
	seen := map[string]bool{}
	for _, n := range c.sources {
		rows, seen[n] = append(rows, mk(n, set[n])), true
	}
	for _, p := range paused {
		if !seen[p] {
			rows = append(rows, mk(p, true))
		}
	}
	c.render(w, r, s, http.StatusOK, "sources", "Sources", map[string]any{"Rows": rows})
	return nil
}

func (c *Console) pause(w http.ResponseWriter, r *http.Request, paused bool) error {
	name := r.PostFormValue("source")
	if name == "" {
		return &httpError{status: http.StatusBadRequest, msg: "source is required"}
	}
	if _, err := c.api.PauseSource(r.Context(), name, paused); err != nil {
		return err
	}
	redirect(w, r, "/sources")
	return nil
}
