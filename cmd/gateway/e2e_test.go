package main

import (
	"bytes"
	"context"
	"errors"
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

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/bolt"
)

// storeConfigs are the stores the end-to-end tests run on. Postgres and
// Redis join when their test variables are set (always in CI).
func storeConfigs(t *testing.T) map[string]string {
	stores := map[string]string{
		"memory": "{kind: memory}",
		"bolt":   "{kind: bolt, path: " + filepath.Join(t.TempDir(), "ledger.db") + "}",
	}
	// The servers are shared: a table and a key prefix of this test's own,
	// removed afterwards.
	suffix := fmt.Sprintf("%016x", rand.Uint64())
	if dsn := os.Getenv("REPLYONCE_TEST_POSTGRES"); dsn != "" {
		table := "e2e_" + suffix
		stores["postgres"] = "{kind: postgres, url: '" + dsn + "', table: " + table + "}"
		t.Cleanup(func() {
			pool, err := pgxpool.New(context.Background(), dsn)
			if err != nil {
				t.Errorf("cleanup: %v", err)
				return
			}
			defer pool.Close()
			for _, tb := range []string{table, table + "_blobs", table + "_control"} {
				if _, err := pool.Exec(context.Background(), "DROP TABLE IF EXISTS "+tb+" CASCADE"); err != nil {
					t.Errorf("cleanup: drop %s: %v", tb, err)
				}
			}
		})
	}
	if url := os.Getenv("REPLYONCE_TEST_REDIS"); url != "" {
		prefix := "replyonce-e2e:" + suffix + ":"
		stores["redis"] = "{kind: redis, url: '" + url + "', prefix: '" + prefix + "'}"
		t.Cleanup(func() {
			opts, err := goredis.ParseURL(url)
			if err != nil {
				t.Errorf("cleanup: %v", err)
				return
			}
			c := goredis.NewClient(opts)
			defer c.Close()
			ctx := context.Background()
			iter := c.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				c.Del(ctx, iter.Val())
			}
			if err := iter.Err(); err != nil {
				t.Errorf("cleanup: scan %s: %v", prefix, err)
			}
		})
	}
	return stores
}

func TestConcurrentIdenticalDeliveries(t *testing.T) {
	for name, store := range storeConfigs(t) {
		t.Run(name, func(t *testing.T) {
			agent := newSink(t)
			agent.setAnswer(func(n int, r *http.Request) (int, time.Duration) { return 200, 300 * time.Millisecond })
			g := startGateway(t, writeConfig(t, store, "", agent.srv.URL))
			client := newClient(t)
			id := "evt_concurrent_" + name + "_" + time.Now().Format("150405.000000")
			body, header := stripeEvent(t, id, nil)
			var wg sync.WaitGroup
			replies := make([]reply, 50)
			for i := range replies {
				wg.Add(1)
				go func() {
					defer wg.Done()
					replies[i] = post(t, client, g.hook("stripe"), body, header)
				}()
			}
			wg.Wait()
			delivered := 0
			for i, r := range replies {
				switch {
				case r.status == 200 && r.body["status"] == "delivered":
					delivered++
				case r.status == 200 && r.body["status"] == "duplicate":
				case r.status == 503 && r.retryAfter != "":
				default:
					t.Errorf("answer %d: %d %v (Retry-After %q)", i, r.status, r.body, r.retryAfter)
				}
			}
			if agent.count() != 1 || delivered != 1 {
				t.Fatalf("agent received %d forwards, %d answers said delivered; want 1 and 1", agent.count(), delivered)
			}
		})
	}
}

// gateway send against a running serve produces a 200 delivered.
func TestSendAgainstServe(t *testing.T) {
	agent := newSink(t)
	cfgPath := writeConfig(t, "{kind: memory}", "", agent.srv.URL)
	g := startGateway(t, cfgPath)
	var out bytes.Buffer
	app := &App{Stdout: &out, Stderr: io.Discard, LookupEnv: env(nil), Clock: time.Now}
	err := app.Run(context.Background(), []string{"send", "--config", cfgPath, "--source", "stripe", "--event-id", "evt_send_1", "--to", g.hook("stripe")})
	if err != nil {
		t.Fatalf("send: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "200 OK") || !strings.Contains(out.String(), `"status":"delivered"`) {
		t.Fatalf("send output:\n%s", out.String())
	}
	if agent.count() != 1 || agent.request(0).Header.Get("Replyonce-Event-Id") != "evt_send_1" {
		t.Fatalf("agent got %d forwards", agent.count())
	}
	// Sending the same event again is a duplicate, and send says so.
	out.Reset()
	if err := app.Run(context.Background(), []string{"send", "--config", cfgPath, "--source", "stripe", "--event-id", "evt_send_1", "--to", g.hook("stripe")}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `"status":"duplicate"`) || agent.count() != 1 {
		t.Fatalf("second send:\n%s (agent count %d)", out.String(), agent.count())
	}
}

// A client that trickles its headers is cut off by read_header_timeout.
func TestHeaderTrickleIsCutOff(t *testing.T) {
	agent := newSink(t)
	g := startGateway(t, writeConfig(t, "{kind: memory}", "", agent.srv.URL))
	conn, err := net.Dial("tcp", g.public)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("POST /hooks/stripe HTTP/1.1\r\nHost: x\r\n")); err != nil {
		t.Fatal(err)
	}
	// Keep sending a header byte now and then, never finishing the headers.
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	closed := make(chan error, 1)
	go func() {
		buf := make([]byte, 1024)
		for {
			if _, err := conn.Read(buf); err != nil {
				closed <- err
				return
			}
		}
	}()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-closed:
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the server kept the trickling connection open")
			}
			if agent.count() != 0 {
				t.Fatal("a trickled request reached the agent")
			}
			return
		case <-tick.C:
			_, _ = conn.Write([]byte("X"))
		}
	}
}

// SIGTERM while forwards are in flight: each request is answered (200 or
// 503), and no deliver claim is left pending in the ledger.
func TestShutdownDrainsInFlight(t *testing.T) {
	agent := newSink(t)
	started := make(chan struct{}, 10)
	agent.setAnswer(func(n int, r *http.Request) (int, time.Duration) {
		started <- struct{}{}
		return 200, 700 * time.Millisecond
	})
	dbPath := filepath.Join(t.TempDir(), "ledger.db")
	g := startGateway(t, writeConfig(t, "{kind: bolt, path: "+dbPath+"}", "", agent.srv.URL))
	client := newClient(t)
	const n = 5
	replies := make([]reply, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body, header := stripeEvent(t, fmt.Sprintf("evt_drain_%d", i), nil)
			replies[i] = post(t, client, g.hook("stripe"), body, header)
		}()
	}
	for range n {
		<-started
	}
	g.stop(t) // what SIGTERM does: cancel Run's context
	wg.Wait()
	for i, r := range replies {
		if r.status != 200 && r.status != 503 {
			t.Errorf("request %d answered %d during shutdown", i, r.status)
		}
	}
	s, err := bolt.Open(dbPath, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	l := ledger.New(s, ledger.Options{})
	for i := range n {
		id := fmt.Sprintf("evt_drain_%d", i)
		hist, err := l.Views().History(context.Background(), "stripe:"+id)
		if err != nil || len(hist) != 1 {
			t.Fatalf("%s: history %+v %v", id, hist, err)
		}
		if hist[0].State == ledger.StatePending {
			t.Errorf("%s: deliver claim left pending after shutdown", id)
		}
		if replies[i].status == 200 && hist[0].State != ledger.StateCommitted {
			t.Errorf("%s: answered 200 but recorded %s", id, hist[0].State)
		}
	}
}

// The provider's retry after an agent failure is forwarded as delivery 2
// of the same run.
func TestRetryAfterAgentFailure(t *testing.T) {
	agent := newSink(t)
	agent.setAnswer(func(n int, r *http.Request) (int, time.Duration) {
		if n == 1 {
			return 500, 0
		}
		return 200, 0
	})
	g := startGateway(t, writeConfig(t, "{kind: memory}", "", agent.srv.URL))
	client := newClient(t)
	body, header := stripeEvent(t, "evt_retry_1", nil)
	first := post(t, client, g.hook("stripe"), body, header)
	if first.status != 503 || first.retryAfter != "7" {
		t.Fatalf("agent 500: %d Retry-After %q, want 503 and the source's retry_after (7)", first.status, first.retryAfter)
	}
	second := post(t, client, g.hook("stripe"), body, header)
	if second.status != 200 || second.body["status"] != "delivered" {
		t.Fatalf("retry: %d %v", second.status, second.body)
	}
	r1, r2 := agent.request(0), agent.request(1)
	if r2.Header.Get("Replyonce-Delivery") != "2" || r1.Header.Get("Replyonce-Run-Id") != "stripe:evt_retry_1" ||
		r2.Header.Get("Replyonce-Run-Id") != r1.Header.Get("Replyonce-Run-Id") ||
		r2.Header.Get("Idempotency-Key") != r1.Header.Get("Idempotency-Key") {
		t.Fatalf("redelivery headers: %v / %v", r1.Header, r2.Header)
	}
	third := post(t, client, g.hook("stripe"), body, header)
	if third.status != 200 || third.body["status"] != "duplicate" || agent.count() != 2 {
		t.Fatalf("after delivery: %d %v, agent count %d", third.status, third.body, agent.count())
	}
}

// sharedStoreConfigs are the stores several gateway processes can share:
// Postgres and Redis as storeConfigs has them, and Redis Cluster when a
// test cluster is named (always in CI).
func sharedStoreConfigs(t *testing.T) map[string]string {
	stores := storeConfigs(t)
	delete(stores, "memory")
	delete(stores, "bolt")
	if c := clusterStoreConfig(t, ""); c != "" {
		stores["redis-cluster"] = c
	}
	return stores
}

// Several gateway instances sharing one Postgres, Redis or Redis Cluster
// forward an event once, however the provider's concurrent deliveries are
// spread over them.
func TestInstancesShareOneLedger(t *testing.T) {
	stores := sharedStoreConfigs(t)
	for _, name := range []string{"postgres", "redis", "redis-cluster"} {
		store, ok := stores[name]
		if !ok {
			t.Logf("%s: skipped, REPLYONCE_TEST_%s is not set", name, strings.ToUpper(strings.ReplaceAll(name, "-", "_")))
			continue
		}
		t.Run(name, func(t *testing.T) {
			agent := newSink(t)
			agent.setAnswer(func(n int, r *http.Request) (int, time.Duration) { return 200, 200 * time.Millisecond })
			cfg := writeConfig(t, store, "", agent.srv.URL)
			instances := []*gateway{startGateway(t, cfg), startGateway(t, cfg), startGateway(t, cfg)}
			client := newClient(t)
			id := fmt.Sprintf("evt_instances_%s_%d", name, time.Now().UnixNano())
			body, header := stripeEvent(t, id, nil)
			var wg sync.WaitGroup
			replies := make([]reply, 60)
			for i := range replies {
				wg.Add(1)
				go func() {
					defer wg.Done()
					replies[i] = post(t, client, instances[i%len(instances)].hook("stripe"), body, header)
				}()
			}
			wg.Wait()
			for i, r := range replies {
				if !(r.status == 200 || r.status == 503 && r.retryAfter != "") {
					t.Errorf("answer %d: %d %v", i, r.status, r.body)
				}
			}
			if agent.count() != 1 {
				t.Fatalf("the agent received %d forwards from 3 instances, want 1", agent.count())
			}
		})
	}
}
