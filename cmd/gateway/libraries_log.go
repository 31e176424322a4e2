package main

import (
	"context"
	"fmt"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/zap"
)

// redisLogger sends go-redis's own messages (reconnects, pool trouble)
// through the gateway's logger at warn, instead of raw lines on stderr
// that no JSON log pipeline can parse.
type redisLogger struct{ log *zap.Logger }

func (l redisLogger) Printf(_ context.Context, format string, v ...any) {
	l.log.Warn(fmt.Sprintf(format, v...))
}

// routeLibraryLogs points the store libraries' logging at log. go-redis
// has only a process-wide logger, so serve, the one command that runs a
// long-lived store, sets it once at start. pgx logs nothing unless given
// a tracer, so it needs nothing.
func routeLibraryLogs(log *zap.Logger) {
	goredis.SetLogger(redisLogger{log.Named("go-redis")})
}
