package ledger

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"
)

// This file is the ledger's side of queued delivery: the outbox lives in
// the scope document (one small QueueItem per event, next to the event's
// run and deliver entry) and the event's bytes in a blob written in the
// same store step. See the package documentation, "Queued delivery".

// DeliveryStatus is where a queued delivery stands.
type DeliveryStatus string

// Delivery statuses.
const (
	DeliveryQueued     DeliveryStatus = "queued"     // waiting for its time (NextAt)
	DeliveryDelivering DeliveryStatus = "delivering" // claimed by a dispatcher until LeaseUntil
	DeliveryDelivered  DeliveryStatus = "delivered"  // the agent took it (2xx)
	DeliveryRejected   DeliveryStatus = "rejected"   // the agent said the event itself is bad
	DeliveryDead       DeliveryStatus = "dead"       // its retry schedule ran out; kept, never retried by itself
)

// QueueItem is one queued delivery as its scope document keeps it. Items
// are keyed by their deliver entry's id, so an event is queued at most once.
type QueueItem struct {
	EntryID    string          `json:"entryId"`
	Scope      string          `json:"scope"`
	Source     string          `json:"source"`
	EventID    string          `json:"eventId"`
	RunID      string          `json:"runId"`
	Intent     string          `json:"intent"`
	Payload    json.RawMessage `json:"payload"`
	Blob       string          `json:"blob"` // names this item's blobs; fresh per item
	Status     DeliveryStatus  `json:"status"`
	ReceivedAt time.Time       `json:"receivedAt"`
	ContextAt  time.Time       `json:"contextAt"`
	NextAt     time.Time       `json:"nextAt,omitzero"`     // queued: due from then on
	LeaseUntil time.Time       `json:"leaseUntil,omitzero"` // delivering: the claim's deadline
	Attempts   int             `json:"attempts"`            // deliveries started, replays included
	Failures   int             `json:"failures,omitempty"`  // failed attempts since the last replay: the place in the schedule
	Replays    int             `json:"replays,omitempty"`
	MaxAge     time.Duration   `json:"maxAge,omitempty"`
	LastStatus int             `json:"lastStatus,omitempty"`
	LastError  string          `json:"lastError,omitempty"`
	FinishedAt time.Time       `json:"finishedAt,omitzero"`
	BodySize   int             `json:"bodySize"`
	// Conversation-aware delivery (conversation.go).
	Order        string        `json:"order,omitempty"`        // "scope": one in flight per scope, in order
	Quiet        time.Duration `json:"quiet,omitempty"`        // debounce: the scope's quiet time
	HeldSince    time.Time     `json:"heldSince,omitzero"`     // debounce: when the first event it covers was held
	Covers       []string      `json:"covers,omitempty"`       // debounce: event ids it stands for, oldest first, itself last (newest MaxCovers)
	CoverCount   int           `json:"coverCount,omitempty"`   // debounce: how many events it stands for, itself included
	CoveredBy    string        `json:"coveredBy,omitempty"`    // coalesced: the event delivered in its place
	SupersededBy string        `json:"supersededBy,omitempty"` // superseded: the newer run
	// Parked: a queued item of a paused source, set aside in the due
	// index at its source's parking time (see park.go) so that it holds
	// back no other source's work; unparked when the source resumes.
	Parked bool `json:"parked,omitempty"`
	// Inline: the event was forwarded inline and is kept for the
	// operator's lists only (inline.go); its attempts are in the item.
	Inline         bool            `json:"inline,omitempty"`
	InlineAttempts []AttemptRecord `json:"inlineAttempts,omitempty"`
	// Trials counts the sends of the event to another URL
	// (RecordTrial); their records are blobs of their own, so that they
	// never disturb the numbering of the item's deliveries.
	Trials int `json:"trials,omitempty"`
	// EventText is the event's record (encodeEvent) when it rides in the
	// item instead of a blob of its own, and Event the same when it is not
	// UTF-8 (a JSON string would not keep it byte for byte; base64 does,
	// a third larger and opaque to the store's compression). Records are
	// attempt records that ride with it. See embedsEvent.
	EventText string          `json:"eventText,omitempty"`
	Event     []byte          `json:"event,omitempty"`
	Records   []AttemptRecord `json:"records,omitempty"`
}

// embed keeps the event record rec in the item.
func (q *QueueItem) embed(rec []byte) {
	if utf8.Valid(rec) {
		q.EventText = string(rec)
		return
	}
	q.Event = rec
}

// carriesEvent reports whether the item holds its event record.
func (q *QueueItem) carriesEvent() bool { return q.EventText != "" || q.Event != nil }

// embedded is the event record the item holds (nil when none).
func (q *QueueItem) embedded() []byte {
	if q.EventText != "" {
		return []byte(q.EventText)
	}
	return q.Event
}

// A queued event's record and its attempt records ride in its item when
// they are small and the scope holds few items that carry theirs (issue
// #29): the accept and the settle then write the document alone, as
// inline delivery does, instead of the document and a side record each.
// The bounds keep a busy conversation's document, which every write of the
// scope re-encodes, small: past them the records are blobs, as they were
// before, and lookups read each from wherever its item says it is.
const (
	maxEmbeddedEvent   = 4 << 10 // bytes of one event record
	maxEmbeddingItems  = 4       // items of one scope that carry their event
	maxEmbeddedRecords = 3       // attempt records one item carries
	maxEmbeddedAnswer  = 512     // bytes of an embedded record's answer
)

// embedsEvent reports whether an event record of size bytes may ride in a
// new item of d.
func (d *document) embedsEvent(size int) bool {
	if size > maxEmbeddedEvent {
		return false
	}
	n := 0
	for _, q := range d.Queue {
		if q.carriesEvent() {
			n++
		}
	}
	return n < maxEmbeddingItems
}

// keepRecord stores r with q: in the item when q carries its event and r
// fits, in a blob otherwise. A record written again (a settle retried
// after its answer was lost) replaces the one of the same number.
func (q *QueueItem) keepRecord(r AttemptRecord, blobs *blobSet) error {
	if q.carriesEvent() && len(r.Answer) <= maxEmbeddedAnswer {
		for i := range q.Records {
			if q.Records[i].N == r.N {
				q.Records[i] = r
				return nil
			}
		}
		if len(q.Records) < maxEmbeddedRecords {
			q.Records = append(q.Records, r)
			return nil
		}
	}
	b, err := marshalRecord(r)
	if err != nil {
		return fmt.Errorf("%w: attempt record: %v", ErrInvalid, err)
	}
	blobs.set(attemptBlob(q.Blob, r.N), b)
	return nil
}

// heldRecord reports whether attempt n's record rides in the item.
func (q *QueueItem) heldRecord(n int) bool {
	for _, r := range q.Records {
		if r.N == n {
			return true
		}
	}
	return false
}

// Due reports whether a dispatcher may take the item at now: a queued item
// whose time has come, or a delivering one whose claim ran out (its holder
// crashed or hung).
func (q *QueueItem) Due(now time.Time) bool {
	switch q.Status {
	case DeliveryQueued:
		return !q.Parked && !now.Before(q.NextAt)
	case DeliveryDelivering:
		return !now.Before(q.LeaseUntil)
	}
	return false
}

// dueAt is when the item becomes due; zero when it never will by itself.
func (q *QueueItem) dueAt() time.Time {
	switch q.Status {
	case DeliveryQueued:
		if q.Parked {
			return ParkedAt(q.Source)
		}
		return q.NextAt
	case DeliveryDelivering:
		return q.LeaseUntil
	}
	return time.Time{}
}

// dropAt is when retention lets the item and its blobs go: a finished
// delivery one retention after it finished, anything else once it is older
// than its maximum age plus one retention.
func (q *QueueItem) dropAt(retention time.Duration) time.Time {
	if q.finished() {
		return q.FinishedAt.Add(retention)
	}
	return q.ReceivedAt.Add(q.MaxAge + retention)
}

func eventBlob(nonce string) string { return "e:" + nonce }

func attemptBlob(nonce string, n int) string { return "a:" + nonce + ":" + strconv.Itoa(n) }

// pruneQueue drops items retention no longer requires, and their blobs.
func (d *document) pruneQueue(now time.Time, retention time.Duration, blobs *blobSet) {
	for id, q := range d.Queue {
		if !q.dropAt(retention).Before(now) {
			continue
		}
		delete(d.Queue, id)
		blobs.drop(q)
	}
}

// queueTimes extends the document's life to cover its items and returns
// the earliest time one of them is due. An item its scope's order holds
// back is left out: it can only move once another item is settled (a
// write, which recomputes this) or an item in flight loses its claim
// (whose own due time is in the index).
func (d *document) queueTimes(now time.Time, retention time.Duration, later func(time.Time)) time.Time {
	var due time.Time
	blocked := d.blockedAll(now)
	for _, q := range d.Queue {
		later(q.dropAt(retention))
		if blocked(q) {
			continue
		}
		if t := q.dueAt(); !t.IsZero() && (due.IsZero() || t.Before(due)) {
			due = t
		}
	}
	return due
}

// QueuedEvent is the record of an accepted event: everything needed to
// forward it later exactly as it would have been forwarded inline.
type QueuedEvent struct {
	Source      string              `json:"source"`
	EventID     string              `json:"eventId"`
	Scope       string              `json:"scope"`
	ContentType string              `json:"contentType,omitempty"`
	Header      map[string][]string `json:"header,omitempty"`
	ReceivedAt  time.Time           `json:"receivedAt"`
	ContextAt   time.Time           `json:"contextAt"`
	Body        []byte              `json:"-"`
}

// encodeEvent lays the record out as its JSON, a newline (which JSON never
// holds unescaped) and the raw body, so the body is stored as is.
func encodeEvent(ev QueuedEvent) ([]byte, error) {
	meta, err := marshalRecord(ev)
	if err != nil {
		return nil, fmt.Errorf("%w: event record: %v", ErrInvalid, err)
	}
	// One allocation of the exact size: appending to meta would grow it
	// twice for a large body.
	out := make([]byte, 0, len(meta)+1+len(ev.Body))
	out = append(out, meta...)
	out = append(out, '\n')
	out = append(out, ev.Body...)
	return out, nil
}

func decodeEvent(b []byte) (QueuedEvent, error) {
	meta, body, ok := bytes.Cut(b, []byte{'\n'})
	var ev QueuedEvent
	if !ok {
		return ev, errors.New("ledger: stored event record has no body separator")
	}
	if err := unmarshalRecord(meta, &ev); err != nil {
		return ev, fmt.Errorf("ledger: stored event record: %w", err)
	}
	ev.Body = body
	return ev, nil
}

// EnqueueRequest is an accepted event to record with its run and claim.
type EnqueueRequest struct {
	Event QueuedEvent
	Run   RunOptions
	// Claim is the deliver claim: its Key names the event; PendingTTL is
	// the lease a dispatcher holds it for. It is always redeliverable and
	// never fenced by a run (the run comes from Run).
	Claim ClaimRequest
	// Hold says the caller forwards the event at once, under the claim
	// granted here, for the claim's TTL. Without it the claim is recorded
	// already run out, so any dispatcher may take the event right away.
	Hold bool
	// MaxAge is how long the event may wait undelivered; retention starts
	// after it.
	MaxAge time.Duration
	// Order and Debounce are the source's conversation rules
	// (conversation.go). With Debounce the event is never held: it waits
	// for its scope to be quiet.
	Order    Order
	Debounce Debounce
}

// EnqueueStatus is what Enqueue did.
type EnqueueStatus string

// Enqueue statuses.
const (
	EnqueueQueued    EnqueueStatus = "queued"    // recorded now
	EnqueueDuplicate EnqueueStatus = "duplicate" // recorded (or delivered inline) before
	EnqueueInFlight  EnqueueStatus = "in_flight" // an inline delivery of it is in progress
)

// Enqueued is Enqueue's answer.
type Enqueued struct {
	Status EnqueueStatus
	// Item is the queued delivery (the earlier one for a duplicate; empty
	// when the event was handled inline before).
	Item QueueItem
	// Run and Claim are set when Hold was asked, the event is new, and
	// the scope's rules let it go out now (no order or debounce holds it
	// back): only then may the caller forward it.
	Run   *Run
	Claim Claim
	// Superseded and Coalesced are the waiting events of the scope that
	// this step settled without forwarding (the new one may be among
	// them); Depth is the scope's deliveries waiting or in flight after it.
	Superseded []QueueItem
	Coalesced  []QueueItem
	Depth      int
	// Interrupted lists the deliveries in flight on the scope whose run
	// this step's new run superseded: they are not stopped (their next
	// claim is refused), but the gateway may tell their agent.
	Interrupted []Interrupted
}

// Interrupted is a delivery in flight whose run a newer one superseded.
type Interrupted struct {
	Item     QueueItem
	Token    uint64 // the fencing token of the delivery in flight
	Delivery int
	By       string // the superseding run
}

// Enqueue records an accepted event, begins its run and claims its
// delivery, all in one store step: once it returns without error the event
// is durable, and it is never stored without its claim.
func (l *Ledger) Enqueue(ctx context.Context, req EnqueueRequest) (Enqueued, error) {
	req.Claim.Redeliverable = true
	in, err := l.claimInput(req.Claim)
	if err != nil {
		return Enqueued{}, err
	}
	if in.runID != "" {
		return Enqueued{}, fmt.Errorf("%w: Enqueue takes the run from Run, not the claim", ErrInvalid)
	}
	bin, err := l.beginInput(req.Run)
	if err != nil {
		return Enqueued{}, err
	}
	if req.MaxAge < 0 {
		return Enqueued{}, fmt.Errorf("%w: max age must not be negative", ErrInvalid)
	}
	if err := req.Order.valid(); err != nil {
		return Enqueued{}, err
	}
	if err := req.Debounce.valid(); err != nil {
		return Enqueued{}, err
	}
	rec, err := encodeEvent(req.Event)
	if err != nil {
		return Enqueued{}, err
	}
	nonce := newNonce()
	var out Enqueued
	err = l.transactEntry(ctx, in.key.scope, lookupFor(in.key), func(d *document, now time.Time, blobs *blobSet) (bool, error) {
		out = Enqueued{}
		if q := d.Queue[in.key.id]; q != nil {
			out.Status, out.Item = EnqueueDuplicate, *q
			return false, nil
		}
		if e := d.Entries[in.key.id]; e != nil {
			switch {
			case e.State == StateCommitted:
				out.Status = EnqueueDuplicate
				return false, nil
			case e.State == StatePending && now.Before(e.Deadline()), e.State == StateAmbiguous:
				out.Status = EnqueueInFlight
				return false, nil
			}
		}
		before := d.supersededInFlight(now)
		r, _ := decideBegin(d, bin, now, l.opts)
		e := claimEntry(d, in, nil, now, l.opts)
		e.RunID, e.Token, e.Delivery = r.ID, r.Token, r.Delivery
		for id, n := range d.supersededInFlight(now) {
			if _, was := before[id]; !was {
				p, pr := d.Queue[id], d.Runs[d.Queue[id].RunID]
				out.Interrupted = append(out.Interrupted, Interrupted{Item: *p, Token: pr.Token, Delivery: pr.Delivery, By: n})
			}
		}
		q := &QueueItem{
			EntryID: e.ID, Scope: d.Scope, Source: req.Event.Source, EventID: req.Event.EventID, RunID: r.ID,
			Intent: in.key.intent, Payload: in.key.payload, Blob: nonce, Status: DeliveryQueued,
			ReceivedAt: req.Event.ReceivedAt, ContextAt: r.ContextAt, NextAt: now, MaxAge: req.MaxAge,
			BodySize: len(req.Event.Body),
		}
		if q.ReceivedAt.IsZero() {
			q.ReceivedAt = now
		}
		q.Order, q.Quiet = string(req.Order), req.Debounce.Quiet
		d.Queue[e.ID] = q
		if q.Quiet > 0 {
			out.Coalesced = copyItems(d.coalesce(q, req.Debounce, now))
		}
		out.Superseded = copyItems(d.supersedeWaiting(now))
		if req.Hold && q.Status == DeliveryQueued && q.Quiet == 0 && !d.blocked(q, now) {
			q.Status, q.Attempts, q.LeaseUntil, q.NextAt = DeliveryDelivering, 1, e.Deadline(), time.Time{}
			out.Run = l.runFrom(d.Scope, r, "")
			out.Claim = claimFrom(d.Scope, decision{result: Result{Status: StatusClaimed, Entry: e}})
		} else {
			// Recorded as a claim that has already run out: redeliverable,
			// so the first dispatcher to come takes it over.
			e.PendingTTL = 0
		}
		if d.embedsEvent(len(rec)) {
			q.embed(rec)
		} else {
			blobs.set(eventBlob(nonce), rec)
		}
		out.Status, out.Item, out.Depth = EnqueueQueued, *q, d.depth()
		return true, nil
	})
	if err != nil {
		return Enqueued{}, err
	}
	l.observe(Event{Type: "enqueue_" + string(out.Status), Scope: in.key.scope, EntryID: in.key.id, Intent: in.key.intent, RunID: bin.runID})
	return out, nil
}

// Taken is a queued delivery a dispatcher now holds.
type Taken struct {
	OK bool // false: not due (taken elsewhere, finished, not yet time, or held back by its scope's order)
	// Superseded: the item was due but a newer run superseded its run;
	// it was settled superseded instead of taken (Item says so).
	Superseded bool
	Item       QueueItem
	Run        *Run
	Claim      Claim
}

// TakeDelivery claims a due queued delivery for lease: a new delivery of
// the event's run (a newer fencing token) and a new attempt of its deliver
// entry, both in one store step, so that two dispatchers anywhere never
// hold the same delivery at once. The first take of an event accepted
// without Hold uses the delivery Enqueue began.
func (l *Ledger) TakeDelivery(ctx context.Context, scope, entryID string, lease time.Duration) (Taken, error) {
	if scope == "" || entryID == "" {
		return Taken{}, fmt.Errorf("%w: scope and entry id are required", ErrInvalid)
	}
	if lease <= 0 {
		return Taken{}, fmt.Errorf("%w: a delivery lease must be positive", ErrInvalid)
	}
	var out Taken
	err := l.transact(ctx, scope, func(d *document, now time.Time) (bool, error) {
		out = Taken{}
		q := d.Queue[entryID]
		if q == nil || !q.Due(now) {
			return false, nil
		}
		if q.waiting(now) && len(d.supersedeWaiting(now)) > 0 {
			if q.Status == DeliverySuperseded {
				out = Taken{Superseded: true, Item: *q}
			}
			if !d.takeable(q, now) {
				return true, nil
			}
		}
		if d.blocked(q, now) {
			return false, nil
		}
		r := d.Runs[q.RunID]
		if q.Attempts > 0 || r == nil {
			mode := ModeIndependent
			if r != nil {
				mode = r.Mode
			}
			var reason Reason
			r, reason = decideBegin(d, beginInput{runID: q.RunID, mode: mode, contextAt: q.ContextAt}, now, l.opts)
			if reason == ReasonRunEnded || reason == ReasonRunCancelled {
				// Someone finished the run by hand: nothing may deliver it.
				q.Status, q.LastError, q.FinishedAt, q.LeaseUntil = DeliveryDead, "run "+string(reason), now, time.Time{}
				return true, nil
			}
		}
		in := claimInput{key: resolvedKey{scope: scope, intent: q.Intent, payload: q.Payload, id: entryID},
			conflict: ConflictNone, pendingTTL: lease, redeliverable: true}
		if e := d.Entries[entryID]; e != nil {
			in.maxAttempts = e.MaxAttempts
		}
		e := claimEntry(d, in, nil, now, l.opts)
		e.RunID, e.Token, e.Delivery = r.ID, r.Token, r.Delivery
		q.Attempts++
		q.Status, q.LeaseUntil, q.NextAt = DeliveryDelivering, e.Deadline(), time.Time{}
		out = Taken{OK: true, Item: *q, Run: l.runFrom(scope, r, ""),
			Claim: claimFrom(scope, decision{result: Result{Status: StatusClaimed, Entry: e}})}
		return true, nil
	})
	if err != nil {
		return Taken{}, err
	}
	if out.OK {
		l.observe(Event{Type: "take", Scope: scope, EntryID: entryID, Intent: out.Item.Intent, RunID: out.Item.RunID})
	}
	if out.Superseded {
		l.observe(Event{Type: "superseded", Scope: scope, EntryID: entryID, Intent: out.Item.Intent, RunID: out.Item.RunID})
	}
	return out, nil
}

// AttemptRecord is what one delivery attempt came to, kept for operators.
type AttemptRecord struct {
	N           int           `json:"n"` // which attempt of the item (QueueItem.Attempts when taken)
	At          time.Time     `json:"at"`
	Delivery    int           `json:"delivery"`
	Token       uint64        `json:"token"`
	Outcome     string        `json:"outcome"` // delivered, rejected, retry, dead, ...
	AgentStatus int           `json:"agentStatus,omitempty"`
	Latency     time.Duration `json:"latency"`
	Error       string        `json:"error,omitempty"`
	Answer      []byte        `json:"answer,omitempty"` // the first bytes of the agent's answer
	Late        bool          `json:"late,omitempty"`   // another delivery had taken over meanwhile
	// To is set on a trial (RecordTrial): the URL the event was sent to
	// instead of its source's agent. N then counts the item's trials.
	To string `json:"to,omitempty"`
}

// Finish settles a taken delivery.
type Finish struct {
	Taken Taken
	// Status is delivered or rejected (the deliver entry commits with
	// Value), queued (failed; due again at NextAt) or dead.
	Status DeliveryStatus
	NextAt time.Time
	Value  any
	Record AttemptRecord
	// Interrupted says the attempt was cut short by a shutdown, not
	// failed by the agent: it does not move the item along its schedule.
	Interrupted bool
}

// FinishDelivery records how a taken delivery ended, with its attempt
// record, in one store step. When another delivery took the item over
// meanwhile (this one's lease ran out), only the record is kept: the item
// belongs to the newer delivery. The result says LateSettle then.
func (l *Ledger) FinishDelivery(ctx context.Context, f Finish) (Result, error) {
	t := f.Taken
	if !t.OK {
		return Result{}, fmt.Errorf("%w: finishing a delivery that was not taken", ErrInvalid)
	}
	outcome := OutcomeNotApplied
	var raw []byte
	switch f.Status {
	case DeliveryDelivered, DeliveryRejected:
		outcome = OutcomeCommitted
		var err error
		if raw, err = encodeValue(f.Value); err != nil {
			return Result{}, err
		}
	case DeliveryQueued:
		if f.NextAt.IsZero() {
			return Result{}, fmt.Errorf("%w: a delivery queued again needs its next time", ErrInvalid)
		}
	case DeliveryDead:
	default:
		return Result{}, fmt.Errorf("%w: delivery status %q cannot finish an attempt", ErrInvalid, f.Status)
	}
	rec := f.Record
	rec.N, rec.Delivery, rec.Token = t.Item.Attempts, t.Run.Delivery, t.Run.Token
	ref := t.Claim.Ref()
	var res Result
	err := l.transactBlobs(ctx, ref.Scope, func(d *document, now time.Time, blobs *blobSet) (bool, error) {
		q := d.Queue[ref.EntryID]
		if q == nil {
			return false, fmt.Errorf("%w: no queued delivery %q on scope %q", ErrUnknownEntry, ref.EntryID, ref.Scope)
		}
		e := d.Entries[ref.EntryID]
		current := e != nil && e.Attempt == ref.Attempt && q.Attempts == t.Item.Attempts
		var derr error
		res, _, derr = decideSettle(d, ref.EntryID, ref.Attempt, outcome, raw, rec.Error, now)
		if derr != nil {
			return false, derr
		}
		if !current {
			res.LateSettle = true
		}
		rec.Late = res.LateSettle
		if rec.At.IsZero() {
			rec.At = now
		}
		if err := q.keepRecord(rec, blobs); err != nil {
			return false, err
		}
		if !current {
			return true, nil
		}
		q.LastStatus, q.LastError, q.LeaseUntil = rec.AgentStatus, rec.Error, time.Time{}
		q.Status = f.Status
		switch f.Status {
		case DeliveryQueued:
			if !f.Interrupted {
				q.Failures++
			}
			q.NextAt = f.NextAt
		case DeliveryDead:
			q.Failures++
			q.FinishedAt = now
		default:
			q.FinishedAt = now
		}
		return true, nil
	})
	if err != nil {
		return Result{}, err
	}
	l.observe(Event{Type: "finish_" + string(f.Status), Scope: ref.Scope, EntryID: ref.EntryID, Intent: t.Item.Intent, RunID: t.Item.RunID, LateSettle: res.LateSettle})
	return res, nil
}

// ErrDeliveryInFlight is returned by ReplayDelivery for a delivery that a
// dispatcher holds right now.
var ErrDeliveryInFlight = errors.New("ledger: the delivery is in flight")

// ReplayDelivery makes a queued delivery due now, whatever it came to
// (delivered, rejected, dead, or waiting for a retry), with its place in
// the retry schedule reset. The next take is a new delivery of the same
// run, with a newer fencing token, so a fenced agent still writes once.
func (l *Ledger) ReplayDelivery(ctx context.Context, scope, entryID string) (QueueItem, error) {
	if scope == "" || entryID == "" {
		return QueueItem{}, fmt.Errorf("%w: scope and entry id are required", ErrInvalid)
	}
	var out QueueItem
	err := l.transact(ctx, scope, func(d *document, now time.Time) (bool, error) {
		q := d.Queue[entryID]
		if q == nil {
			return false, fmt.Errorf("%w: no queued delivery %q on scope %q", ErrUnknownEntry, entryID, scope)
		}
		if q.Inline {
			return false, fmt.Errorf("%s %s: %w", q.Source, q.EventID, ErrInline)
		}
		if q.Status == DeliveryDelivering && now.Before(q.LeaseUntil) {
			return false, fmt.Errorf("%w: %s %s until %s", ErrDeliveryInFlight, q.Source, q.EventID, q.LeaseUntil.Format(time.RFC3339))
		}
		q.Status, q.NextAt, q.Failures, q.FinishedAt, q.LeaseUntil = DeliveryQueued, now, 0, time.Time{}, time.Time{}
		q.Parked = false // due now; a dispatcher parks it again if its source is still paused
		q.Replays++
		out = *q
		return true, nil
	})
	if err != nil {
		return QueueItem{}, err
	}
	l.observe(Event{Type: "replay", Scope: scope, EntryID: entryID, Intent: out.Intent, RunID: out.RunID})
	return out, nil
}

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
	// scopes are read from the index as Skip has, up to Limit more (an
	// index read costs more the more it lists).
	Skip map[string]bool
}

// Due lists up to q.Limit queued deliveries that are due now, earliest
// first, from up to q.Limit scopes found through the store's index.
func (l *Ledger) Due(ctx context.Context, q DueQuery) ([]QueueItem, error) {
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
		listed, err = l.store.ScopesDue(ctx, now, limit+min(len(skip), limit))
	} else {
		listed, err = l.store.ScopesDueBetween(ctx, from, now, limit+min(len(skip), limit))
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
func (l *Ledger) CountDue(ctx context.Context) (int, error) {
	return l.store.CountDue(ctx, l.now())
}

// readAhead bounds the documents readAll reads at once.
const readAhead = 8

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

// QueueItems returns a scope's queued deliveries, oldest first.
func (l *Ledger) QueueItems(ctx context.Context, scope string) ([]QueueItem, error) {
	d, err := l.read(ctx, scope)
	if err != nil {
		return nil, err
	}
	out := make([]QueueItem, 0, len(d.Queue))
	for _, q := range d.Queue {
		out = append(out, *q)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].ReceivedAt.Equal(out[j].ReceivedAt) {
			return out[i].ReceivedAt.Before(out[j].ReceivedAt)
		}
		return out[i].EntryID < out[j].EntryID
	})
	return out, nil
}

// QueuedEventOf reads the event record of a queued delivery.
func (l *Ledger) QueuedEventOf(ctx context.Context, q QueueItem) (QueuedEvent, error) {
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
func (l *Ledger) AttemptsOf(ctx context.Context, q QueueItem) ([]AttemptRecord, error) {
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

func newNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
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
func (l *Ledger) ListDeliveries(ctx context.Context, f DeliveryFilter) ([]QueueItem, error) {
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
		items, err := l.QueueItems(ctx, s)
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

// FindDelivery returns the queued delivery of one event on scope.
func (l *Ledger) FindDelivery(ctx context.Context, scope, source, eventID string) (QueueItem, error) {
	items, err := l.QueueItems(ctx, scope)
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

// controlPaused names the control record of paused sources: a small JSON
// object (source name to true), shared by every process on the store.
const controlPaused = "paused-sources"

// legacyPausedScope is where releases before control records kept the
// paused sources: an ordinary scope, which a webhook could overwrite. It is
// read while the control record has never been written, so a gateway
// upgraded in place still knows its paused sources; the first read, pause
// or resume after the upgrade copies them into the control record (an
// empty one when the old scope is absent, as on a new store), which is the
// only one read from then on: a dispatcher's sweep then costs one read,
// not two (issue #29). The ledger never writes the old scope, and
// ReservedScope keeps everyone else out of it.
const legacyPausedScope = "replyonce:control:paused-sources"

// ErrCorruptControl marks a control record that cannot be read. It is
// never a reason to stop work: PausedSources returns it with an empty set,
// and the next pause or resume writes a fresh record over it.
var ErrCorruptControl = errors.New("ledger: control record is corrupt")

func parsePaused(raw []byte) (map[string]bool, error) {
	set := map[string]bool{}
	if err := json.Unmarshal(raw, &set); err != nil {
		return map[string]bool{}, err
	}
	for name, p := range set {
		if !p {
			delete(set, name)
		}
	}
	return set, nil
}

// pausedBefore returns the paused sources as the record read before a
// write says (the old scope when there is no record yet, see
// legacyPausedScope); recorded says whether the record was there.
func (l *Ledger) pausedBefore(ctx context.Context) (set map[string]bool, recorded bool, err error) {
	raw, err := l.store.ReadControl(ctx, controlPaused)
	if err != nil {
		return nil, false, err
	}
	if raw != nil {
		set, err := parsePaused(raw)
		if err != nil {
			return set, true, fmt.Errorf("%w: %q: %v", ErrCorruptControl, controlPaused, err)
		}
		return set, true, nil
	}
	raw, err = l.store.Read(ctx, legacyPausedScope)
	if err != nil {
		return nil, false, err
	}
	if raw == nil {
		return map[string]bool{}, false, nil
	}
	set, err = parsePaused(raw)
	if err != nil {
		return set, false, fmt.Errorf("%w: the paused sources kept by an earlier release in scope %q: %v", ErrCorruptControl, legacyPausedScope, err)
	}
	return set, false, nil
}

// SetSourcePaused pauses or resumes dispatching a source's queued events,
// for every process sharing the store. A paused source keeps accepting. A
// corrupt record is replaced by one holding this change alone.
func (l *Ledger) SetSourcePaused(ctx context.Context, source string, paused bool) error {
	if source == "" {
		return fmt.Errorf("%w: source is empty", ErrInvalid)
	}
	// The sources an earlier release paused, for a record not yet written;
	// a corrupt one counts as none.
	legacy, _, err := l.pausedBefore(ctx)
	if err != nil && !errors.Is(err, ErrCorruptControl) {
		return err
	}
	return l.store.TransactControl(ctx, controlPaused, func(cur []byte) ([]byte, error) {
		set := maps.Clone(legacy)
		if cur != nil {
			parsed, err := parsePaused(cur)
			if err == nil && parsed[source] == paused {
				return nil, nil
			}
			set = parsed // a corrupt record: a fresh set, written over it
		}
		if paused {
			set[source] = true
		} else {
			delete(set, source)
		}
		return json.Marshal(set)
	})
}

// PausedSources returns the sources whose dispatch is paused. A record
// that cannot be read gives an empty set and an error wrapping
// ErrCorruptControl: dispatchers log it and go on as if nothing were
// paused, rather than stop.
func (l *Ledger) PausedSources(ctx context.Context) (map[string]bool, error) {
	set, recorded, err := l.pausedBefore(ctx)
	if err != nil && !errors.Is(err, ErrCorruptControl) {
		return nil, err
	}
	if err == nil && !recorded {
		// Copy what the old scope says into the record, unless a pause or
		// resume wrote one meanwhile. Failing to is no reason to fail the
		// read: the set is right, and the next read tries again.
		_ = l.store.TransactControl(ctx, controlPaused, func(cur []byte) ([]byte, error) {
			if cur != nil {
				return nil, nil
			}
			return json.Marshal(set)
		})
	}
	return set, err
}
