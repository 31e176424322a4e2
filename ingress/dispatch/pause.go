package dispatch

// PauseNow stops this process's deliveries of source at once, as the
// admin API's pause does once the pause is recorded, and a source that
// pauses itself (forward.pause_after) does too (the store's record
// is what every process, this one at its next sweep, goes by): no
// delivery is handed over or taken from here on, and a held delivery that
// has not started its forward goes back to the queue unsent. A resume
// (paused false) only wakes the sweep, which unparks the source's
// deliveries as it finds the record changed.
func (d *Dispatcher) PauseNow(source string, paused bool) {
	s := d.sources[source]
	if s == nil {
		return
	}
	if paused {
		d.mu.Lock()
		s.paused = true
		s.pausedNow.Store(true)
		d.mu.Unlock()
	}
	// The sweep reads the record again rather than the copy it holds,
	// which would undo the pause (or miss the resume) until it is a Poll
	// old.
	d.rereadPaused.Store(true)
	d.Notify()
}
