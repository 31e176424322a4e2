package ledgerapi

import "time"

// WithInlineSources names the sources that deliver inline: pausing one is
// refused 400 invalid_request, since pause applies to queued delivery
// (an inline source's events wait in the provider's retries, not in the
// store).
func WithInlineSources(names []string) Option {
	return func(s *server) {
		s.inline = make(map[string]bool, len(names))
		for _, n := range names {
			s.inline[n] = true
		}
	}
}

// WithPauseHook calls hook after a pause or resume is recorded and before
// it is answered: the gateway stops its own dispatcher's deliveries of a
// paused source at once, so that none starts on this instance once the
// caller has the answer.
func WithPauseHook(hook func(source string, paused bool)) Option {
	return func(s *server) { s.onPause = hook }
}

// WithPauseWait makes a pause wait, after the hook, until every live
// dispatcher on the store has stopped the source (ledger.Sources.WaitPaused), for
// at most maxWait, and answer which did. Zero: no wait.
func WithPauseWait(maxWait time.Duration) Option {
	return func(s *server) { s.pauseWait = maxWait }
}
