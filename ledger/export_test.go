package ledger

// ReplayCacheLen reports how many committed entries l remembers.
func ReplayCacheLen(l *Ledger) int { return l.replays.len() }
