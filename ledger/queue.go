package ledger

import (
	"bytes"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"
	"unicode/utf8"
)

// This file is the ledger's side of queued delivery: the outbox lives in
// the scope document (one small QueueItem per event, next to the event's
// run and deliver entry, until it is finished and moves out with its
// entry: spill.go) and the event's bytes in a blob written in the
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

// QueueItem is one queued delivery as its scope document keeps it (a
// finished one may move out with its deliver entry: spill.go). Items are
// keyed by their deliver entry's id, so an event is queued at most once.
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
	// a third larger and opaque to the store's compression) or when its
	// escapes would make the string longer than base64 (see embed).
	// Records are attempt records that ride with it. See embedsEvent.
	EventText string          `json:"eventText,omitempty"`
	Event     []byte          `json:"event,omitempty"`
	Records   []AttemptRecord `json:"records,omitempty"`
}

// embed keeps the event record rec in the item, as a JSON string when
// that is no longer than base64. A JSON, form or XML body is text with few
// escapes; a body of control bytes would be six times its size as a string
// (each "\u0000"), and a form or XML body can be HTML-escaped ("&" is
// "\u0026") past a third larger, so those ride as base64.
func (q *QueueItem) embed(rec []byte) {
	if utf8.Valid(rec) && jsonStringLen(rec) <= base64.StdEncoding.EncodedLen(len(rec)) {
		q.EventText = string(rec)
		return
	}
	q.Event = rec
}

// jsonStringLen is how many bytes encoding/json writes between the quotes
// of the valid UTF-8 text b: two for the escapes it has a letter for, six
// for the other control bytes, for the HTML-sensitive "<", ">" and "&",
// and for U+2028 and U+2029 (three bytes raw). Every queued event's record
// passes through it, so it reads a table rather than branching per byte.
func jsonStringLen(b []byte) int {
	n := len(b)
	for i, c := range b {
		n += int(jsonEscapeExtra[c])
		if c == 0xE2 && i+2 < len(b) && b[i+1] == 0x80 && b[i+2]&^1 == 0xA8 {
			n += 3 // U+2028 or U+2029
		}
	}
	return n
}

// jsonEscapeExtra is, for each byte, how many bytes encoding/json adds to
// it in a string: one row of 32 per line from 0x00, 5 for the control
// bytes without a letter escape and for "&", "<" and ">", 1 for \b, \t,
// \n, \f, \r, '"' and '\\'. TestJSONStringLenIsEncodingJSONs holds it to
// encoding/json.
const jsonEscapeExtra = "\x05\x05\x05\x05\x05\x05\x05\x05\x01\x01\x01\x05\x01\x01\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05\x05" +
	"\x00\x00\x01\x00\x00\x00\x05\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x05\x00\x05\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x01\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00" +
	"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"

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
	for _, c := range d.Waits {
		n += c.Embedded // parked items count as they did in the document
	}
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

func newNonce() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return hex.EncodeToString(b[:])
}
