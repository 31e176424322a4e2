package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replyonce/gateway/stores/bolt"
)

// tcpRelay forwards connections from a listener to target, as a store that
// comes up late: nothing listens on addr until start.
type tcpRelay struct {
	addr, target string
	mu           sync.Mutex
	ln           net.Listener
	conns        []net.Conn
	wg           sync.WaitGroup
}

func (r *tcpRelay) start(t *testing.T) {
	ln, err := net.Listen("tcp", r.addr)
	if err != nil {
		t.Fatal(err)
	}
	r.ln = ln
	r.wg.Add(1)
	go func() {
		defer r.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			up, err := net.Dial("tcp", r.target)
			if err != nil {
				_ = c.Close()
				continue
			}
			r.mu.Lock()
			r.conns = append(r.conns, c, up)
			r.mu.Unlock()
			r.wg.Add(2)
			go func() { defer r.wg.Done(); _, _ = io.Copy(up, c); _ = up.Close() }()
			go func() { defer r.wg.Done(); _, _ = io.Copy(c, up); _ = c.Close() }()
		}
	}()
}

func (r *tcpRelay) stop() {
	if r.ln != nil {
		_ = r.ln.Close()
	}
	r.mu.Lock()
	for _, c := range r.conns {
		_ = c.Close()
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// A gateway whose store is down at start does not exit: it listens,
// answers /readyz and webhooks 503, logs each failed attempt with the wait
// before the next (growing), and serves normally once the store is up.
func TestStoreDownAtStartKeepsRetrying(t *testing.T) {
	type variant struct {
		store string
		down  func(t *testing.T) // makes the store unreachable before start
		up    func(t *testing.T) // brings it up
	}
	variants := map[string]variant{}
	dir := t.TempDir()
	blocker := filepath.Join(dir, "volume")
	variants["bolt"] = variant{
		// The data directory's mount is missing: a file stands where it goes.
		store: "{kind: bolt, path: " + filepath.Join(blocker, "ledger.db") + "}",
		down:  func(t *testing.T) { writeFile(t, blocker, "not a directory") },
		up: func(t *testing.T) {
			if err := os.Remove(blocker); err != nil {
				t.Fatal(err)
			}
		},
	}
	if url := os.Getenv("REPLYONCE_TEST_REDIS"); url != "" {
		opts, err := goredis.ParseURL(url)
		if err != nil {
			t.Fatal(err)
		}
		relay := &tcpRelay{addr: "127.0.0.1:" + freePort(t), target: opts.Addr}
		t.Cleanup(relay.stop)
		prefix := fmt.Sprintf("replyonce-storewait:%016x:", rand.Uint64())
		late := strings.Replace(url, opts.Addr, relay.addr, 1)
		variants["redis"] = variant{
			store: "{kind: redis, url: '" + late + "', prefix: '" + prefix + "'}",
			down:  func(*testing.T) {},
			up:    relay.start,
		}
		t.Cleanup(func() {
			c := goredis.NewClient(opts)
			defer c.Close()
			ctx := context.Background()
			iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				c.Del(ctx, iter.Val())
			}
		})
	} else if os.Getenv("CI") == "true" {
		t.Fatal("REPLYONCE_TEST_REDIS is not set")
	}
	for name, v := range variants {
		t.Run(name, func(t *testing.T) {
			agent := newSink(t)
			v.down(t)
			path := writeConfig(t, v.store, "", agent.srv.URL)
			ctx, cancel := context.WithCancel(context.Background())
			g := &gateway{cancel: cancel, done: make(chan error, 1), stderr: &syncBuffer{}}
			ready := make(chan struct{})
			app := &App{Stdout: io.Discard, Stderr: g.stderr, LookupEnv: env(nil), Clock: time.Now, StoreRetry: 100 * time.Millisecond,
				Ready: func(public, admin string) { g.public, g.admin = public, admin; close(ready) }}
			go func() { g.done <- app.Run(ctx, []string{"serve", "--config", path}) }()
			select {
			case <-ready:
			case err := <-g.done:
				t.Fatalf("serve exited with the store down: %v\n%s", err, g.stderr.String())
			case <-time.After(20 * time.Second):
				t.Fatal("serve did not start listening with the store down")
			}
			t.Cleanup(func() { g.stop(t) })
			client := newClient(t)

			if s := readyz(t, client, g); s != http.StatusServiceUnavailable {
				t.Fatalf("/readyz with the store down = %d, want 503", s)
			}
			body, hdr := stripeEvent(t, "evt_store_late_"+name, nil)
			if r := post(t, client, g.hook("stripe"), body, hdr); r.status != http.StatusServiceUnavailable || r.retryAfter == "" {
				t.Fatalf("a webhook with the store down: %d %v (Retry-After %q), want 503 with Retry-After", r.status, r.body, r.retryAfter)
			}
			waitFor(t, "three failed attempts in the log", func() bool {
				return strings.Count(g.stderr.String(), "store unreachable at start") >= 3
			})
			logs := g.stderr.String()
			for _, want := range []string{`"attempt":1,"retry_in":"100ms"`, `"attempt":2,"retry_in":"200ms"`, `"level":"error"`} {
				if !strings.Contains(logs, want) {
					t.Fatalf("the log lacks %s:\n%s", want, logs)
				}
			}
			if agent.count() != 0 {
				t.Fatalf("an event was forwarded with no store to record it")
			}

			v.up(t)
			waitFor(t, "/readyz 200 once the store is up", func() bool { return readyz(t, client, g) == http.StatusOK })
			if r := post(t, client, g.hook("stripe"), body, hdr); r.status != http.StatusOK || r.body["status"] != "delivered" {
				t.Fatalf("the provider's retry once the store is up: %d %v, want 200 delivered", r.status, r.body)
			}
			if !strings.Contains(g.stderr.String(), `"msg":"store open"`) {
				t.Fatalf("the log does not say the store opened:\n%s", g.stderr.String())
			}
		})
	}
}

func readyz(t *testing.T, client *http.Client, g *gateway) int {
	t.Helper()
	resp, err := client.Get("http://" + g.admin + "/readyz")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// A second serve on a bolt file another gateway holds exits with an error
// that says so, instead of serving 503 while it retries a lock that will
// not come free; and it says so before trying its port, which here is
// taken too: the error is about the file, not the port.
func TestServeOnAHeldBoltFileExits(t *testing.T) {
	dbPath := filepath.Join(t.TempDir(), "ledger.db")
	held, err := bolt.Open(dbPath, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	path := writeConfig(t, "{kind: bolt, path: '"+filepath.ToSlash(dbPath)+"'}", "", "http://127.0.0.1:9")
	cfg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), "listen: 127.0.0.1:0\n", "listen: "+taken.Addr().String()+"\n", 1))
	if err := os.WriteFile(path, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	stderr := &syncBuffer{}
	app := &App{Stdout: io.Discard, Stderr: stderr, LookupEnv: env(nil), Clock: time.Now, StoreRetry: 100 * time.Millisecond}
	err = app.Run(context.Background(), []string{"serve", "--config", path})
	if err == nil || !strings.Contains(err.Error(), "is held by another process") || !strings.Contains(err.Error(), "stop the other gateway") {
		t.Fatalf("serve on a held bolt file: %v, want it to say the file is held\n%s", err, stderr.String())
	}
	if strings.Contains(stderr.String(), "serving 503") {
		t.Fatalf("serve retried a held bolt file:\n%s", stderr.String())
	}
}
