package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// libraryLogEvery is how often one message of a store library reaches the
// log: a Redis that is down makes go-redis log every failed dial of its
// pool (dozens of lines in ten seconds), while the gateway already logs the
// outage itself, once per backoff step.
const libraryLogEvery = 30 * time.Second

// redisLogger sends go-redis's own messages (reconnects, pool trouble)
// through the gateway's logger at warn, instead of raw lines on stderr
// that no JSON log pipeline can parse, and each distinct message at most
// once per libraryLogEvery, with how many were left out since.
type redisLogger struct {
	log *zap.Logger
	now func() time.Time

	mu   sync.Mutex
	seen map[string]*libraryMessage
}

type libraryMessage struct {
	at         time.Time
	suppressed int
}

// maxLibraryMessages bounds the messages remembered: past it the memory
// starts afresh, which at worst lets a message through early.
const maxLibraryMessages = 256

func newRedisLogger(log *zap.Logger, now func() time.Time) *redisLogger {
	return &redisLogger{log: log, now: now, seen: map[string]*libraryMessage{}}
}

func (l *redisLogger) Printf(_ context.Context, format string, v ...any) {
	msg := fmt.Sprintf(format, v...)
	now := l.now()
	l.mu.Lock()
	m := l.seen[msg]
	if m != nil && now.Sub(m.at) < libraryLogEvery {
		m.suppressed++
		l.mu.Unlock()
		return
	}
	suppressed := 0
	if m != nil {
		suppressed = m.suppressed
	}
	if len(l.seen) >= maxLibraryMessages {
		clear(l.seen)
	}
	l.seen[msg] = &libraryMessage{at: now}
	l.mu.Unlock()
	if suppressed > 0 {
		l.log.Warn(msg, zap.Int("repeats_left_out", suppressed))
		return
	}
	l.log.Warn(msg)
}

// routeLibraryLogs points the store libraries' logging at log. go-redis
// has only a process-wide logger, so serve, the one command that runs a
// long-lived store, sets it once at start. pgx logs nothing unless given
// a tracer, so it needs nothing.
func routeLibraryLogs(log *zap.Logger, now func() time.Time) {
	goredis.SetLogger(newRedisLogger(log.Named("go-redis"), now))
}
