package postgres_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/postgres"
	"github.com/replyonce/gateway/stores/storetest"
)

// The cross-process tests re-run this test binary as several OS processes
// that race on the same rows through stores of their own, as gateway
// instances behind a load balancer do. These environment variables tell a
// child what to do; a normal run sees none of them.
const (
	helperMode    = "REPLYONCE_PG_HELPER"         // "increments" or "once"
	helperTable   = "REPLYONCE_PG_HELPER_TABLE"   // the store's table
	helperEffects = "REPLYONCE_PG_HELPER_EFFECTS" // where "once" records each effect it runs
	helperProc    = "REPLYONCE_PG_HELPER_PROC"    // the child's number
)

const (
	procs        = 4
	procRoutines = 6
	procScopes   = 3
	procEach     = 12 // increments per goroutine per scope
	// onceKeys is the "once" run's effects per scope: more than the 24
	// settled effects at which a scope's oldest leave its document, so
	// that claims race the moves and the write's check that what they
	// name has no record (ledger.Write.Absent).
	onceKeys = 60
)

// runChildren starts procs copies of the test binary in the given mode,
// lets them go at once (by closing their stdin) and waits for all of them.
// It returns each child's stdout.
func runChildren(t *testing.T, mode string, env ...string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var (
		cmds   []*exec.Cmd
		outs   []*bytes.Buffer
		starts []io.WriteCloser
	)
	for p := range procs {
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1", "-test.timeout=3m")
		cmd.Env = append(os.Environ(), append([]string{helperMode + "=" + mode, helperProc + "=" + strconv.Itoa(p)}, env...)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatalf("start child %d: %v", p, err)
		}
		cmds, outs, starts = append(cmds, cmd), append(outs, &out), append(starts, in)
	}
	for _, in := range starts {
		_ = in.Close()
	}
	var failed bool
	for p, cmd := range cmds {
		if err := cmd.Wait(); err != nil {
			failed = true
			t.Errorf("child %d: %v\n%s", p, err, outs[p])
		}
	}
	if failed {
		t.FailNow()
	}
	res := make([]string, len(outs))
	for i, o := range outs {
		res[i] = o.String()
	}
	return res
}

// TestCrossProcessIncrements: every child increments the same counters
// from several goroutines; a lost update in any process, or an increment
// applied twice, shows as a wrong total.
func TestCrossProcessIncrements(t *testing.T) {
	pool := newPool(t, testDSN(t), 0)
	table := newTable(t, pool)
	runChildren(t, "increments", helperTable+"="+table)
	s := postgres.New(pool, postgres.Options{Table: table})
	for i := range procScopes {
		scope := fmt.Sprintf("counter-%d", i)
		if got, want := decodeCounter(t, mustRead(t, s, scope)).N, procs*procRoutines*procEach; got != want {
			t.Errorf("%s = %d, want %d", scope, got, want)
		}
	}
}

// TestCrossProcessOnce races ledger.Once on the same keys from every child.
// Each effect inserts a row into a table outside the ledger; each key must
// have exactly one row, and exactly one Once call in all processes must
// have reported executed for it.
func TestCrossProcessOnce(t *testing.T) {
	pool := newPool(t, testDSN(t), 0)
	table := newTable(t, pool)
	schema, _, _ := strings.Cut(table, ".")
	effects := schema + ".effects"
	ctx := testContext(t)
	if _, err := pool.Exec(ctx, "CREATE TABLE "+quote(effects)+" (key text NOT NULL, proc int NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	outs := runChildren(t, "once", helperTable+"="+table, helperEffects+"="+effects)

	executed := 0
	for _, out := range outs {
		for line := range strings.Lines(out) {
			if n, ok := strings.CutPrefix(strings.TrimSpace(line), "EXECUTED "); ok {
				v, _ := strconv.Atoi(n)
				executed += v
			}
		}
	}
	if want := procScopes * onceKeys; executed != want {
		t.Errorf("%d Once calls reported executed, want %d (one per key)\n%s", executed, want, strings.Join(outs, "\n"))
	}
	rows, err := pool.Query(ctx, "SELECT key, count(*) FROM "+quote(effects)+" GROUP BY key")
	if err != nil {
		t.Fatal(err)
	}
	counts := map[string]int{}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		counts[k] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for i := range procScopes {
		for k := range onceKeys {
			key := onceKeyName(i, k)
			if counts[key] != 1 {
				t.Errorf("effect %s ran %d times, want once", key, counts[key])
			}
		}
	}
	if len(counts) != procScopes*onceKeys {
		t.Errorf("%d distinct effects ran, want %d", len(counts), procScopes*onceKeys)
	}
}

// TestCrossProcessQueue: processes enqueue the same events and dispatch
// them from one table; each event is taken exactly once (counted in a
// table outside the ledger), because a take is a lease.
func TestCrossProcessQueue(t *testing.T) {
	pool := newPool(t, testDSN(t), 0)
	table := newTable(t, pool)
	schema, _, _ := strings.Cut(table, ".")
	effects := schema + ".takes"
	ctx := testContext(t)
	if _, err := pool.Exec(ctx, "CREATE TABLE "+quote(effects)+" (key text NOT NULL, proc int NOT NULL)"); err != nil {
		t.Fatal(err)
	}
	runChildren(t, "queue", helperTable+"="+table, helperEffects+"="+effects)
	counts := map[string]int{}
	rows, err := pool.Query(ctx, "SELECT key, count(*) FROM "+quote(effects)+" GROUP BY key")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var k string
		var n int
		if err := rows.Scan(&k, &n); err != nil {
			t.Fatal(err)
		}
		counts[k] = n
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for i := range storetest.QueueEvents {
		if id := storetest.QueueEventID(i); counts[id] != 1 {
			t.Errorf("event %s was taken %d times, want once", id, counts[id])
		}
	}
}

func onceKeyName(scope, key int) string { return fmt.Sprintf("scope-%d/reply-%d", scope, key) }

// TestHelperProcess is the child side of the cross-process tests.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperMode)
	if mode == "" {
		t.Skip("child of the cross-process tests; runs only when they start it")
	}
	proc, _ := strconv.Atoi(os.Getenv(helperProc))
	pool := newPool(t, testDSN(t), procRoutines+2)
	s := postgres.New(pool, postgres.Options{Table: os.Getenv(helperTable)})
	// Connected and ready: wait for the parent's go.
	_, _ = io.Copy(io.Discard, os.Stdin)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	errs := make(chan error, procRoutines)
	switch mode {
	case "increments":
		for g := range procRoutines {
			wg.Go(func() {
				for i := range procEach * procScopes {
					scope := fmt.Sprintf("counter-%d", (i+g+proc)%procScopes)
					if err := s.Transact(ctx, scope, incr("")); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	case "queue":
		effects := quote(os.Getenv(helperEffects))
		l := ledger.New(s, ledger.Options{})
		err := storetest.QueueChild(ctx, l, func(ctx context.Context, id string) error {
			_, err := pool.Exec(ctx, "INSERT INTO "+effects+" (key, proc) VALUES ($1, $2)", id, proc)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	case "once":
		executed := runOnce(ctx, t, s, pool, proc, &wg, errs)
		defer func() { fmt.Printf("EXECUTED %d\n", executed()) }()
	default:
		t.Fatalf("unknown helper mode %q", mode)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// runOnce starts the child's goroutines for TestCrossProcessOnce and
// returns a function reporting how many Once calls in this process said
// executed, to be called after wg.Wait.
func runOnce(ctx context.Context, t *testing.T, s *postgres.Store, pool *pgxpool.Pool, proc int, wg *sync.WaitGroup, errs chan<- error) func() int {
	l := ledger.New(s, ledger.Options{})
	effects := quote(os.Getenv(helperEffects))
	var mu sync.Mutex
	executed := 0
	for g := range procRoutines {
		wg.Go(func() {
			for i := range procScopes * onceKeys {
				// Each goroutine walks the keys from a different place, so
				// claims on one scope collide from every side.
				n := (i*7 + g*13 + proc*29) % (procScopes * onceKeys)
				scope, k := n%procScopes, n/procScopes
				key := ledger.Key{
					Scope:   fmt.Sprintf("conversation-%d", scope),
					Intent:  "reply",
					Payload: map[string]any{"n": k},
				}
				name := onceKeyName(scope, k)
				res, err := l.Once(ctx, key, func(ctx context.Context, _ ledger.Call) (any, error) {
					if _, err := pool.Exec(ctx, "INSERT INTO "+effects+" (key, proc) VALUES ($1, $2)", name, proc); err != nil {
						return nil, ledger.NotApplied(err)
					}
					return map[string]any{"by": proc}, nil
				})
				if err != nil {
					errs <- fmt.Errorf("once %s: %w", name, err)
					return
				}
				switch res.Status {
				case ledger.StatusExecuted:
					mu.Lock()
					executed++
					mu.Unlock()
				case ledger.StatusReplayed, ledger.StatusInFlight:
				default:
					errs <- fmt.Errorf("once %s: unexpected result %s %s", name, res.Status, res.Reason)
					return
				}
			}
		})
	}
	return func() int {
		mu.Lock()
		defer mu.Unlock()
		return executed
	}
}
