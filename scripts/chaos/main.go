//go:build unix

// Command chaos runs the gateway binary against the real stores (bolt,
// Postgres, Redis) while it breaks things: gateway processes killed,
// stopped and terminated, the store stalled and cut through a TCP relay
// it controls, the agent failing in every way an agent fails, the Redis
// server killed. A provider sends signed Standard Webhooks events
// throughout, and a recording agent holds what it receives to the
// invariants (see Check): nothing acknowledged lost, no attempt twice
// with one fencing token, order kept per scope, Replyonce-Covers exact.
//
//	go run ./scripts/chaos -short     # the CI set, a minute or two
//	go run ./scripts/chaos            # the long set
//	go run ./scripts/chaos -run kill -stores redis
//
// It prints a table (scenario, store, sent, acknowledged, delivered,
// lost, duplicates) and exits non-zero when any invariant broke. Ports
// come from REPLYONCE_TEST_PORTS (loopback only); Postgres from
// REPLYONCE_TEST_POSTGRES, a table of each run's own, dropped after; Redis
// is a server of the run's own, with persistence on. docs/chaos.md says
// what each scenario does.
//
// It runs on Unix only: it stops and continues gateway processes with
// SIGSTOP and SIGCONT, and starts its servers through stores/testservers.
package main

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/replyonce/gateway/stores"
	"github.com/replyonce/gateway/stores/testservers"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "chaos:", err)
		os.Exit(1)
	}
}

// options are the command's flags.
type options struct {
	short    bool
	runRE    *regexp.Regexp
	stores   []string
	bin      string
	postgres string
	// urls are the servers of the store kinds that have one.
	urls  map[string]string
	keep  bool
	ports *Ports
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("chaos", flag.ContinueOnError)
	short := fs.Bool("short", false, "the short set (CI): fewer scenarios, fewer events, shorter faults")
	runPat := fs.String("run", "", "only the scenarios whose name matches this regular expression")
	storeList := fs.String("stores", "bolt,postgres,redis", "stores to run on")
	bin := fs.String("gateway", "", "a gateway binary to test (default: go build ./cmd/gateway)")
	sequential := fs.Bool("sequential", false, "run one scenario at a time (default: the stores side by side)")
	keep := fs.Bool("keep", false, "keep the run's directory (configurations, gateway logs)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	re, err := regexp.Compile(*runPat)
	if err != nil {
		return fmt.Errorf("-run: %w", err)
	}
	o := options{short: *short, runRE: re, stores: strings.Split(*storeList, ","), bin: *bin, keep: *keep, ports: NewPorts(),
		postgres: os.Getenv("REPLYONCE_TEST_POSTGRES")}
	if o.postgres == "" {
		o.postgres = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"
	}
	o.urls = map[string]string{"postgres": o.postgres}
	for i, s := range o.stores {
		if !slices.Contains(stores.Kinds(), s) || s == "memory" {
			return fmt.Errorf("-stores: %q is not one of bolt, postgres, redis (memory lives in one process: nothing to kill)", s)
		}
		if slices.Contains(o.stores[:i], s) {
			return fmt.Errorf("-stores: %q named twice", s)
		}
	}

	dir, err := os.MkdirTemp("", "replyonce-chaos-")
	if err != nil {
		return err
	}
	if o.keep {
		fmt.Fprintln(out, "chaos: files in", dir)
	} else {
		defer os.RemoveAll(dir)
	}
	if o.bin == "" {
		if o.bin, err = buildGateway(dir); err != nil {
			return err
		}
	}

	var redisSrv *testservers.Process
	if slices.Contains(o.stores, "redis") {
		// Persistence on, every write synced: a killed server loses
		// nothing it acknowledged (docs/durability.md).
		redisSrv, err = testservers.StartRedis(ctx, testservers.RedisOptions{Dir: dir,
			Args: []string{"--appendonly", "yes", "--appendfsync", "always"}})
		if err != nil {
			return fmt.Errorf("redis-server of the run's own: %w", err)
		}
		defer func() { _ = redisSrv.Kill() }()
		o.ports.Hold(redisSrv.Port) // it is killed and restarted on it
		o.urls["redis"] = "redis://" + redisSrv.Addr() + "/0"

	}

	runID := randomHex(4)
	// The rows to run, in the table's order; each store's rows run one
	// after another, the stores side by side unless -sequential (the
	// scenarios are paced, not CPU bound, and share no store).
	var rows []row
	for _, sc := range scenarios {
		if o.short && !sc.short || !o.runRE.MatchString(sc.name) {
			continue
		}
		for _, kind := range o.stores {
			if slices.Contains(sc.stores, kind) {
				rows = append(rows, row{sc: sc, scenario: sc.name, store: kind})
			}
		}
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	lane := func(kind string) {
		for i := range rows {
			if rows[i].store != kind {
				continue
			}
			started := time.Now()
			r, err := runScenario(ctx, o, rows[i].sc, kind, dir, runID, redisSrv)
			if err != nil {
				r.Violations = append(r.Violations, "harness: "+err.Error())
			}
			held := "held"
			if len(r.Violations) > 0 {
				held = "BROKEN"
			}
			mu.Lock()
			rows[i].res, rows[i].took, rows[i].held = r, time.Since(started), held
			fmt.Fprintf(out, "chaos: %s on %s: %d sent, %d acknowledged, %d delivered in %.1fs: %s\n",
				rows[i].scenario, kind, r.Sent, r.Acked, r.Delivered, rows[i].took.Seconds(), held)
			mu.Unlock()
		}
	}
	for _, kind := range o.stores {
		if *sequential {
			lane(kind)
		} else {
			wg.Go(func() { lane(kind) })
		}
	}
	wg.Wait()
	broken := false
	for _, r := range rows {
		broken = broken || r.held != "held"
	}
	fmt.Fprintln(out)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tstore\tsent\tacknowledged\tdelivered\tlost\tduplicates\ttime\tinvariants\t")
	for _, r := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%.1fs\t%s\t\n", r.scenario, r.store, r.res.Sent, r.res.Acked,
			r.res.Delivered, r.res.Lost, r.res.Duplicates, r.took.Seconds(), r.held)
	}
	_ = tw.Flush()
	for _, r := range rows {
		for _, v := range r.res.Violations {
			fmt.Fprintf(out, "%s on %s: %s\n", r.scenario, r.store, v)
		}
	}
	if len(rows) == 0 {
		return errors.New("no scenario matched -run and -stores")
	}
	if broken {
		return errors.New("invariants broken (listed above)")
	}
	return nil
}

type row struct {
	sc              scenario
	scenario, store string
	res             Result
	took            time.Duration
	held            string
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// env is what a scenario acts on while the provider sends.
type env struct {
	instances []*Instance
	store     *Store
	agent     *Agent
	short     bool
}

// restart starts an instance that was killed again.
func (e *env) restart(ctx context.Context, g *Instance) error {
	if g.Running() {
		return nil
	}
	return g.Start(ctx)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// storeConfig is where a scenario's store lives, as the gateway's store
// section says it: a table or key prefix of the scenario's own (tag) on
// the run's server for the kinds in urls, a bolt file in dir otherwise.
func storeConfig(kind, dir, tag string, urls map[string]string) stores.Config {
	c := stores.Config{Kind: kind, URL: urls[kind]}
	if c.URL == "" {
		c.Path = filepath.Join(dir, "ledger.db")
		return c
	}
	c.Table, c.Prefix = "chaos_"+tag, "chaos:"+tag+":"
	return c
}

func runScenario(ctx context.Context, o options, sc scenario, kind, dir, runID string, redisSrv *testservers.Process) (Result, error) {
	ctx, cancel := context.WithTimeout(ctx, 4*time.Minute)
	defer cancel()
	name := strings.ReplaceAll(sc.name, "-", "_")
	sdir, err := os.MkdirTemp(dir, sc.name+"-"+kind+"-")
	if err != nil {
		return Result{}, err
	}
	store, err := openStore(ctx, storeConfig(kind, sdir, runID+"_"+name, o.urls), o.ports)
	if err != nil {
		return Result{}, err
	}
	if kind == "redis" {
		store.redis = redisSrv // the run's own server, which redis-kill kills
	}
	defer store.Close()

	var agent *Agent
	var port int
	for range 5 { // a free port may be taken by a concurrent scenario before it is bound
		if port, err = o.ports.Take(); err != nil {
			return Result{}, err
		}
		if agent, err = StartAgent(fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			break
		}
	}
	if err != nil {
		return Result{}, err
	}
	defer func() {
		agent.Close()
		o.ports.Give(port)
	}()

	key := make([]byte, 32)
	_, _ = rand.Read(key)
	secret := "whsec_" + base64.StdEncoding.EncodeToString(key)
	sources := configSources(secret, agent.URL())
	n := sc.instances
	if !store.Shared() {
		n = 1 // one process holds a bolt file
	}
	e := &env{store: store, agent: agent, short: o.short}
	for i := range n {
		section, err := store.Section()
		if err != nil {
			return Result{}, err
		}
		g, err := newInstance(o.ports, sdir, fmt.Sprintf("gateway-%d", i+1), o.bin, section, sources)
		if err != nil {
			return Result{}, err
		}
		if err := g.Start(ctx); err != nil {
			return Result{}, err
		}
		e.instances = append(e.instances, g)
	}
	defer func() {
		for _, g := range e.instances {
			g.Kill()
			o.ports.Give(g.ports...)
		}
	}()

	budget, pace := 3000, 40*time.Millisecond
	if o.short {
		budget, pace = 400, 100*time.Millisecond
	}
	targets := func() []string {
		var urls []string
		for _, g := range e.instances {
			urls = append(urls, g.URL())
		}
		return urls
	}
	p, err := StartProvider(ctx, runID+"-"+sc.name+"-"+kind, targets, secret, 4, budget, pace)
	if err != nil {
		return Result{}, err
	}
	actErr := sc.act(ctx, e)
	p.Stop()
	// Whatever the scenario left broken is mended before the count: a
	// provider retries and an operator restarts, and only then is a
	// missing event lost.
	store.Heal()
	agent.HangAll(false)
	for _, g := range e.instances {
		g.Resume()
		if err := e.restart(ctx, g); err != nil {
			actErr = errors.Join(actErr, err)
		}
	}
	if store.redis != nil && !store.redis.Running() {
		if err := store.redis.Restart(ctx); err != nil {
			actErr = errors.Join(actErr, err)
		}
	}
	p.Wait()
	events := p.Events()
	// Wait for every acknowledged event to be delivered, or for forwards
	// to stop for longer than a claim and a retry step: nothing more is
	// coming.
	deadline := time.Now().Add(90 * time.Second)
	var r Result
	for {
		r = Check(events, agent.Forwards(), sourceRules)
		if r.Lost == 0 && agent.Quiet() > time.Second || agent.Quiet() > claimTTL+3*time.Second || time.Now().After(deadline) {
			break
		}
		sleep(ctx, 200*time.Millisecond)
	}
	// Late forwards (a stale claim's) would show in the record: look
	// once more after a claim's time when the scenario paused anything.
	if sc.lateCheck {
		sleep(ctx, claimTTL)
		r = Check(events, agent.Forwards(), sourceRules)
	}
	for _, u := range p.Unexpected() {
		r.Violations = append(r.Violations, "provider: "+u+" (only 2xx and 503 are expected)")
	}
	return r, actErr
}
