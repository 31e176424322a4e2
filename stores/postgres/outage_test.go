package postgres_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/postgres"
)

// proxy is a TCP relay to the real server that a test can break: stall
// holds every byte (a partition, or a server that stopped answering), drop
// closes every connection and refuses new ones (a crash or a restart).
type proxy struct {
	ln     net.Listener
	target string
	wg     sync.WaitGroup // the accept loop and every relay goroutine

	mu    sync.Mutex
	mode  string
	flow  chan struct{} // closed while bytes may pass
	pairs map[*pair]struct{}
}

type pair struct {
	client, server net.Conn
	once           sync.Once
	done           chan struct{}
}

func (p *pair) close() {
	p.once.Do(func() {
		close(p.done)
		_ = p.client.Close()
		if p.server != nil {
			_ = p.server.Close()
		}
	})
}

func startProxy(t *testing.T, target string) *proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{ln: ln, target: target, mode: "pass", flow: make(chan struct{}), pairs: map[*pair]struct{}{}}
	close(p.flow)
	p.wg.Go(p.accept)
	t.Cleanup(p.close)
	return p
}

func (p *proxy) addr() string { return p.ln.Addr().String() }

func (p *proxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.wg.Go(func() { p.serve(c) })
	}
}

func (p *proxy) serve(c net.Conn) {
	p.mu.Lock()
	mode := p.mode
	pr := &pair{client: c, done: make(chan struct{})}
	if mode != "drop" {
		p.pairs[pr] = struct{}{}
	}
	p.mu.Unlock()
	defer func() {
		pr.close()
		p.mu.Lock()
		delete(p.pairs, pr)
		p.mu.Unlock()
	}()
	switch mode {
	case "drop":
		return
	case "stall":
		<-pr.done // accepted, never answered
		return
	}
	s, err := net.DialTimeout("tcp", p.target, 5*time.Second)
	if err != nil {
		return
	}
	p.mu.Lock()
	pr.server = s
	p.mu.Unlock()
	select {
	case <-pr.done: // closed while dialling
		_ = s.Close()
		return
	default:
	}
	var relays sync.WaitGroup
	relays.Go(func() { p.relay(pr, c, s) })
	p.relay(pr, s, c)
	pr.close()
	relays.Wait()
}

// relay copies src to dst, holding each chunk while the proxy is stalled.
func (p *proxy) relay(pr *pair, src, dst net.Conn) {
	defer pr.close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			flow := p.flow
			p.mu.Unlock()
			select {
			case <-flow:
			case <-pr.done:
				return
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// set switches the proxy's behaviour. Leaving stall or entering drop closes
// every connection: what was held during a partition is lost, as it would
// be once TCP gave up on it.
func (p *proxy) set(mode string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if mode == p.mode {
		return
	}
	if mode == "drop" || p.mode == "stall" {
		for pr := range p.pairs {
			// close takes no proxy lock, so calling it here is safe.
			pr.close()
		}
	}
	switch {
	case mode == "stall":
		p.flow = make(chan struct{})
	case p.mode == "stall":
		close(p.flow)
	}
	p.mode = mode
}

func (p *proxy) close() {
	_ = p.ln.Close()
	p.set("drop")
	p.wg.Wait()
}

// poolVia returns a pool reaching the test database through addr.
func poolVia(t *testing.T, addr string) *pgxpool.Pool {
	t.Helper()
	cfg, err := pgxpool.ParseConfig(testDSN(t))
	if err != nil {
		t.Fatal(err)
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := strconv.Atoi(port)
	cfg.ConnConfig.Host, cfg.ConnConfig.Port = host, uint16(p)
	cfg.ConnConfig.Fallbacks = nil
	cfg.MaxConns = 4
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// checkOutageError asserts that a call failed as a store failure, within
// its deadline.
func checkOutageError(t *testing.T, what string, err error, took, deadline time.Duration) {
	t.Helper()
	switch {
	case err == nil:
		t.Errorf("%s succeeded during the outage", what)
	case errors.Is(err, ledger.ErrContention):
		t.Errorf("%s: an outage reported as contention: %v", what, err)
	}
	// Generous slack for the race detector on a busy machine; a hung call
	// would take minutes.
	if took > deadline+2*time.Second {
		t.Errorf("%s took %v with a %v deadline", what, took, deadline)
	}
}

func TestOutageClosedPort(t *testing.T) {
	testDSN(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	s := postgres.New(poolVia(t, addr), postgres.Options{})

	const deadline = 2 * time.Second
	for name, call := range map[string]func(context.Context) error{
		"transact": func(ctx context.Context) error { return s.Transact(ctx, "x", incr("")) },
		"read":     func(ctx context.Context) error { _, err := s.Read(ctx, "x"); return err },
		"review": func(ctx context.Context) error {
			_, err := s.ScopesToReview(ctx, time.Now(), 10)
			return err
		},
		"delete expired": func(ctx context.Context) error { _, err := s.DeleteExpired(ctx); return err },
		"migrate":        s.Migrate,
		"ping":           s.Ping,
	} {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		start := time.Now()
		err := call(ctx)
		cancel()
		checkOutageError(t, name, err, time.Since(start), deadline)
	}
}

// TestOutageThroughProxy keeps several goroutines writing while the link
// to the server stalls, comes back, drops and comes back again. Every call
// must end by its deadline; after the link is back, calls succeed; and once
// the failed operations are retried, each one is recorded exactly once.
// The operations are idempotent, as the ledger's are, because a write that
// failed on the client side may still have committed.
func TestOutageThroughProxy(t *testing.T) {
	direct := newPool(t, testDSN(t), 0)
	table := newTable(t, direct)
	px := startProxy(t, direct.Config().ConnConfig.Host+":"+strconv.Itoa(int(direct.Config().ConnConfig.Port)))
	s := postgres.New(poolVia(t, px.addr()), postgres.Options{Table: table})

	const (
		workers  = 4
		deadline = 300 * time.Millisecond
	)
	var (
		stop    = make(chan struct{})
		wg      sync.WaitGroup
		mu      sync.Mutex
		failed  []string // op ids, scope-prefixed
		done    = map[string]bool{}
		slow    []string
		outages int
	)
	scopeOf := func(w int) string { return fmt.Sprintf("s%d", w%2) }
	for w := range workers {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("w%d-%d", w, i)
				ctx, cancel := context.WithTimeout(context.Background(), deadline)
				start := time.Now()
				err := s.Transact(ctx, scopeOf(w), incr(id))
				took := time.Since(start)
				cancel()
				mu.Lock()
				if took > deadline+2*time.Second {
					slow = append(slow, fmt.Sprintf("%s took %v: %v", id, took, err))
				}
				if err != nil {
					if errors.Is(err, ledger.ErrContention) {
						slow = append(slow, fmt.Sprintf("%s: contention during outage: %v", id, err))
					}
					failed = append(failed, id)
					outages++
				} else {
					done[id] = true
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(20 * time.Millisecond)
				}
			}
		})
	}
	for _, step := range []struct {
		mode string
		hold time.Duration
	}{{"pass", 300 * time.Millisecond}, {"stall", 800 * time.Millisecond}, {"pass", 400 * time.Millisecond},
		{"drop", 400 * time.Millisecond}, {"pass", 400 * time.Millisecond}, {"stall", 600 * time.Millisecond}} {
		px.set(step.mode)
		time.Sleep(step.hold)
	}

	// Reads during the stall end by their deadline too.
	for name, call := range map[string]func(context.Context) error{
		"read": func(ctx context.Context) error { _, err := s.Read(ctx, "s0"); return err },
		"review": func(ctx context.Context) error {
			_, err := s.ScopesToReview(ctx, time.Now(), 10)
			return err
		},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), deadline)
		start := time.Now()
		err := call(ctx)
		cancel()
		checkOutageError(t, name+" while stalled", err, time.Since(start), deadline)
	}

	px.set("pass")
	close(stop)
	wg.Wait()
	for _, msg := range slow {
		t.Error(msg)
	}
	if outages == 0 {
		t.Fatal("no call failed during the outages; the proxy did not break anything")
	}

	// Back to normal: the first call on each scope must succeed, and the
	// operations that failed are retried until recorded.
	for _, id := range failed {
		w, _ := strconv.Atoi(id[1:2])
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := s.Transact(ctx, scopeOf(w), incr(id))
		cancel()
		if err != nil {
			t.Fatalf("retrying %s after the outage: %v", id, err)
		}
		done[id] = true
	}

	check := postgres.New(direct, postgres.Options{Table: table})
	total := 0
	for _, scope := range []string{"s0", "s1"} {
		c := decodeCounter(t, mustRead(t, check, scope))
		if c.N != len(c.IDs) {
			t.Errorf("%s: counter %d but %d distinct operations: some were applied twice", scope, c.N, len(c.IDs))
		}
		total += len(c.IDs)
		for id := range c.IDs {
			if !done[id] {
				t.Errorf("%s: operation %s recorded but never attempted", scope, id)
			}
		}
	}
	if total != len(done) {
		t.Errorf("%d operations recorded, want %d: some were lost", total, len(done))
	}
	t.Logf("%d operations, %d failed during outages and were retried", len(done), len(failed))
}
