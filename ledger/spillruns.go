package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strconv"
	"time"
)

// Runs leave the document too (issue #34). Every queued or inline delivery
// begins a run, and a run stays for a retention after its last activity:
// about 200 bytes each, so a conversation that took 1,000 deliveries kept
// 200 KB of runs in the document every step reads and writes, long after
// their events had left with their entries (spill.go).
//
// When a write spills entries, the runs no decision on the document reads
// leave with them, but for the newest keepRuns: those of independent or
// exclusive mode that hold no lease (the holder stays) and that no queue
// item in the document names. Supersede-mode runs stay, since whether a
// run is superseded is a question about every newer run of the scope
// (newerRun). Each spilled run is written to a record of its own,
// "r:{hash of its id}", and the ids spilled with chunk n to "rs:{n}"; the chunk's
// listing counts them (Runs) and bounds their activity (RunsUntil), so
// that the document's expiry and the chunk's retirement wait for them.
//
// A step that names a run (Begin, BeginClaim, Enqueue, Claim, Heartbeat,
// End, Cancel: lookup.runs) reads its record beside the entry records it
// reads anyway, in the same store call (or, on a store that checks
// Write.Absent, takes both as absent and lets its write check), and a
// decision that meets a run it did not name (a take of a replayed event)
// asks for it (errNeedRun). The
// record is put back into the document for the decision, under the Spill
// counter as an entry's is: one the decision changes stays in the document
// and its record goes; one it does not change leaves again. A run is
// forgotten when retention would have dropped it from the document
// (runGone), and its record deleted when its chunk retires. Views that
// list runs (Conversation) read them all back.
//
// A document with spilled runs is format 7: an older build would begin a
// spilled run afresh instead of refusing it as ended.

const (
	// keepRuns is how many spillable runs a spill leaves in the
	// document, the most recently active.
	keepRuns = 8
)

// runBlob names a spilled run's record by a hash of its id: a run id is
// the caller's, of any length and any bytes, and a store's keys are not
// (bolt refuses one past 32 KB). The record holds the id, which a read
// checks.
func runBlob(id string) string {
	h := sha256.Sum256([]byte(id))
	return "r:" + hex.EncodeToString(h[:16])
}

func runListBlob(n uint64) string { return "rs:" + strconv.FormatUint(n, 10) }

// errNeedRun: the decision met a run that may be spilled and was not read.
type errNeedRun struct {
	id      string
	counter uint64
}

func (e *errNeedRun) Error() string {
	return fmt.Sprintf("ledger: decision needs spilled run %q as of %d", e.id, e.counter)
}

// needRun reports, for a run id a decision on d is about to read, whether
// it may be among the spilled runs and v did not read it as of d.
func (v *spillView) needRun(d *document, id string) error {
	if id == "" || d.Runs[id] != nil || !d.spilledRuns() {
		return nil
	}
	if _, read := v.runs[id]; read && v.read && v.counter == d.Spill {
		return nil
	}
	return &errNeedRun{id: id, counter: d.Spill}
}

// spilledRuns reports whether any chunk of d lists spilled runs.
func (d *document) spilledRuns() bool {
	if r := d.outside(); r != nil && r.Runs {
		return true
	}
	for _, c := range d.Spilled {
		if c.Runs > 0 {
			return true
		}
	}
	for _, p := range d.SpillPages {
		if p.Runs > 0 {
			return true
		}
	}
	return false
}

// runGone reports whether retention drops r at cutoff: prune deletes such a
// run from the document, and a lookup ignores such a spilled one.
func runGone(r *runState, cutoff time.Time) bool {
	finished := (r.Ended || r.Cancelled) && r.EndedAt.Before(cutoff)
	idle := r.LastActive.Before(cutoff) && r.LeaseUntil.Before(cutoff)
	return finished || idle
}

// runUntil is the last moment r was active, for its chunk's bounds.
func runUntil(r *runState) time.Time { return latest(latest(r.LastActive, r.LeaseUntil), r.EndedAt) }

// spillRuns moves the spillable runs but the newest keepRuns out with
// chunk c, the last one this write spilled.
func (d *document) spillRuns(c *spillChunk, blobs *blobSet) error {
	named := map[string]bool{}
	for _, q := range d.Queue {
		named[q.RunID] = true
	}
	var cands []*runState
	for _, r := range d.Runs {
		if r.Mode == ModeSupersede || r.ID == d.Holder || named[r.ID] {
			continue
		}
		cands = append(cands, r)
	}
	if len(cands) <= keepRuns {
		return nil
	}
	sort.Slice(cands, func(i, j int) bool {
		a, b := cands[i], cands[j]
		if !a.LastActive.Equal(b.LastActive) {
			return a.LastActive.Before(b.LastActive)
		}
		return a.ID < b.ID
	})
	out := cands[:len(cands)-keepRuns]
	ids := make([]string, len(out))
	for i, r := range out {
		b, err := marshalRecord(r)
		if err != nil {
			return fmt.Errorf("ledger: encode spilled run %q: %w", r.ID, err)
		}
		blobs.set(runBlob(r.ID), b)
		ids[i] = r.ID
		c.RunsUntil = latest(c.RunsUntil, runUntil(r))
		delete(d.Runs, r.ID)
	}
	b, err := marshalRecord(ids)
	if err != nil {
		return fmt.Errorf("ledger: encode spilled run ids: %w", err)
	}
	blobs.set(runListBlob(c.N), b)
	c.Runs = len(ids)
	return nil
}

// loadedRuns remembers the runs a view put into a document, as encoded, to
// take them out again before the write unless the decision changed them.
type loadedRuns map[string][]byte

// injectRuns puts the view's runs (those not in d and not dropped by
// retention) into d.
func (v *spillView) injectRuns(d *document, now time.Time, retention time.Duration) loadedRuns {
	if len(v.runs) == 0 {
		return nil
	}
	cutoff := now.Add(-retention)
	out := loadedRuns{}
	for id, r := range v.runs {
		if r == nil || d.Runs[id] != nil || runGone(r, cutoff) {
			continue
		}
		b, err := marshalRecord(r)
		if err != nil {
			continue // cannot tell a change: it was read, it stays out
		}
		cp := *r
		cp.Acks = append([]string(nil), r.Acks...)
		d.Runs[id] = &cp
		out[id] = b
	}
	return out
}

// unload takes the runs the decision left as they were out of d again; a
// changed one stays, and its record goes.
func (l loadedRuns) unload(d *document, blobs *blobSet) {
	for id, was := range l {
		r := d.Runs[id]
		if r == nil {
			continue
		}
		if b, err := marshalRecord(r); err == nil && bytes.Equal(b, was) {
			delete(d.Runs, id)
			continue
		}
		blobs.set(runBlob(id), nil)
	}
}

// decodeRuns decodes the run records bs of ids; nil where one is missing.
func decodeRuns(scope string, ids []string, bs [][]byte) (map[string]*runState, error) {
	out := make(map[string]*runState, len(ids))
	for i, id := range ids {
		if bs[i] == nil {
			out[id] = nil
			continue
		}
		var r runState
		if err := unmarshalRecord(bs[i], &r); err != nil {
			return nil, fmt.Errorf("%w: scope %q: spilled run %q: %w", ErrCorrupt, scope, id, err)
		}
		if r.ID != id {
			out[id] = nil // another id under the same hash: never seen, but not this run
			continue
		}
		out[id] = &r
	}
	return out, nil
}

// runChunks lists every chunk of d that spilled runs, under pages too.
func (l *Ledger) runChunks(ctx context.Context, d *document) ([]spillChunk, error) {
	var out []spillChunk
	for _, p := range d.SpillPages {
		if p.Runs == 0 {
			continue
		}
		cs, err := l.readPage(ctx, d.Scope, p)
		if err != nil {
			return nil, err
		}
		out = append(out, cs...)
	}
	out = append(out, d.Spilled...)
	kept := out[:0]
	for _, c := range out {
		if c.Runs > 0 {
			kept = append(kept, c)
		}
	}
	return kept, nil
}

// spilledRunIDs reads the ids chunks spilled runs with, each once.
func (l *Ledger) spilledRunIDs(ctx context.Context, scope string, chunks []spillChunk) ([]string, error) {
	if len(chunks) == 0 {
		return nil, nil
	}
	bs, err := readRecords(ctx, l, scope, "spilled run lists", chunks, func(c spillChunk) string { return runListBlob(c.N) })
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var ids []string
	for i, b := range bs {
		if b == nil {
			continue // retired meanwhile
		}
		var part []string
		if err := unmarshalRecord(b, &part); err != nil {
			return nil, fmt.Errorf("%w: scope %q: spilled run list %d: %w", ErrCorrupt, scope, chunks[i].N, err)
		}
		for _, id := range part {
			if !seen[id] {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	return ids, nil
}

// loadAllRuns puts every spilled run of d that retention keeps back into
// it, for the views that list runs, and takes out those retention dropped
// that no write has pruned yet, so that a view lists the same runs
// whether they spilled or not. It changes nothing in the store.
func (l *Ledger) loadAllRuns(ctx context.Context, d *document) error {
	if !d.spilledRuns() {
		return l.loadRuns(ctx, d, nil)
	}
	chunks, err := l.runChunks(ctx, d)
	if err != nil {
		return err
	}
	ids, err := l.spilledRunIDs(ctx, d.Scope, chunks)
	if err != nil {
		return err
	}
	return l.loadRuns(ctx, d, ids)
}

// loadRuns is loadAllRuns for the spilled runs among ids only (those a
// page names), one record each.
func (l *Ledger) loadRuns(ctx context.Context, d *document, ids []string) error {
	cutoff := l.now().Add(-l.opts.Retention)
	for id, r := range d.Runs {
		if runGone(r, cutoff) {
			delete(d.Runs, id)
		}
	}
	if !d.spilledRuns() {
		return nil
	}
	var want []string
	seen := map[string]bool{}
	for _, id := range ids {
		if id != "" && d.Runs[id] == nil && !seen[id] {
			seen[id] = true
			want = append(want, id)
		}
	}
	if len(want) == 0 {
		return nil
	}
	bs, err := readRecords(ctx, l, d.Scope, "spilled runs", want, runBlob)
	if err != nil {
		return err
	}
	runs, err := decodeRuns(d.Scope, want, bs)
	if err != nil {
		return err
	}
	for id, r := range runs {
		if r != nil && !runGone(r, cutoff) {
			d.Runs[id] = r
		}
	}
	return nil
}

// hasSpilledRun reports whether d's spilled runs hold run id, within
// retention.
func (l *Ledger) hasSpilledRun(ctx context.Context, d *document, id string) (bool, error) {
	if !d.spilledRuns() {
		return false, nil
	}
	b, err := l.store.ReadBlob(ctx, d.Scope, runBlob(id))
	if err != nil || b == nil {
		return false, err
	}
	runs, err := decodeRuns(d.Scope, []string{id}, [][]byte{b})
	if err != nil {
		return false, err
	}
	return !runGone(runs[id], l.now().Add(-l.opts.Retention)), nil
}

// retireRuns lists, for the chunks that retire, their run lists and the
// run records past retention, for deletion.
func (l *Ledger) retireRuns(ctx context.Context, scope string, old []spillChunk) (lists []uint64, gone []string, err error) {
	var withRuns []spillChunk
	for _, c := range old {
		if c.Runs > 0 {
			withRuns = append(withRuns, c)
			lists = append(lists, c.N)
		}
	}
	ids, err := l.spilledRunIDs(ctx, scope, withRuns)
	if err != nil || len(ids) == 0 {
		return lists, nil, err
	}
	bs, err := readRecords(ctx, l, scope, "spilled runs", ids, runBlob)
	if err != nil {
		return nil, nil, err
	}
	runs, err := decodeRuns(scope, ids, bs)
	if err != nil {
		return nil, nil, err
	}
	cutoff := l.now().Add(-l.opts.Retention)
	for _, id := range ids {
		// A record may since hold a newer spill of the same run: that
		// one stays.
		if r := runs[id]; r != nil && runGone(r, cutoff) {
			gone = append(gone, id)
		}
	}
	return lists, gone, nil
}
