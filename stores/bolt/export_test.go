package bolt

// Commits reports how many commits the store has run and how many
// Transacts they carried.
func Commits(s *Store) (commits, carried int64) {
	return s.commit.commits.Load(), s.commit.carried.Load()
}

// Reruns reports how many Transact functions ran inside a commit: not
// prepared, or prepared on a document that changed before the commit.
func Reruns(s *Store) int64 { return s.commit.reruns.Load() }

// Queued reports how many Transacts wait for the next commit.
func Queued(s *Store) int {
	s.commit.mu.Lock()
	defer s.commit.mu.Unlock()
	return len(s.commit.queue)
}

// PrepareReads reports how many documents prepare read from the file, not
// finding them among those last written or read.
func PrepareReads(s *Store) int64 { return s.commit.prepareReads.Load() }

// ForgetDocs empties the store's cache of documents last written or read.
func ForgetDocs(s *Store) { s.docs.clear() }
