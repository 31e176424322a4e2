package bolt

// Commits reports how many commits the store has run and how many
// Transacts they carried.
func Commits(s *Store) (commits, carried int64) {
	return s.commit.commits.Load(), s.commit.carried.Load()
}
