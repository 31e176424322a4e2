package ledger

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Store keeps one JSON document per scope and makes a read-modify-write of
// that document atomic. Stores know nothing about what the document means:
// every decision is made by the ledger inside the function it passes to
// Transact, so all stores behave the same way.
//
// Implementations live in stores/ (memory, bolt, postgres, redis) and must
// pass stores/storetest unchanged.
type Store interface {
	// Transact reads the scope's current document and calls fn with it (nil
	// when the scope has no document), then saves what fn returns, all as one
	// atomic step with respect to every other Transact on the same scope,
	// in this process and in any other process sharing the store.
	//
	// If fn returns an error, nothing is written and Transact returns that
	// error unchanged (so callers can match it with errors.Is). If fn returns
	// a nil *Write, nothing is written (a read-only decision).
	//
	// fn must be a pure function of its input, must not modify current,
	// and must not call Transact itself: optimistic stores call it
	// again with a fresher document when another writer won the race, and
	// stores may call it with a cached document they then verify.
	//
	// Errors reaching the store itself are returned wrapped; they never
	// count as a decision.
	Transact(ctx context.Context, scope string, fn func(current []byte) (*Write, error)) error

	// Read returns the scope's current document, or nil when there is none.
	Read(ctx context.Context, scope string) ([]byte, error)

	// ScopesToReview returns up to limit scopes whose last Write had a
	// ReviewAt that is not zero and not after the given time, oldest first.
	// The ledger uses it to list ambiguous entries without scanning every
	// scope. A scope may be listed that no longer needs review; callers
	// re-read it.
	ScopesToReview(ctx context.Context, notAfter time.Time, limit int) ([]string, error)

	// ScopesDue returns up to limit scopes whose last Write had a DueAt
	// that is not zero and not after the given time, earliest first. The
	// queued-delivery dispatcher uses it to find work without scanning
	// every scope. Like ScopesToReview it may list a scope that has nothing
	// due any more; callers decide on the document.
	ScopesDue(ctx context.Context, notAfter time.Time, limit int) ([]string, error)

	// ScopesDueBetween is ScopesDue for DueAt in [from, notAfter] only,
	// earliest first. The ledger parks a paused source's deliveries at a
	// time of the source's own far in the future and finds them there
	// again on resume; see "Queued delivery" in the package documentation.
	ScopesDueBetween(ctx context.Context, from, notAfter time.Time, limit int) ([]string, error)
	// CountDue returns how many scopes ScopesDue would list with no limit:
	// the size of the due backlog, for the queue gauges. Like ScopesDue it
	// may count a scope that has nothing due any more.
	CountDue(ctx context.Context, notAfter time.Time) (int, error)
	// ScopesReceived returns up to limit scopes whose last Write had a
	// ReceivedAt that is not zero, each with that time, newest first (ties
	// by scope, descending), starting strictly after before in that order:
	// a ScopeAt from an earlier answer continues where it stopped, and a
	// zero before starts from the newest. Operators list every queued
	// event, delivered ones included, newest first through it. Like
	// ScopesDue it may list a scope whose document no longer holds what
	// it did; expired documents are not listed.
	ScopesReceived(ctx context.Context, before ScopeAt, limit int) ([]ScopeAt, error)

	// ReadBlob returns the side record name of scope (see Write.Blobs), or
	// nil when there is none. A blob lives and expires with its scope's
	// document: once the document reads as absent, so do its blobs.
	ReadBlob(ctx context.Context, scope, name string) ([]byte, error)

	// ReadBlobs is ReadBlob for several names of one scope at once, in
	// one round trip where the store has them: the answer holds, in the
	// order of names, each record's bytes or nil for one that is absent.
	// A keyed claim on a scope whose entries have spilled looks its entry
	// up under both id formats before it decides (spill.go); reading the
	// two one after the other was a round trip more for every such claim.
	ReadBlobs(ctx context.Context, scope string, names []string) ([][]byte, error)

	// ReadControl returns the control record name, or nil when there is
	// none. Control records are the ledger's own small settings shared by
	// every process (which sources are paused): they live outside the
	// scope key space, so no scope, whatever a webhook or an agent names,
	// reads or overwrites one, and they never expire.
	ReadControl(ctx context.Context, name string) ([]byte, error)

	// TransactControl is Transact for a control record: fn gets the
	// current record (nil when there is none) and returns the new one,
	// saved as one atomic step with respect to every other
	// TransactControl on the same name, in any process sharing the store.
	// A nil record from fn writes nothing; an error from fn writes nothing
	// and is returned unchanged. fn follows Transact's rules (pure, may
	// run more than once).
	TransactControl(ctx context.Context, name string, fn func(current []byte) ([]byte, error)) error
}

// Write is what a Transact function asks the store to save.
type Write struct {
	// Doc is the new document, a JSON object. Stores save it byte for byte.
	Doc []byte

	// TTL is how long, from the moment of the write, the store must keep
	// the document. After that it may be deleted physically; a store that
	// keeps it longer is still correct, since the document records its own
	// expiry and the ledger treats an expired document as absent. Zero means
	// keep it until a later write says otherwise.
	TTL time.Duration

	// ReviewAt is the earliest time (on the ledger's clock) at which this
	// document may hold an entry that needs an operator or a reconciler:
	// an ambiguous entry now, or a pending one that turns ambiguous when its
	// TTL runs out, or a queued delivery that is dead or rejected. Zero
	// means nothing to review. Stores index it for
	// ScopesToReview.
	ReviewAt time.Time

	// DueAt is the earliest time (on the ledger's clock) at which this
	// document holds a queued delivery that a dispatcher may take: a retry
	// whose time has come, or a delivery whose claim (its lease) runs out.
	// Zero means nothing queued. Stores index it for ScopesDue.
	DueAt time.Time

	// ReceivedAt is the newest receipt time of the document's queued
	// events still kept (zero when none). Stores index it for
	// ScopesReceived.
	ReceivedAt time.Time

	// Blobs are side records of the scope, written in the same atomic step
	// as Doc: a name mapped to its bytes, or to nil to delete it. Names not
	// mentioned are left as they are. They hold what is too large to ride
	// in every read of the document (a queued event's body), so Transact
	// never hands them to fn; ReadBlob reads one.
	Blobs map[string][]byte

	// Absent names side records of the scope that fn took as missing
	// without reading them: a step on a long scope names an entry or a run
	// that may have moved out of the document, and reading first would
	// cost a round trip the common answer (a new id) does not need. A store
	// that implements AbsenceChecker writes only if none of them exists,
	// checked in the same atomic step as the document's compare-and-set
	// and against the document fn was given; when one does, it writes
	// nothing and Transact returns a *PresentError holding every one that
	// exists. The ledger sets Absent only for such stores.
	Absent []string
}

// AbsenceChecker is a Store whose Transact honours Write.Absent. A wrapper
// of a store forwards it, reporting false when what it wraps does not
// check: the ledger then reads the records before deciding, as it does for
// a store that does not implement it.
//
// It pays where a read is a round trip of its own (a server): a step that
// names a new entry or run, by far the common case, saves that round
// trip. A step naming one that did move out (a duplicate of an older
// effect) now decides and encodes the document for a write the store
// refuses, where the read alone would have answered it: on Postgres and
// Redis two to three times what the read cost (docs/performance.md). A store in
// the process saves no round trip by it; bolt implements it all the same
// (it checks in the commit the decision runs in, and a refused write shares
// that commit with the writes around it) because a store that checks lets a
// conversation's document mark its parked events instead of listing their
// hashes.
type AbsenceChecker interface {
	ChecksAbsent() bool
}

// PresentError is Transact's answer to a Write whose Absent names records
// that exist: nothing was written, and Blobs holds each of them as it was
// beside the document fn decided on.
type PresentError struct {
	Blobs map[string][]byte
}

func (e *PresentError) Error() string {
	return fmt.Sprintf("ledger: %d records taken as absent exist", len(e.Blobs))
}

// ChecksAbsent reports whether s honours Write.Absent, for the ledger and
// for wrappers of a store that forward AbsenceChecker.
func ChecksAbsent(s Store) bool {
	c, ok := s.(AbsenceChecker)
	return ok && c.ChecksAbsent()
}

// ErrContention is returned (wrapped) by stores that gave up after a bounded
// number of optimistic retries because other writers kept changing the same
// scope. It is a store failure, not a decision: callers answer 503.
var ErrContention = errors.New("ledger: store contention: too many concurrent writers on one scope")

// ScopeAt is a scope and its time in an index.
type ScopeAt struct {
	Scope string
	At    time.Time
}

// Before reports whether a comes after b in ScopesReceived's order
// (newest first, then scope descending): whether a is older than b. A zero
// b is the start of the order, so every a follows it.
func (a ScopeAt) Before(b ScopeAt) bool {
	if b.At.IsZero() {
		return true
	}
	if !a.At.Equal(b.At) {
		return a.At.Before(b.At)
	}
	return a.Scope < b.Scope
}
