package bolt

// Commits reports how many commits the store has run and how many
// Transacts they carried.
func Commits(s *Store) (commits, carried int64) {
	return s.commit.commits.Load(), s.commit.carried.Load()
}

// Reruns reports how many Transact functions ran again inside a commit
// because their document had changed since they were prepared.
func Reruns(s *Store) int64 { return s.commit.reruns.Load() }
