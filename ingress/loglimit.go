package ingress

import (
	"sync"
	"time"
)

// logLimiter bounds the lines logged for one kind of refusal per source
// (401s, 413s): a prober sending bad signatures in a loop must not fill
// the disk, yet the first lines of a burst, with their reason, still show.
type logLimiter struct {
	mu      sync.Mutex
	per     time.Duration
	burst   int
	windows map[string]*logWindow
}

type logWindow struct {
	start      time.Time
	logged     int
	suppressed int
}

// logLinesPerWindow and logWindowLength: at most 10 lines a minute per
// source and status.
const (
	logLinesPerWindow = 10
	logWindowLength   = time.Minute
	// maxLogWindows caps the limiter's memory; sources are configured,
	// so this is reached only if statuses multiply.
	maxLogWindows = 4096
)

func newLogLimiter() *logLimiter {
	return &logLimiter{per: logWindowLength, burst: logLinesPerWindow, windows: map[string]*logWindow{}}
}

// allow reports whether a line for key may be logged now and, when it
// may, how many lines for key were suppressed since the last one logged.
func (l *logLimiter) allow(key string, now time.Time) (ok bool, suppressed int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	w := l.windows[key]
	if w == nil {
		if len(l.windows) >= maxLogWindows {
			clear(l.windows)
		}
		w = &logWindow{start: now}
		l.windows[key] = w
	}
	if now.Sub(w.start) >= l.per {
		w.start, w.logged = now, 0
	}
	if w.logged >= l.burst {
		w.suppressed++
		return false, 0
	}
	w.logged++
	suppressed, w.suppressed = w.suppressed, 0
	return true, suppressed
}
