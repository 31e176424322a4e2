package postgres

import "github.com/replyonce/gateway/ledger"

// GroupCommits reports how many transactions carried more than one write
// and how many writes they carried, since the store was made.
func GroupCommits(s *Store) (batches, writes int64) { return s.batch.Stats() }

// HoldBatches makes the store behave as if every batch slot were busy:
// writes queue and none is sent until the returned function is called.
func HoldBatches(s *Store) (release func()) { return s.batch.Hold() }

// QueuedWrites returns how many writes are waiting to be sent.
func QueuedWrites(s *Store) int { return s.batch.Queued() }

// GroupedReads reports how many statements carried more than one read and
// how many reads they carried, since the store was made.
func GroupedReads(s *Store) (batches, reads int64) { return s.reads.Stats() }

// HoldReads makes the store behave as if every read slot were busy: reads
// through the pool queue and none is sent until release is called.
func HoldReads(s *Store) (release func()) { return s.reads.Hold() }

// QueuedReads returns how many reads are waiting to be sent.
func QueuedReads(s *Store) int { return s.reads.Queued() }

// WriteStatement is the statement and arguments that save w for scope if
// its live row still has version expected.
func WriteStatement(s *Store, scope string, expected int64, w *ledger.Write) (string, []any) {
	return s.writeArgs(scope, expected, w)
}
