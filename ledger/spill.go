package ledger

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// A long scope stays cheap (issue #34): the document keeps what decisions
// read on every write (live and supersede-mode runs, unsettled entries,
// queued deliveries, the newest settled entries) and moves older settled
// entries out into side records of the scope, written in the same store
// step (and the runs nothing in the document names with them:
// spillruns.go):
//
//   - "x:{id}" holds one spilled entry, for the exact lookups of a claim,
//     an enqueue, a settle or a check, with its finished queue item when it
//     has one (see spillRecord);
//   - "s:{n}" holds the entries spilled together as chunk n, for what
//     reads a scope's history as a whole (History, a run's conflict check
//     when its context predates a spilled landing, CommittedValue) or a
//     page of it (HistoryPage, which reads only the chunks whose claim
//     times the page needs).
//
// The document lists its chunks (Spilled) and counts every change to these
// records (Spill). A decision that must look an entry up reads its record
// first, then decides in Transact only if the document's counter still
// equals the one it saw: records change only in the same atomic step as
// the document, so an unchanged counter proves the record read is the
// record in force. Otherwise it reads again.
//
// Spilled entries are settled (committed or failed), have no queued
// delivery still to go (an item delivered, coalesced or superseded leaves
// with its entry; one waiting, in flight, dead, rejected or failed keeps
// it in the document), and are not weighed by a cap at now; retention
// drops them as it drops entries and items in the document: a lookup
// ignores a spilled entry settled before the retention period and an item
// past its dropAt, and a chunk past both is deleted with its records (and
// its items' blobs) by a maintenance step after the write that finds it.
//
// A decision that looks an entry up gets its item back in the document
// too (inject), so that it decides as it did when items never left: an
// enqueue's duplicate answers with the item, a claim sees that a queued
// delivery stands for the entry (rerunnable), a replay or a trial finds
// the item. Entry and item are one unit: when the decision changes either,
// both stay in the document and their record goes (unload).

const (
	// keepSettled is how many spillable entries a spill leaves in the
	// document; spillAt is how many make a write spill.
	keepSettled = 8
	spillAt     = 3 * keepSettled
	// chunkMax bounds one chunk record.
	chunkMax = 256
	// spillTries bounds the reads again when spills keep moving.
	spillTries = 8
)

// spillChunk is one chunk record as the document lists it.
type spillChunk struct {
	N      uint64    `json:"n"`
	Count  int       `json:"count"`
	MaxSeq uint64    `json:"maxSeq,omitempty"` // highest LandedSeq in it
	Until  time.Time `json:"until"`            // newest SettledAt in it
	// First and Last bound the ClaimedAt of its entries, in Unix
	// milliseconds rounded outwards (small: the document lists every
	// chunk), so that a page of history reads only the chunks it needs
	// (HistoryPage). Zero in a chunk written before they were kept: no
	// bound known.
	First int64 `json:"first,omitempty"`
	Last  int64 `json:"last,omitempty"`
	// Items counts the queue items that left with its entries, and
	// RecvFirst and RecvLast bound their ReceivedAt, in Unix
	// nanoseconds (exact: the received index orders scopes by it), so
	// that the lists of a scope's deliveries read only the chunks that
	// hold items.
	Items     int   `json:"items,omitempty"`
	RecvFirst int64 `json:"recvFirst,omitempty"`
	RecvLast  int64 `json:"recvLast,omitempty"`
	// Runs counts the runs that left with it, whose ids its "rs:{n}"
	// record lists, and RunsUntil is the last activity of any of them
	// (spillruns.go).
	Runs      int       `json:"runs,omitempty"`
	RunsUntil time.Time `json:"runsUntil,omitzero"`
}

// until is when c passes retention: its entries', items' and runs'.
func (c spillChunk) until() time.Time { return latest(c.Until, c.RunsUntil) }

// latest is the later of a and b.
func latest(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// spillRecord is what an "x:{id}" record and each element of an "s:{n}"
// chunk hold: the entry and, since items leave the document too, its
// finished queue item. Records written before that carry no item and
// read as before.
type spillRecord struct {
	Entry
	Item *QueueItem `json:"item,omitempty"`
}

// spillableItem reports whether a queue item may leave the document with
// its entry: it is finished for good and waits for nobody (a dead or
// rejected one waits for an operator and the review index lists its
// scope; an inline failure for the provider's retry).
func (q *QueueItem) spillableItem() bool {
	switch q.Status {
	case DeliveryDelivered, DeliveryCoalesced, DeliverySuperseded:
		return !q.FinishedAt.IsZero()
	}
	return false
}

// coalescingHeads names, by source and event id, the held debounce items
// that a newer event may still fold into another (coalesce): the items
// coalesced into one of them stay in the document, because that fold
// points them at the newer head, and a spilled record is not rewritten.
func (d *document) coalescingHeads() map[string]bool {
	var heads map[string]bool
	for _, q := range d.Queue {
		if q.Quiet > 0 && q.Status == DeliveryQueued && q.Attempts == 0 && q.CoverCount > 0 {
			if heads == nil {
				heads = map[string]bool{}
			}
			heads[q.Source+"\x00"+q.EventID] = true
		}
	}
	return heads
}

// addItem widens c's item bounds by q.
func (c *spillChunk) addItem(q *QueueItem) {
	r := q.ReceivedAt.UnixNano()
	if c.Items == 0 || r < c.RecvFirst {
		c.RecvFirst = r
	}
	if c.Items == 0 || r > c.RecvLast {
		c.RecvLast = r
	}
	c.Items++
}

func entryBlob(id string) string { return "x:" + id }

func chunkBlob(n uint64) string { return "s:" + strconv.FormatUint(n, 10) }

// spilledAfter reports whether a chunk holds an entry that landed after seq.
func (d *document) spilledAfter(seq uint64) bool {
	if r := d.outside(); r != nil && r.Spill > 0 && r.MaxSeq > seq {
		return true
	}
	for _, c := range d.Spilled {
		if c.MaxSeq > seq {
			return true
		}
	}
	for _, p := range d.SpillPages {
		if p.MaxSeq > seq {
			return true
		}
	}
	return false
}

// spillable reports whether e may leave the document at now.
func (d *document) spillable(e *Entry, now time.Time, o Options) bool {
	if e.State != StateCommitted && e.State != StateFailed {
		return false
	}
	if q := d.Queue[e.ID]; q != nil && !q.spillableItem() {
		return false
	}
	if c, ok := capFor(o, e.Intent); ok && e.ClaimedAt.After(now.Add(-c.Window)) {
		return false
	}
	return true
}

// spill moves the oldest spillable entries out once there are spillAt of
// them, leaving keepSettled.
// With noRuns the runs stay (spillruns.go).
func (d *document) spill(now time.Time, o Options, noRuns bool, blobs *blobSet) error {
	heads := d.coalescingHeads()
	var cands []*Entry
	for _, e := range d.Entries {
		if !d.spillable(e, now, o) {
			continue
		}
		if q := d.Queue[e.ID]; q != nil && q.Status == DeliveryCoalesced && heads[q.Source+"\x00"+q.CoveredBy] {
			continue
		}
		cands = append(cands, e)
	}
	if len(cands) < spillAt {
		return nil
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if a.LandedSeq != b.LandedSeq {
			return a.LandedSeq < b.LandedSeq
		}
		if !a.SettledAt.Equal(b.SettledAt) {
			return a.SettledAt.Before(b.SettledAt)
		}
		return a.ID < b.ID
	})
	out := cands[:len(cands)-keepSettled]
	for len(out) > 0 {
		part := out[:min(chunkMax, len(out))]
		out = out[len(part):]
		d.Spill++
		c := spillChunk{N: d.Spill, Count: len(part)}
		recs := make([]spillRecord, len(part))
		for i, e := range part {
			first, last := claimedBounds(e.ClaimedAt)
			if i == 0 || first < c.First {
				c.First = first
			}
			c.Last = max(c.Last, last)
			rec := spillRecord{Entry: *e, Item: d.Queue[e.ID]}
			recs[i] = rec
			b, err := marshalRecord(rec)
			if err != nil {
				return fmt.Errorf("ledger: encode spilled entry %q: %w", e.ID, err)
			}
			blobs.set(entryBlob(e.ID), b)
			c.MaxSeq = max(c.MaxSeq, e.LandedSeq)
			if e.SettledAt.After(c.Until) {
				c.Until = e.SettledAt
			}
			if q := rec.Item; q != nil {
				// The chunk lives as long as the item may be
				// listed: its dropAt is FinishedAt plus retention.
				c.addItem(q)
				if q.FinishedAt.After(c.Until) {
					c.Until = q.FinishedAt
				}
				delete(d.Queue, e.ID)
			}
			delete(d.Entries, e.ID)
		}
		b, err := marshalRecord(recs)
		if err != nil {
			return fmt.Errorf("ledger: encode spilled chunk: %w", err)
		}
		blobs.set(chunkBlob(c.N), b)
		d.Spilled = append(d.Spilled, c)
	}
	if !noRuns {
		return d.spillRuns(&d.Spilled[len(d.Spilled)-1], blobs)
	}
	return nil
}

// claimedBounds is t in Unix milliseconds, rounded down and up.
func claimedBounds(t time.Time) (first, last int64) {
	first = t.UnixMilli()
	last = first
	if t.After(time.UnixMilli(first)) {
		last++
	}
	return first, last
}

// retirable reports whether a chunk has passed retention.
func (d *document) retirable(cutoff time.Time) bool {
	if r := d.outside(); r != nil && r.Spill > 0 && refTime(r.Oldest).Before(cutoff) {
		return true
	}
	for _, c := range d.Spilled {
		if c.until().Before(cutoff) {
			return true
		}
	}
	for _, p := range d.SpillPages {
		if p.until().Before(cutoff) {
			return true
		}
	}
	return false
}

// spillView is what a decision read of a scope's spilled records: the
// entries it may look up and, when asked for, whole chunks, all as of the
// document's Spill counter.
type spillView struct {
	counter uint64
	read    bool                    // entries were read for counter
	entries map[string]*spillRecord // by id; absent: no record
	runs    map[string]*runState    // by id, each run read; nil: no record
	chunks  bool                    // whole chunks were read for counter
	history []*spillRecord          // their records, oldest chunk first
	// lands are the landing records read so far (landings.go), for
	// decisions that start a run.
	lands *landLoads
}

// absentView is a view of d in which no record lk names exists, for a
// decision whose write the store checks (Write.Absent).
func absentView(d *document, lk lookup) *spillView {
	a := &spillView{counter: d.Spill, read: true, entries: map[string]*spillRecord{}}
	if len(lk.runs) > 0 {
		a.runs = make(map[string]*runState, len(lk.runs))
		for _, id := range lk.runs {
			a.runs[id] = nil
		}
	}
	return a
}

// errSpillMoved: the document's counter is not the view's; read again.
type errSpillMoved struct{ counter uint64 }

func (e *errSpillMoved) Error() string {
	return fmt.Sprintf("ledger: spilled records moved to %d", e.counter)
}

// errNeedChunks: the decision needs the spilled history.
type errNeedChunks struct{ counter uint64 }

func (e *errNeedChunks) Error() string {
	return fmt.Sprintf("ledger: decision needs the spilled chunks as of %d", e.counter)
}

// loaded remembers what a view put into a document, to take it out again
// before the write.
type loaded map[string]*loadedRec

// loadedRec is one record a view put into a document: its entry and its
// item as put (nil: not put, being past retention or already in the
// document; item as its encoding, to tell any change), and its item when
// retention kept it out (its blobs go if the record goes).
type loadedRec struct {
	entry   *Entry
	item    []byte
	expired *QueueItem
}

// inject puts the view's records (entries and items not in d and within
// retention) into d, for the decision, and returns what it put.
func (v *spillView) inject(d *document, ids []string, now time.Time, retention time.Duration) loaded {
	cutoff := now.Add(-retention)
	out := loaded{}
	put := func(r *spillRecord) {
		if r == nil {
			return
		}
		lr := &loadedRec{}
		if d.Entries[r.ID] == nil && !r.SettledAt.Before(cutoff) {
			cp := r.Entry
			d.Entries[r.ID] = &cp
			lr.entry = &r.Entry
		}
		if q := r.Item; q != nil && d.Queue[r.ID] == nil {
			if q.dropAt(retention).Before(now) {
				lr.expired = q
			} else if b, err := marshalRecord(q); err == nil {
				cp := *q
				d.Queue[r.ID] = &cp
				lr.item = b
			}
		}
		if lr.entry != nil || lr.item != nil {
			out[r.ID] = lr
		}
	}
	if v.chunks {
		for _, r := range v.history {
			if lr, again := out[r.ID]; again {
				// A later chunk holds a newer copy.
				if lr.entry != nil {
					delete(d.Entries, r.ID)
				}
				if lr.item != nil {
					delete(d.Queue, r.ID)
				}
				delete(out, r.ID)
			}
			put(r)
		}
	}
	for _, id := range ids {
		put(v.entries[id])
	}
	return out
}

// unload takes the view's records out of d again, unless the decision
// changed the entry or the item: then both stay, and their record goes
// (the document's copy is the one in force; Moved says the chunks' copies
// are out of date).
func (l loaded) unload(d *document, blobs *blobSet) {
	for id, was := range l {
		e, q := d.Entries[id], d.Queue[id]
		changed := false
		if was.entry != nil && e != nil && !(e.State == was.entry.State && e.Attempt == was.entry.Attempt &&
			e.SettledAt.Equal(was.entry.SettledAt) && e.ResolvedBy == was.entry.ResolvedBy && e.LateSettle == was.entry.LateSettle) {
			changed = true
		}
		if was.item != nil && q != nil {
			if b, err := marshalRecord(q); err != nil || !bytes.Equal(b, was.item) {
				changed = true
			}
		}
		if !changed {
			if was.entry != nil {
				delete(d.Entries, id)
			}
			if was.item != nil {
				delete(d.Queue, id)
			}
			continue
		}
		if was.expired != nil && d.Queue[id] == nil {
			// Its record goes, and with it the only trace of the
			// item: its blobs go too, as pruneQueue drops them.
			blobs.drop(was.expired)
		}
		blobs.set(entryBlob(id), nil)
		if d.Moved == nil {
			d.Moved = map[string]uint64{}
		}
		d.Moved[id] = d.Spill
	}
}

// pruneMoved forgets the moves no chunk still holds an old copy of.
func (d *document) pruneMoved() {
	if len(d.Moved) == 0 {
		return
	}
	oldest := uint64(0)
	switch r := d.outside(); {
	case r != nil && r.Spill > 0:
		oldest = r.Low
	case len(d.SpillPages) > 0:
		oldest = d.SpillPages[0].Low
	case len(d.Spilled) > 0:
		oldest = d.Spilled[0].N
	}
	for id, n := range d.Moved {
		if !d.hasSpilledChunks() || n < oldest {
			delete(d.Moved, id)
		}
	}
	if len(d.Moved) == 0 {
		d.Moved = nil
	}
}

// spilledCopyStale reports whether the copy of e in chunk n is out of
// date: the entry moved back into the document after chunk n was written
// (it may have left again since, in a later chunk).
func (d *document) spilledCopyStale(id string, n uint64) bool {
	if d.Entries[id] != nil {
		return true
	}
	m, ok := d.Moved[id]
	return ok && n <= m
}

// readSpilled reads the records of ids and of the runs named runs, in one
// store call (the first entry found in order counts: ids are one entry's
// id and its format 1 id), as of counter.
func (l *Ledger) readSpilled(ctx context.Context, scope string, ids, runs []string, v *spillView) error {
	names := spilledNames(ids, runs)
	bs, err := readRecords(ctx, l, scope, "spilled records", names, func(n string) string { return n })
	if err != nil {
		return err
	}
	return v.fill(scope, ids, runs, bs)
}

// spilledNames are the record names of ids' entries, then of runs.
func spilledNames(ids, runs []string) []string {
	names := make([]string, 0, len(ids)+len(runs))
	for _, id := range ids {
		names = append(names, entryBlob(id))
	}
	for _, id := range runs {
		names = append(names, runBlob(id))
	}
	return names
}

// fill sets v's entries and runs from bs, the records spilledNames(ids,
// runs) named (nil where one is missing), read as of v.counter.
func (v *spillView) fill(scope string, ids, runs []string, bs [][]byte) error {
	v.entries = map[string]*spillRecord{}
	for i, id := range ids {
		b := bs[i]
		if b == nil {
			continue
		}
		var r spillRecord
		if err := unmarshalRecord(b, &r); err != nil {
			return fmt.Errorf("%w: scope %q: spilled entry %q: %w", ErrCorrupt, scope, id, err)
		}
		v.entries[id] = &r
		break
	}
	var err error
	if v.runs, err = decodeRuns(scope, runs, bs[len(ids):]); err != nil {
		return err
	}
	v.read = true
	return nil
}

// readRecords reads the records name(x) of every x in xs of one scope, in
// one store call, one answer per x (nil where a record is missing); what
// says which records, for the error when the store answers otherwise.
func readRecords[T any](ctx context.Context, l *Ledger, scope, what string, xs []T, name func(T) string) ([][]byte, error) {
	names := make([]string, len(xs))
	for i, x := range xs {
		names[i] = name(x)
	}
	bs, err := l.store.ReadBlobs(ctx, scope, names)
	if err != nil {
		return nil, err
	}
	if len(bs) != len(names) {
		return nil, fmt.Errorf("ledger: scope %q: the store read %d %s for %d names", scope, len(bs), what, len(names))
	}
	return bs, nil
}

// readChunks reads the listed chunks, in order.
func (l *Ledger) readChunks(ctx context.Context, scope string, chunks []spillChunk) ([]*spillRecord, error) {
	var out []*spillRecord
	for _, c := range chunks {
		rs, err := l.readChunk(ctx, scope, c.N)
		if err != nil {
			return nil, err
		}
		out = append(out, rs...)
	}
	return out, nil
}

// readChunk reads chunk n; nil when it was retired meanwhile (past
// retention).
func (l *Ledger) readChunk(ctx context.Context, scope string, n uint64) ([]*spillRecord, error) {
	b, err := l.store.ReadBlob(ctx, scope, chunkBlob(n))
	if err != nil || b == nil {
		return nil, err
	}
	var rs []*spillRecord
	if err := unmarshalRecord(b, &rs); err != nil {
		return nil, fmt.Errorf("%w: scope %q: spilled chunk %d: %w", ErrCorrupt, scope, n, err)
	}
	return rs, nil
}

// readWhole reads a scope's document with its spilled entries and items
// put back, for the reads of a whole history. It changes nothing.
func (l *Ledger) readWhole(ctx context.Context, scope string) (*document, error) {
	d, err := l.readFull(ctx, scope)
	if err != nil || !d.hasSpilledChunks() {
		return d, err
	}
	rs, err := l.readAllChunks(ctx, d)
	if err != nil {
		return nil, err
	}
	v := spillView{chunks: true, history: rs}
	v.inject(d, nil, l.now(), l.opts.Retention)
	return d, nil
}

// lookupSpilled finds a spilled entry of d by one of ids, for a read.
func (l *Ledger) lookupSpilled(ctx context.Context, d *document, ids []string) (*Entry, error) {
	if d.Spill == 0 {
		return nil, nil
	}
	var v spillView
	if err := l.readSpilled(ctx, d.Scope, ids, nil, &v); err != nil {
		return nil, err
	}
	cutoff := l.now().Add(-l.opts.Retention)
	for _, id := range ids {
		if r := v.entries[id]; r != nil && !r.SettledAt.Before(cutoff) {
			return &r.Entry, nil
		}
	}
	return nil, nil
}

// memo is a ledger's bounded memory of what it saw in the store, by key:
// only ever a hint, which its user checks before relying on it. When it
// holds max keys, putting a new one lets any other go. Safe for
// concurrent use; the zero value is ready once max is set.
type memo[V any] struct {
	mu  sync.Mutex
	m   map[string]V
	max int
}

func (c *memo[V]) get(k string) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.m[k]
	return v, ok
}

func (c *memo[V]) put(k string, v V) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]V{}
	}
	if _, ok := c.m[k]; !ok && len(c.m) >= c.max {
		for old := range c.m {
			delete(c.m, old)
			break
		}
	}
	c.m[k] = v
}

func (c *memo[V]) forget(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.m, k)
}

// spillCounters remembers the last Spill counter seen per scope, so that a
// lookup on a scope known to spill reads its record before its Transact
// instead of after a first one (the Transact checks the counter).
type spillCounters struct{ memo[uint64] }

const spillCountersMax = 4096

func newSpillCounters() *spillCounters {
	return &spillCounters{memo[uint64]{max: spillCountersMax}}
}

func (c *spillCounters) get(scope string) uint64 {
	n, _ := c.memo.get(scope)
	return n
}

// lookup is what a decision may look up among spilled entries: the ids of
// one entry (its own, then its format 1 id), and whether it needs whole
// chunks (need reports so from the document).
type lookup struct {
	ids []string
	// lazy: read the records only once the document shows the entry is
	// not in it (a settle's entry nearly always is).
	lazy bool
	// runs are the runs the decision names, read with the entries
	// (spillruns.go).
	runs []string
	// replayed, when set, may answer from the entry's record alone,
	// read before the document (see replayedFrom).
	replayed func(r *spillRecord, now time.Time) bool
	// waits: the decision works on the document with its waiting events
	// parked (waits.go) and returns errNeedAllWaits when it meets one;
	// otherwise every parked event is put back before it decides.
	waits bool
}

// replayedFrom answers a claim of a committed effect from its spilled
// record alone, without the document: one store round trip instead of
// two for a duplicate of an old effect on a long scope. It is the answer
// the document would give. A record exists only while its entry is out of
// the document: the write that brings an entry back and changes it deletes
// the record in the same step (unload), and a committed entry changes only
// so. Reading the record before such a write answers as of before it, as
// a claim that reached the document first would have. It sets dec and
// rerun, as the decision on the document does, when it answers.
func replayedFrom(retention time.Duration, dec *decision, rerun *bool) func(r *spillRecord, now time.Time) bool {
	return func(r *spillRecord, now time.Time) bool {
		if r.State != StateCommitted || r.SettledAt.Before(now.Add(-retention)) {
			return false
		}
		e := r.Entry
		*dec = decision{result: Result{Status: StatusReplayed, Value: e.Value, Entry: &e}}
		*rerun = r.Item != nil && !r.Item.Inline
		return true
	}
}

// names reports whether lk names records to read.
func (lk lookup) names() bool { return len(lk.ids)+len(lk.runs) > 0 }

// lookupFor is the lookup of a claim's key.
func lookupFor(k resolvedKey) lookup {
	ids := []string{k.id}
	if k.legacyPayload != nil {
		ids = append(ids, legacyEntryID(k.scope, k.intent, k.legacyPayload))
	}
	return lookup{ids: ids}
}

// transactFind is transactBlobs for a decision that may look up the
// entries lk names, and may ask for the spilled history by returning
// errNeedChunks. After a write that leaves a chunk past retention, it
// retires it.
func (l *Ledger) transactFind(ctx context.Context, scope string, lk lookup, decide func(d *document, now time.Time, blobs *blobSet, v *spillView) (bool, error)) error {
	var v spillView
	// A store that checks Write.Absent lets a step name records as
	// missing instead of reading them first. Asked at each step: a store
	// that opens late starts to check once it has.
	checks := ChecksAbsent(l.store)
	lands := &landLoads{remembered: l.lists}
	chunks := chunkReader{l: l, scope: scope}
	var waits waitLoads
	allWaits := !lk.waits
	if c := l.spills.get(scope); c > 0 && lk.names() && !lk.lazy && !checks {
		v.counter = c
		if err := l.readSpilled(ctx, scope, lk.ids, lk.runs, &v); err != nil {
			return err
		}
		if lk.replayed != nil && len(lk.ids) > 0 && v.entries[lk.ids[0]] != nil && lk.replayed(v.entries[lk.ids[0]], l.now()) {
			return nil
		}
	}
	for try := 0; ; try++ {
		var retire bool
		var counter, assumedAt uint64
		err := l.store.Transact(ctx, scope, func(current []byte) (*Write, error) {
			now := l.now()
			var blobs blobSet
			d, err := decodeDocumentBlobs(scope, current, now, &blobs)
			if err != nil {
				return nil, err
			}
			counter = d.Spill
			d.markWaits = checks
			d.loads, lands.wrote, lands.wroteBytes = lands, "", nil
			var was parkedAs
			if allWaits && len(d.Waits) > 0 {
				was = d.parkedState()
				if err := d.unparkAll(waits, &blobs); err != nil {
					return nil, err
				}
			}
			var put loaded
			var putRuns loadedRuns
			view := &v
			var absent []string
			if d.Spill != 0 {
				var missing []string
				for _, id := range lk.ids {
					if d.Entries[id] == nil {
						missing = append(missing, entryBlob(id))
					}
				}
				for _, id := range lk.runs {
					if v.needRun(d, id) != nil {
						missing = append(missing, runBlob(id))
					}
				}
				stale := len(missing) > 0 && (!v.read || v.counter != d.Spill)
				switch {
				case stale && checks && !v.chunks:
					// Decide as if none of them had a record: the
					// store writes only if that is so, and otherwise
					// hands them over (PresentError).
					view, absent, assumedAt = absentView(d, lk), missing, d.Spill
				case stale || (v.chunks && v.counter != d.Spill):
					return nil, &errSpillMoved{counter: d.Spill}
				}
				put = view.inject(d, lk.ids, now, l.opts.Retention)
				if view.read && view.counter == d.Spill {
					putRuns = view.injectRuns(d, now, l.opts.Retention)
				}
			}
			view.lands, lands.need = lands, ""
			changed, err := decide(d, now, &blobs, view)
			if lands.need != "" {
				// The decision mapped a context through a landing
				// record it did not have: whatever it decided is void.
				return nil, &errNeedLanding{name: lands.need}
			}
			if absent != nil && (err != nil || !changed) {
				// Only a write checks what it took as absent: any
				// other answer is made again on the records read.
				return nil, &errSpillMoved{counter: d.Spill}
			}
			if len(d.assumed) > 0 && (err != nil || !changed) {
				// The same for a parked event's markers: decide
				// again with every parked event read back.
				return nil, errNeedAllWaits
			}
			if err != nil || !changed {
				return nil, err
			}
			put.unload(d, &blobs)
			putRuns.unload(d, &blobs)
			d.refold(was, waits, l.opts, &blobs)
			if err := d.restoreWaits(waits, now, l.opts.Retention, &blobs); err != nil {
				return nil, err
			}
			if err := d.spill(now, l.opts, l.noPark, &blobs); err != nil {
				return nil, err
			}
			if err := d.foldSpilled(&blobs); err != nil {
				return nil, err
			}
			if err := d.moveLandings(&blobs); err != nil {
				return nil, err
			}
			if !l.noPark {
				if err := d.park(now, l.opts.Retention, l.opts, &blobs); err != nil {
					return nil, err
				}
				if err := d.foldWaits(&blobs); err != nil {
					return nil, err
				}
			}
			retire = d.retirable(now.Add(-l.opts.Retention))
			counter = d.Spill
			w, err := d.finish(now, l.opts.Retention, &blobs)
			if w == nil && err == nil && absent != nil {
				return nil, &errSpillMoved{counter: assumedAt}
			}
			if w == nil && err == nil && len(d.assumed) > 0 {
				return nil, errNeedAllWaits
			}
			if lands.need != "" {
				// A step after the decision needed a record: the
				// write is void.
				return nil, &errNeedLanding{name: lands.need}
			}
			if w != nil {
				w.Absent = append(absent, d.assumed...)
			}
			return w, err
		})
		var moved *errSpillMoved
		var need *errNeedChunks
		var needLanding *errNeedLanding
		var needWaits *errNeedWaits
		var needRun *errNeedRun
		var present *PresentError
		switch {
		case errors.As(err, &present) && !allWaits && presentMarks(present):
			// An id taken as not parked is: decide with every parked
			// event read back (a spilled record found with it is
			// met again, and read, on that try).
			allWaits = true
			continue
		case errors.As(err, &present) && try < spillTries:
			// Records taken as absent exist: decide again with them, as
			// read beside the document the decision was made on; a
			// duplicate of a committed effect is answered by its
			// record alone.
			v = spillView{counter: assumedAt}
			names := spilledNames(lk.ids, lk.runs)
			bs := make([][]byte, len(names))
			for i, n := range names {
				bs[i] = present.Blobs[n]
			}
			if err := v.fill(scope, lk.ids, lk.runs, bs); err != nil {
				return err
			}
			l.spills.put(scope, assumedAt)
			if lk.replayed != nil && len(lk.ids) > 0 && v.entries[lk.ids[0]] != nil && lk.replayed(v.entries[lk.ids[0]], l.now()) {
				return nil
			}
			continue
		case errors.As(err, &needRun) && try < spillTries:
			// The decision met a run it did not name: read it (again
			// what it named), as of the counter it saw; whole chunks
			// read as of another stay unread.
			lk.runs = append(slices.Clip(lk.runs), needRun.id)
			if v.counter != needRun.counter {
				v = spillView{}
			}
			v.counter = needRun.counter
			if err := l.readSpilled(ctx, scope, lk.ids, lk.runs, &v); err != nil {
				return err
			}
			continue
		case errors.Is(err, errNeedAllWaits) && !allWaits:
			allWaits = true
			continue
		case errors.As(err, &needWaits) && try < spillTries:
			if _, err := l.readWaits(ctx, scope, needWaits, &waits); err != nil {
				return err
			}
			continue
		case errors.As(err, &needLanding) && try < spillTries:
			b, err := l.store.ReadBlob(ctx, scope, needLanding.name)
			if err != nil {
				return err
			}
			if strings.HasPrefix(needLanding.name, "ls:") {
				// Checked against the document that names it when
				// used: a record gone meanwhile is nil, and the
				// document names another now. The same bytes read
				// twice for a document that still names them, and
				// still not its record, are not its record.
				if prev, seen := lands.lists[needLanding.name]; seen && bytes.Equal(prev, b) {
					return fmt.Errorf("%w: scope %q: listings record %s does not match the document that names it", ErrCorrupt, scope, needLanding.name)
				}
				if lands.lists == nil {
					lands.lists = map[string][]byte{}
				}
				lands.lists[needLanding.name] = b
				l.lists.forget(scope, needLanding.name)
				continue
			}
			if b != nil { // nil: dropped meanwhile, and the document says so now
				if err := lands.load(scope, needLanding.name, b); err != nil {
					return err
				}
			}
			continue
		case errors.As(err, &moved) && try < spillTries && !v.chunks:
			l.spills.put(scope, moved.counter)
			v = spillView{counter: moved.counter}
			if lk.names() {
				if err := l.readSpilled(ctx, scope, lk.ids, lk.runs, &v); err != nil {
					return err
				}
			}
			continue
		case (errors.As(err, &need) || moved != nil) && try < spillTries:
			// The decision needs the spilled history (again, when it
			// moved since it was read: only the chunks new since are
			// read this time).
			if moved != nil {
				l.spills.put(scope, moved.counter)
			}
			d, err := l.readListed(ctx, scope)
			if err != nil {
				return err
			}
			v = spillView{counter: d.Spill, chunks: true}
			if v.history, err = chunks.all(ctx, d); err != nil {
				return err
			}
			if lk.names() {
				if err := l.readSpilled(ctx, scope, lk.ids, lk.runs, &v); err != nil {
					return err
				}
			}
			continue
		case moved != nil || need != nil || needLanding != nil || needWaits != nil || needRun != nil || present != nil:
			return fmt.Errorf("%w: scope %q: spilled records kept moving", ErrContention, scope)
		}
		if err != nil {
			return err
		}
		if counter != 0 {
			l.spills.put(scope, counter)
		}
		if lands.wrote != "" {
			l.lists.put(scope, lands.wrote, lands.wroteBytes)
		}
		if retire {
			// Best effort: a chunk left behind is retired after a later
			// write, and lookups ignore its entries meanwhile.
			_ = l.retireSpilled(ctx, scope)
		}
		return nil
	}
}

// retireSpilled deletes the chunks of scope past retention and the entry
// records they wrote that are past it too, with the blobs of their items
// (a record may since hold a newer spill of the same entry: that one
// stays). A page goes whole, once all its chunks are past retention.
func (l *Ledger) retireSpilled(ctx context.Context, scope string) error {
	d, err := l.readListed(ctx, scope)
	if err != nil {
		return err
	}
	cutoff := l.now().Add(-l.opts.Retention)
	var old []spillChunk
	gonePages := map[uint64]bool{}
	var pageRecords []uint64 // of the pages that go, with those under them
	for _, p := range d.SpillPages {
		if p.until().Before(cutoff) {
			cs, ns, err := l.readPageTree(ctx, scope, p)
			if err != nil {
				return err
			}
			old = append(old, cs...)
			gonePages[p.N] = true
			pageRecords = append(pageRecords, ns...)
		}
	}
	for _, c := range d.Spilled {
		if c.until().Before(cutoff) {
			old = append(old, c)
		}
	}
	if len(old) == 0 && len(gonePages) == 0 {
		return nil
	}
	rs, err := l.readChunks(ctx, scope, old)
	if err != nil {
		return err
	}
	del := map[string]*QueueItem{} // the records to delete, with their items
	for _, r := range rs {
		b, err := l.store.ReadBlob(ctx, scope, entryBlob(r.ID))
		if err != nil {
			return err
		}
		var cur spillRecord
		if b != nil && unmarshalRecord(b, &cur) == nil && cur.SettledAt.Before(cutoff) &&
			(cur.Item == nil || cur.Item.dropAt(l.opts.Retention).Before(l.now())) {
			del[r.ID] = cur.Item
		}
	}
	runLists, goneRuns, err := l.retireRuns(ctx, scope, old)
	if err != nil {
		return err
	}
	gone := map[uint64]bool{}
	for _, c := range old {
		gone[c.N] = true
	}
	seen := d.Spill
	return l.transactFind(ctx, scope, lookup{}, func(d *document, now time.Time, blobs *blobSet, _ *spillView) (bool, error) {
		if d.Spill != seen {
			return false, nil // moved on: a later write retires what is left
		}
		if !d.wholeLists() {
			return false, nil // void: the record is read first
		}
		for n := range gone {
			blobs.set(chunkBlob(n), nil)
		}
		for _, n := range runLists {
			blobs.set(runListBlob(n), nil)
		}
		for _, id := range goneRuns {
			if d.Runs[id] == nil {
				blobs.set(runBlob(id), nil)
			}
		}
		kept := d.Spilled[:0]
		for _, c := range d.Spilled {
			if !gone[c.N] {
				kept = append(kept, c)
			}
		}
		d.Spilled = kept
		for _, n := range pageRecords {
			blobs.set(spillPageBlob(n), nil)
		}
		keptPages := d.SpillPages[:0]
		for _, p := range d.SpillPages {
			if !gonePages[p.N] {
				keptPages = append(keptPages, p)
			}
		}
		d.SpillPages = keptPages
		d.pruneMoved()
		for id, q := range del {
			if d.Entries[id] == nil && d.Queue[id] == nil {
				blobs.set(entryBlob(id), nil)
				if q != nil {
					blobs.drop(q)
				}
			}
		}
		d.Spill++
		return true, nil
	})
}
