package ledger

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
	"time"
)

// A trial is a queued event sent once more, to another URL than its
// source's agent (a staging agent with a fix), at an operator's request.
// It is recorded beside the item's attempts and changes nothing else: not
// the item's status, its place in the retry schedule, its runs or its
// fencing tokens. The trial's request carries no live run: see
// TrialRunID.

// trialBlob names the record of an item's n-th trial.
func trialBlob(nonce string, n int) string { return "t:" + nonce + ":" + strconv.Itoa(n) }

// TrialRunID is the run id a trial's request carries: not a run of the
// scope, and sent with fencing token 0, so an agent that writes through
// the ledger with it is refused (unknown run) instead of acting on the
// real conversation from a staging copy.
func TrialRunID(q QueueItem) string {
	return "trial:" + q.Source + ":" + q.EventID
}

// CheckTrialURL says why to cannot take a trial: it must be an absolute
// http or https URL.
func CheckTrialURL(to string) error {
	u, err := url.Parse(to)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: to: %q is not an http:// or https:// URL", ErrInvalid, to)
	}
	return nil
}

// RecordTrial keeps the record of a trial of the queued delivery entryID
// on scope, numbered after the item's earlier trials, and returns it as
// kept. rec.To must name where the event went.
func (qu Queue) RecordTrial(ctx context.Context, scope, entryID string, rec AttemptRecord) (AttemptRecord, error) {
	l := qu.l
	if scope == "" || entryID == "" {
		return AttemptRecord{}, fmt.Errorf("%w: scope and entry id are required", ErrInvalid)
	}
	if err := CheckTrialURL(rec.To); err != nil {
		return AttemptRecord{}, err
	}
	// A finished item may have left the document with its entry
	// (spill.go): the lookup puts both back, and the trial's count keeps
	// them there.
	err := l.transactEntry(ctx, scope, lookup{ids: []string{entryID}, lazy: true}, func(d *document, now time.Time, blobs *blobSet) (bool, error) {
		q := d.Queue[entryID]
		if q == nil {
			return false, fmt.Errorf("%w: no queued delivery %q on scope %q", ErrUnknownEntry, entryID, scope)
		}
		if q.Inline {
			return false, fmt.Errorf("%s %s: %w", q.Source, q.EventID, ErrInline)
		}
		q.Trials++
		rec.N = q.Trials
		if rec.At.IsZero() {
			rec.At = now
		}
		b, err := marshalRecord(rec)
		if err != nil {
			return false, fmt.Errorf("%w: trial record: %v", ErrInvalid, err)
		}
		blobs.set(trialBlob(q.Blob, rec.N), b)
		return true, nil
	})
	if err != nil {
		return AttemptRecord{}, err
	}
	return rec, nil
}
