//go:build unix

// These tests start and pause Redis servers of their own
// (stores/testservers), which builds on Unix only.

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/replyonce/gateway/stores/testservers"
)

// A gateway that finds its master through Sentinel (both started here).
func TestServeThroughSentinel(t *testing.T) {
	master := testservers.Redis(t)
	replica := testservers.RedisReplica(t, master)
	sentinel := testservers.Sentinel(t, "ledger", master)
	store := fmt.Sprintf("{kind: redis, redis: {sentinel: {master: ledger, addrs: ['%s']}, replicas: 1}}", sentinel.Addr())
	agent := newSink(t)
	cfg := writeConfig(t, store, "", agent.srv.URL)
	var out strings.Builder
	if err := (&App{Stdout: &out, Stderr: io.Discard, LookupEnv: env(nil)}).Run(context.Background(), []string{"check", "--config", cfg}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), `store redis: Redis via Sentinel (master "ledger", sentinels `+sentinel.Addr()) {
		t.Fatalf("check said:\n%s", out.String())
	}
	g := startGateway(t, cfg)
	deliverTwice(t, g, agent, "evt_sentinel")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, p := range []*testservers.Process{master, replica} {
		c := p.Client()
		n, err := c.DBSize(ctx).Result()
		_ = c.Close()
		if err != nil || n == 0 {
			t.Fatalf("%s holds %d keys (%v): the gateway did not write to the master Sentinel named, or it was not replicated", p.Name, n, err)
		}
	}
}

// With store.redis.replicas: 1, an event whose write the replica has not
// acknowledged is a 503 with Retry-After, never a 2xx, in both modes;
// once the replica is back, the provider's retry goes through.
func TestReplicaPausedIs503(t *testing.T) {
	master := testservers.Redis(t)
	replica := testservers.RedisReplica(t, master)
	for _, mode := range []string{"inline", "queued"} {
		t.Run(mode, func(t *testing.T) {
			agent := newSink(t)
			store := fmt.Sprintf("{kind: redis, url: 'redis://%s/0', prefix: '%s:', redis: {replicas: 1, replicas_timeout: 300ms}}", master.Addr(), mode)
			g := startGateway(t, writeConfig(t, store, "      mode: "+mode+"\n", agent.srv.URL))
			client := newClient(t)
			if err := replica.Pause(); err != nil {
				t.Fatal(err)
			}
			paused := true
			defer func() {
				if paused {
					_ = replica.Resume()
				}
			}()
			body, header := stripeEvent(t, "evt_unreplicated_"+mode, nil)
			for try := range 3 {
				r := post(t, client, g.hook("stripe"), body, header)
				if r.status != http.StatusServiceUnavailable || r.retryAfter == "" {
					t.Fatalf("try %d with the replica paused: %d %v (Retry-After %q), want 503 with Retry-After", try, r.status, r.body, r.retryAfter)
				}
			}
			if n := agent.count(); n != 0 {
				t.Fatalf("the agent received %d forwards of an event that was never recorded safely", n)
			}
			if err := replica.Resume(); err != nil {
				t.Fatal(err)
			}
			paused = false
			want := map[string]int{"inline": http.StatusOK, "queued": http.StatusAccepted}[mode]
			var r reply
			waitFor(t, "a 2xx once the replica is back", func() bool {
				r = post(t, client, g.hook("stripe"), body, header)
				return r.status/100 == 2
			})
			if r.status != want && !(r.status == http.StatusOK && r.body["status"] == "duplicate") {
				t.Fatalf("once the replica is back: %d %v", r.status, r.body)
			}
			waitFor(t, "the event delivered", func() bool { return agent.count() >= 1 })
		})
	}
}
