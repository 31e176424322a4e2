package postgres

// GroupCommits reports how many transactions carried more than one write
// and how many writes they carried, since the store was made.
func GroupCommits(s *Store) (batches, writes int64) { return s.batch.Stats() }

// HoldBatches makes the store behave as if every batch slot were busy:
// writes queue and none is sent until the returned function is called.
func HoldBatches(s *Store) (release func()) { return s.batch.Hold() }

// QueuedWrites returns how many writes are waiting to be sent.
func QueuedWrites(s *Store) int { return s.batch.Queued() }
