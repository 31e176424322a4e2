package postgres

// GroupCommits reports how many statements carried more than one write and
// how many writes they carried, since the store was made.
func GroupCommits(s *Store) (batches, writes int64) {
	return s.batch.batches.Load(), s.batch.grouped.Load()
}

// HoldBatches makes the store behave as if every batch slot were busy:
// writes queue and none is sent until the returned function is called.
func HoldBatches(s *Store) (release func()) {
	b := s.batch
	b.mu.Lock()
	b.inflight += b.maxInflight
	b.mu.Unlock()
	return func() {
		b.mu.Lock()
		b.inflight -= b.maxInflight
		b.wakeLocked()
		b.mu.Unlock()
	}
}

// QueuedWrites returns how many writes are waiting to be sent.
func QueuedWrites(s *Store) int {
	s.batch.mu.Lock()
	defer s.batch.mu.Unlock()
	return len(s.batch.queue)
}
