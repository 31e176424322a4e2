package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Content claims: refusing a signed request replayed under a new event id.
//
// Some providers put the event id in a header their signature does not
// cover (GitHub's X-GitHub-Delivery, Shopify's, Twilio's), and most of
// those sign no timestamp either: a request copied from a proxy log, resent
// with a fresh id, verifies and reads as a new event, forever. For their
// sources the gateway also deduplicates the signed content: a digest of
// what the signature covers, recorded with the event id that first carried
// it, within the ledger's retention. Another id with the same content is a
// replay; the same id is the provider's own redelivery, which the event's
// own claim answers as it always does.
//
// The digest's record and the event's claim live in different scopes (the
// event's scope comes from its own rules), and no store writes two scopes
// in one step. So the record is taken in two phases around the event's own
// recording, like a lease:
//
//  1. ClaimContent holds the content for this event id: the record says
//     "held by X until T" (T = now + the lease). Another id that finds it
//     held and unexpired is answered ContentInFlight (503: the provider
//     retries; a replayer is refused either way); one that finds it
//     recorded is ContentReplay. X itself (its redelivery, or its retry
//     after a crash) renews the hold.
//  2. The gateway records X (claim or enqueue) only before
//     ContentHold.RecordBy, halfway through the lease: it checks its clock
//     first and bounds the store call by that deadline.
//  3. ConfirmContent marks the record "recorded by X", kept for the
//     retention.
//
// A crash can stop this after any step:
//
//   - after 1: X was never recorded. X's retry renews the hold and goes on.
//     Another id finds the hold expired at T, reads X's scope (named in the
//     record), finds no run of X, and takes the content over: the content
//     is delivered once, under the new id. Nothing is lost.
//   - after 2: X is recorded but the record still says "held". Another id
//     finds the hold expired, reads X's scope, finds X's run, marks the
//     record recorded by X and is answered ContentReplay. No replay passes.
//
// X's recording and a takeover cannot interleave: X decides its write
// before RecordBy, and nobody reads X's scope to take over before T, half
// a lease later (a minute with the gateway's lease, far past any store
// timeout and any clock difference between instances). Each step is one
// atomic Transact, so several gateway processes on one store follow the
// same record. The records live in reserved scopes ("replyonce:content:"),
// which no webhook or agent can name.

// ContentClaim asks to hold a source's signed content for one event.
type ContentClaim struct {
	Source string
	// Digest identifies the signed content (the gateway's SHA-256, hex).
	Digest string
	// EventID, RunID and Scope name the event: where a later claimant
	// looks for its run when the hold has expired.
	EventID, RunID, Scope string
	// Lease is how long a hold keeps other event ids off; the event must
	// be recorded within its first half.
	Lease time.Duration
}

// ContentStatus is what ClaimContent found.
type ContentStatus string

// Content statuses.
const (
	ContentHeld     ContentStatus = "held"      // this event holds the content: record it before RecordBy
	ContentReplay   ContentStatus = "replay"    // another event id was recorded with this content
	ContentInFlight ContentStatus = "in_flight" // another event id holds it and may still be recorded
)

// ContentHold is ClaimContent's answer.
type ContentHold struct {
	Status ContentStatus
	// By is the event id that holds or recorded the content, for a replay
	// or one in flight.
	By string
	// RecordBy, for ContentHeld, is when the event must have been
	// recorded; zero when it already was (its redelivery). Until, for
	// ContentInFlight, is when the other event's hold runs out.
	RecordBy, Until time.Time
}

// contentRecord is a content claim's document.
type contentRecord struct {
	Event    string    `json:"event"`
	Run      string    `json:"run"`
	Scope    string    `json:"scope"`
	Recorded bool      `json:"recorded,omitempty"`
	At       time.Time `json:"at"`
	Until    time.Time `json:"until,omitzero"`   // the hold's end, while not recorded
	Expires  time.Time `json:"expires,omitzero"` // the record's end
}

// contentScope is the reserved scope of a source's content digest.
func contentScope(source, digest string) string {
	return ReservedPrefix + "content:" + source + ":" + digest
}

// maxContentRounds bounds ClaimContent's look-ups of an expired holder.
const maxContentRounds = 4

func parseContent(raw []byte, now time.Time) *contentRecord {
	if raw == nil {
		return nil
	}
	var r contentRecord
	if err := json.Unmarshal(raw, &r); err != nil || r.Event == "" || !r.Expires.IsZero() && !now.Before(r.Expires) {
		// Only the ledger writes these scopes; an unreadable or expired
		// record holds nothing.
		return nil
	}
	return &r
}

func (l *Ledger) writeContent(r contentRecord, now time.Time) (*Write, error) {
	r.Expires = now.Add(l.opts.Retention)
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	return &Write{Doc: b, TTL: l.opts.Retention}, nil
}

// ClaimContent holds c's content for c.EventID, or says which other event
// has it (see "Content claims" above).
func (l *Ledger) ClaimContent(ctx context.Context, c ContentClaim) (ContentHold, error) {
	if c.Source == "" || c.Digest == "" || c.EventID == "" || c.RunID == "" || c.Scope == "" || c.Lease <= 0 {
		return ContentHold{}, fmt.Errorf("%w: a content claim needs a source, digest, event, run, scope and lease", ErrInvalid)
	}
	scope := contentScope(c.Source, c.Digest)
	for range maxContentRounds {
		var out ContentHold
		var expired *contentRecord // another event's hold ran out: look for its run
		err := l.store.Transact(ctx, scope, func(cur []byte) (*Write, error) {
			now := l.now()
			out, expired = ContentHold{}, nil
			hold := contentRecord{Event: c.EventID, Run: c.RunID, Scope: c.Scope, At: now, Until: now.Add(c.Lease)}
			r := parseContent(cur, now)
			switch {
			case r == nil:
			case r.Event == c.EventID && r.Recorded:
				out = ContentHold{Status: ContentHeld}
				return nil, nil
			case r.Event == c.EventID:
				// Its own redelivery or retry: a fresh hold.
			case r.Recorded:
				out = ContentHold{Status: ContentReplay, By: r.Event}
				return nil, nil
			case now.Before(r.Until):
				out = ContentHold{Status: ContentInFlight, By: r.Event, Until: r.Until}
				return nil, nil
			default:
				expired = r
				return nil, nil
			}
			out = ContentHold{Status: ContentHeld, RecordBy: now.Add(c.Lease / 2)}
			return l.writeContent(hold, now)
		})
		if err != nil || expired == nil {
			return out, err
		}
		recorded, err := l.hasRun(ctx, expired.Scope, expired.Run)
		if err != nil {
			return ContentHold{}, err
		}
		var changed bool
		err = l.store.Transact(ctx, scope, func(cur []byte) (*Write, error) {
			now := l.now()
			out, changed = ContentHold{}, false
			r := parseContent(cur, now)
			if r == nil || r.Event != expired.Event || r.Recorded || !r.At.Equal(expired.At) {
				changed = true // someone moved first: look again
				return nil, nil
			}
			if recorded {
				r.Recorded, r.Until = true, time.Time{}
				out = ContentHold{Status: ContentReplay, By: r.Event}
				return l.writeContent(*r, now)
			}
			out = ContentHold{Status: ContentHeld, RecordBy: now.Add(c.Lease / 2)}
			return l.writeContent(contentRecord{Event: c.EventID, Run: c.RunID, Scope: c.Scope, At: now, Until: now.Add(c.Lease)}, now)
		})
		if err != nil || !changed {
			return out, err
		}
	}
	return ContentHold{}, fmt.Errorf("%w: content record of source %q", ErrContention, c.Source)
}

// hasRun reports whether scope holds run (begun, or an entry of it).
func (l *Ledger) hasRun(ctx context.Context, scope, run string) (bool, error) {
	raw, err := l.store.Read(ctx, scope)
	if err != nil {
		return false, err
	}
	d, err := decodeDocument(scope, raw, l.now())
	if err != nil {
		return false, err
	}
	if d.Runs[run] != nil {
		return true, nil
	}
	for _, e := range d.Entries {
		if e.RunID == run {
			return true, nil
		}
	}
	return l.hasSpilledRun(ctx, d, run)
}

// ConfirmContent marks source's content as recorded by eventID, once the
// event is: from then on the record answers every other id ContentReplay,
// for the retention. It changes nothing when another event holds it.
func (l *Ledger) ConfirmContent(ctx context.Context, source, digest, eventID string) error {
	return l.store.Transact(ctx, contentScope(source, digest), func(cur []byte) (*Write, error) {
		now := l.now()
		r := parseContent(cur, now)
		if r == nil || r.Event != eventID || r.Recorded {
			return nil, nil
		}
		r.Recorded, r.Until = true, time.Time{}
		return l.writeContent(*r, now)
	})
}
