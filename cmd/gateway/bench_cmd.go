package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"

	"github.com/replyonce/gateway/cmd/gateway/internal/bench"
	"github.com/replyonce/gateway/ingress/dispatch"
)

// bench measures the gateway against a bare reverse proxy on loopback; see
// package bench for what it runs and how it counts.
func (a *App) bench(ctx context.Context, args []string) error {
	fs := a.flags("bench")
	var c bench.Config
	fs.StringVar(&c.Store, "store", "memory", "ledger store: memory | bolt | postgres | redis")
	fs.StringVar(&c.Provider, "provider", "stripe", "how events are signed: stripe | standard-webhooks")
	fs.StringVar(&c.Mode, "mode", "inline", "the bench source's forward.mode: inline | queued (queued passes also wait for and report the dispatcher's drain)")
	fs.IntVar(&c.DispatchConcurrency, "dispatch-concurrency", 0, "forward.concurrency in queued mode (default 16)")
	fs.DurationVar(&c.AcceptWait, "accept-wait", dispatch.DefaultAcceptWait, "forward.accept_wait in queued mode (0s: accepts never wait for the dispatcher)")
	fs.IntVar(&c.Backlog, "backlog", 0, "queued mode: accept this many events with dispatch paused, then resume and time the drain to the sink; then --n events inline on the same store kind, for comparison")
	fs.Func("long-scope", "comma-separated lengths, e.g. 10,1000,10000: seed one conversation per length with that many settled effects, then time --n webhooks into each, one at a time (issue #34)", func(v string) error {
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				return fmt.Errorf("length %q is not a number", f)
			}
			c.LongScope = append(c.LongScope, n)
		}
		return nil
	})
	fs.BoolVar(&c.LongScopeWaiting, "long-scope-waiting", false, "with --long-scope and --mode queued: seed items waiting behind a held delivery under order: scope instead of settled effects")
	fs.IntVar(&c.Requests, "n", bench.DefaultRequests, "requests per full-speed pass")
	fs.IntVar(&c.HalfLoad, "half-n", 0, "requests per half-load pass (default n/2; negative skips the half-load passes)")
	fs.IntVar(&c.Concurrency, "concurrency", bench.DefaultConcurrency, "concurrent senders")
	fs.Float64Var(&c.Duplicates, "duplicates", 0.2, "fraction of requests that are redeliveries of earlier events")
	fs.IntVar(&c.BodySize, "body-size", bench.DefaultBodySize, "approximate event size in bytes")
	fs.Float64Var(&c.Rate, "rate", 0, "offered load of the half-load passes in req/s (default: half the gateway's measured peak)")
	fs.IntVar(&c.Repeat, "repeat", 1, "how many times to run the passes, to show the spread")
	fs.IntVar(&c.Slice, "slice", bench.DefaultSlice, "requests per target before the next target's turn (negative: no interleaving)")
	fs.BoolVar(&c.SignForward, "sign-forward", true, "sign forwarded requests (forward.signing_secret)")
	fs.BoolVar(&c.KeepBody, "keep-body", false, "forward.keep_body on the bench source (inline events keep their body in the store)")
	fs.StringVar(&c.Log, "log", "devnull", "gateway request log: devnull (zap JSON at info to /dev/null) | none")
	fs.StringVar(&c.PostgresDSN, "postgres", "", "PostgreSQL DSN (default $REPLYONCE_TEST_POSTGRES)")
	fs.IntVar(&c.PostgresPool, "postgres-pool", 0, "pgx pool size (default: the DSN's pool_max_conns, else 32, as serve)")
	fs.StringVar(&c.RedisURL, "redis", "", "Redis URL (default $REPLYONCE_TEST_REDIS)")
	fs.StringVar(&c.Dir, "dir", "", "directory for the bolt file (default: the system temp directory)")
	fs.Uint64Var(&c.Seed, "seed", 1, "seed for picking redeliveries")
	jsonOut := fs.Bool("json", false, "print the report as JSON")
	quiet := fs.Bool("quiet", false, "no progress lines on stderr")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to FILE; samples carry a label part=generator|proxy|gateway|sink (go tool pprof -tagfocus part=gateway)")
	if err := parse(fs, args); err != nil {
		return err
	}
	if c.PostgresDSN == "" {
		c.PostgresDSN, _ = a.LookupEnv("REPLYONCE_TEST_POSTGRES")
	}
	if c.RedisURL == "" {
		c.RedisURL, _ = a.LookupEnv("REPLYONCE_TEST_REDIS")
	}
	if err := c.Validate(); err != nil {
		return usageError{err.Error()}
	}
	if !*quiet {
		c.Progress = a.Stderr
	}
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return fmt.Errorf("--cpuprofile: %w", err)
		}
		defer pprof.StopCPUProfile()
	}
	if len(c.LongScope) > 0 {
		rep, err := bench.RunLongScope(ctx, c)
		if rep == nil {
			return err
		}
		return a.writeBenchReport(rep, *jsonOut, err)
	}
	if c.Backlog > 0 {
		rep, err := bench.RunBacklog(ctx, c)
		if rep == nil {
			return err
		}
		return a.writeBenchReport(rep, *jsonOut, err)
	}
	rep, err := bench.Run(ctx, c)
	if rep == nil {
		return err
	}
	return a.writeBenchReport(rep, *jsonOut, err)
}

// benchReport is what both kinds of bench run print.
type benchReport interface {
	WriteJSON(io.Writer) error
	WriteTable(io.Writer) error
}

// writeBenchReport prints rep as JSON or a table; a run's own error wins
// over a failed write.
func (a *App) writeBenchReport(rep benchReport, asJSON bool, runErr error) error {
	var err error
	if asJSON {
		err = rep.WriteJSON(a.Stdout)
	} else {
		err = rep.WriteTable(a.Stdout)
	}
	if err != nil && runErr == nil {
		runErr = fmt.Errorf("bench: write report: %w", err)
	}
	return runErr
}
