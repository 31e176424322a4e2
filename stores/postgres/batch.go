package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/internal/groupcommit"
)

const (
	// DefaultMaxBatch is how many compare-and-set writes, to different
	// scopes, one group commit carries at most when Options.MaxBatch is
	// zero.
	DefaultMaxBatch = 32

	// DefaultBatchWindow is how long a queued write waits for others to
	// join it, while another write is already in flight, when
	// Options.BatchWindow is zero.
	DefaultBatchWindow = 500 * time.Microsecond

	// batchesInFlight bounds the group commits one Store has in flight at
	// once (never more than half its pool). More writes per commit beat
	// more commits at once: with gateway bench at 64 senders on a 2-CPU
	// machine, 1 or 2 in flight gave 0.31-0.35x the baseline, 4 gave 0.31x
	// and 8 gave 0.26-0.27x.
	batchesInFlight = 2
)

// pendingWrite is one Transact's compare-and-set.
type pendingWrite struct {
	scope    string
	expected int64
	w        *ledger.Write
}

// writeResult is its outcome: won with version, lost (ok false), refused
// because blobs it took as absent exist (present), or err.
type writeResult struct {
	version int64
	ok      bool
	present map[string][]byte
	err     error
}

// The group commit: concurrent compare-and-set writes to different scopes
// share one round trip and one transaction, so one WAL flush (one commit)
// serves many Transacts. It follows groupcommit's rules (a lone writer,
// with nothing else in flight, is sent at once; others queue for up to
// BatchWindow while a batch is in flight; two writes to one scope never
// share a batch), and these:
//
//   - Each caller is answered after the batch's commit has finished: it
//     either won its compare-and-set (the new version), lost it (it goes on
//     with Transact's usual retry), or a statement or the commit failed
//     and every caller in the batch gets the error, with nothing written
//     by any of them: it was one transaction.
//   - A document the server rejects (not JSON, not UTF-8: a data
//     exception) rolls the batch back; its writes are then sent alone, so
//     it fails only its own Transact, with the server's own message.
type batcher = groupcommit.Batcher[pendingWrite, writeResult]

func newBatcher(s *Store, maxBatch int, window time.Duration, maxInflight int) *batcher {
	return groupcommit.New(groupcommit.Options{MaxBatch: maxBatch, MaxInflight: maxInflight, AloneBelow: 1, Window: window},
		func(ctx context.Context, p pendingWrite) writeResult {
			r, err := s.write(ctx, s.pool, p.scope, p.expected, p.w)
			r.err = err
			return r
		},
		s.writeBatch,
		func(err error) writeResult { return writeResult{err: err} },
		func(a, b pendingWrite) bool { return a.scope == b.scope })
}

// groupWrite saves w if the scope's live row still has version expected,
// like Store.write, sharing a transaction with other scopes' writes when
// there are any to share with.
//
// Documents are not checked here before they join a batch: the ledger
// writes valid JSON, and scanning every document twice (UTF-8, then JSON)
// took 2.8 % of all the CPU of a queued gateway bench run on Postgres
// (load generator and sink included) once small bodies rode in the
// document (issue #29). A bad one is found by the server; see writeBatch.
func (s *Store) groupWrite(ctx context.Context, scope string, expected int64, w *ledger.Write) writeResult {
	return s.batch.Do(ctx, pendingWrite{scope: scope, expected: expected, w: w})
}

// writeBatch sends the batch's compare-and-sets, each the very statement a
// lone write would use, in one round trip as one implicit transaction (a
// pgx batch ends with a single Sync), so one commit serves them all, and
// records each one's outcome. The statements run in scope order, so two
// batches, from any processes, take their row locks in the same order and
// cannot deadlock each other.
func (s *Store) writeBatch(ctx context.Context, batch []*groupcommit.Item[pendingWrite, writeResult]) {
	slices.SortFunc(batch, func(a, b *groupcommit.Item[pendingWrite, writeResult]) int {
		return strings.Compare(a.Write.scope, b.Write.scope)
	})
	err := s.runBatch(ctx, batch)
	if err == nil {
		return
	}
	if dataException(err) {
		// A document the server rejected rolled the batch back: nothing
		// was written. Each write goes again alone, so only the bad one
		// fails.
		for _, it := range batch {
			r, err := s.write(ctx, s.pool, it.Write.scope, it.Write.expected, it.Write.w)
			r.err = err
			it.Result = r
		}
		return
	}
	if !retryable(err) {
		err = fmt.Errorf("group commit of %d writes: %w", len(batch), err)
	} else {
		// The whole transaction was rolled back: nothing was written,
		// and trying again is what a lost compare-and-set does.
		err = nil
	}
	for _, it := range batch {
		it.Result = writeResult{err: err}
	}
}

// runBatch sets each write's result. They count only if it returns nil:
// until the commit has succeeded nothing is written.
func (s *Store) runBatch(ctx context.Context, batch []*groupcommit.Item[pendingWrite, writeResult]) error {
	var b pgx.Batch
	for _, it := range batch {
		p := it.Write
		sql, args := s.writeArgs(p.scope, p.expected, p.w)
		b.Queue(sql, args...)
	}
	results := s.pool.SendBatch(ctx, &b)
	for _, it := range batch {
		var r writeResult
		var err error
		if checksAbsent(it.Write.expected, it.Write.w) {
			r, err = scanChecked(results.Query())
		} else {
			r, err = scanWrite(results.QueryRow())
		}
		if err != nil {
			_ = results.Close()
			return err
		}
		it.Result = r
	}
	// The commit happens at the batch's end: its failure shows here.
	return results.Close()
}

// retryable reports whether err is the server rolling a transaction back
// because of a deadlock or a serialization failure: nothing was written,
// and the write may simply be decided and tried again. Batches lock rows
// in scope order, which keeps them from deadlocking each other; the check
// stays as a safety net, since whatever the server rolls back this way
// wrote nothing.
func retryable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40P01" || pgErr.Code == "40001")
}

// dataException reports whether the server refused a value as such (SQL
// state class 22: json that does not parse, bytes that are not UTF-8).
func dataException(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "22")
}
