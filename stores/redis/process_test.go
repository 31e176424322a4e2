package redis

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/storetest"
)

// The cross-process tests re-execute this test binary; these variables tell
// the child what to do.
const (
	helperModeEnv   = "REPLYONCE_REDIS_HELPER"        // "counter" or "once"
	helperPrefixEnv = "REPLYONCE_REDIS_HELPER_PREFIX" // the parent's key prefix
)

const (
	procs          = 4
	procGoroutines = 4
	procScopes     = 3
	procRounds     = 20 // counter mode: increments per goroutine per scope
	// procKeys is the once mode's effects per scope: more than the 24
	// settled effects at which a scope's oldest leave its document, so
	// that claims race the moves and the write's check that what they
	// name has no record (ledger.Write.Absent).
	procKeys = 60
)

// TestHelperProcess is the child's entry point; run directly it skips.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperModeEnv)
	if mode == "" {
		t.Skip("helper for the cross-process tests; it runs only when re-executed by them")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	prefix := os.Getenv(helperPrefixEnv)
	s, err := Open(ctx, testURL(t), Options{KeyPrefix: prefix, MaxRetries: 100000})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	switch mode {
	case "counter":
		var wg sync.WaitGroup
		for range procGoroutines {
			wg.Go(func() {
				for range procRounds {
					for i := range procScopes {
						if err := increment(ctx, s, fmt.Sprintf("scope-%d", i)); err != nil {
							t.Error(err)
							return
						}
					}
				}
			})
		}
		wg.Wait()
	case "once":
		var executed, replayed, inflight atomic.Int64
		l := ledger.New(s, ledger.Options{})
		effect := func(scope string, n int) ledger.Effect {
			return func(ctx context.Context, _ ledger.Call) (any, error) {
				// Counted outside the ledger and outside this process.
				return nil, s.client.Incr(ctx, fmt.Sprintf("%seffects:%s:%d", prefix, scope, n)).Err()
			}
		}
		var wg sync.WaitGroup
		for range procGoroutines {
			wg.Go(func() {
				for n := range procKeys {
					for i := range procScopes {
						scope := fmt.Sprintf("conv-%d", i)
						key := ledger.Key{Scope: scope, Intent: "reply", Payload: map[string]any{"n": n}}
						if !onceUntilSettled(ctx, t, l, key, effect(scope, n), &executed, &replayed, &inflight) {
							return
						}
					}
				}
			})
		}
		wg.Wait()
		fmt.Printf("executed=%d\nreplayed=%d in_flight=%d\n", executed.Load(), replayed.Load(), inflight.Load())
	case "queue":
		l := ledger.New(s, ledger.Options{})
		err := storetest.QueueChild(ctx, l, func(ctx context.Context, id string) error {
			return s.client.Incr(ctx, prefix+"takes:"+id).Err()
		})
		if err != nil {
			t.Fatal(err)
		}
	default:
		t.Fatalf("unknown %s %q", helperModeEnv, mode)
	}
}

// onceUntilSettled calls Once until the effect is known to have run, here
// or elsewhere, waiting out other processes' attempts in flight.
func onceUntilSettled(ctx context.Context, t *testing.T, l *ledger.Ledger, key ledger.Key, effect ledger.Effect, executed, replayed, inflight *atomic.Int64) bool {
	for {
		res, err := l.Once(ctx, key, effect)
		switch {
		case err != nil:
			t.Errorf("Once(%v): %v", key, err)
			return false
		case res.Status == ledger.StatusExecuted:
			executed.Add(1)
			return true
		case res.Status == ledger.StatusReplayed:
			replayed.Add(1)
			return true
		case res.Status == ledger.StatusInFlight:
			inflight.Add(1)
			time.Sleep(2 * time.Millisecond)
		default:
			t.Errorf("Once(%v) = %+v", key, res)
			return false
		}
	}
}

// runChildren runs procs copies of this test binary in helper mode and
// returns their outputs.
func runChildren(t *testing.T, mode, prefix string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmds := make([]*exec.Cmd, procs)
	outs := make([]*bytes.Buffer, procs)
	for i := range cmds {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1", "-test.v")
		cmd.Env = append(os.Environ(), helperModeEnv+"="+mode, helperPrefixEnv+"="+prefix)
		outs[i] = &bytes.Buffer{}
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		cmds[i] = cmd
	}
	var texts []string
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			t.Errorf("child %d: %v\n%s", i, err, outs[i])
		}
		texts = append(texts, outs[i].String())
	}
	if t.Failed() {
		t.FailNow()
	}
	return texts
}

func TestCrossProcessIncrements(t *testing.T) {
	s, _ := newTestStore(t, Options{})
	runChildren(t, "counter", s.prefix)
	ctx := ctxT(t)
	for i := range procScopes {
		doc, err := s.Read(ctx, fmt.Sprintf("scope-%d", i))
		if err != nil {
			t.Fatal(err)
		}
		if got, want := decodeCounter(t, doc).N, procs*procGoroutines*procRounds; got != want {
			t.Errorf("scope-%d: counter = %d; want %d", i, got, want)
		}
	}
}

var (
	executedLine = regexp.MustCompile(`(?m)^executed=(\d+)$`)
	replayedLine = regexp.MustCompile(`(?m)^replayed=.*$`)
)

// Processes race ledger.Once on the same keys; every effect must run
// exactly once, as counted in Redis outside the ledger.
func TestCrossProcessOnce(t *testing.T) {
	s, c := newTestStore(t, Options{})
	outs := runChildren(t, "once", s.prefix)
	total := 0
	for i, out := range outs {
		m := executedLine.FindStringSubmatch(out)
		if m == nil {
			t.Fatalf("child %d printed no executed count:\n%s", i, out)
		}
		n, _ := strconv.Atoi(m[1])
		total += n
		t.Logf("child %d: %s", i, strings.Join(strings.Fields(m[0]+" "+strings.TrimSpace(replayedLine.FindString(out))), " "))
	}
	if total != procScopes*procKeys {
		t.Errorf("children report %d executions; want %d", total, procScopes*procKeys)
	}
	ctx := ctxT(t)
	for i := range procScopes {
		for n := range procKeys {
			key := fmt.Sprintf("%seffects:conv-%d:%d", s.prefix, i, n)
			got, err := c.Get(ctx, key).Int()
			if err != nil || got != 1 {
				t.Errorf("%s = %d (%v); want exactly 1", key, got, err)
			}
		}
	}
}

// Processes enqueue the same events and dispatch them from one Redis; each
// event is taken exactly once (counted in Redis outside the ledger),
// because a take is a lease.
func TestCrossProcessQueue(t *testing.T) {
	s, c := newTestStore(t, Options{})
	runChildren(t, "queue", s.prefix)
	ctx := ctxT(t)
	for i := range storetest.QueueEvents {
		key := s.prefix + "takes:" + storetest.QueueEventID(i)
		if got, err := c.Get(ctx, key).Int(); err != nil || got != 1 {
			t.Errorf("%s = %d (%v); want exactly 1", key, got, err)
		}
	}
}
