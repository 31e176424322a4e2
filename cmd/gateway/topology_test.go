package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Whatever store configuration serve refuses at start, check refuses
// too, naming the same field.
func TestCheckRefusesWhatServeRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, store, field string
	}{
		{"redis cluster scheme", "{kind: redis, url: 'redis+cluster://10.0.0.1:6379,10.0.0.2:6379'}", "store.url"},
		{"redis unknown option", "{kind: redis, url: 'redis://127.0.0.1:6379?pool_siz=9'}", "store.url"},
		{"redis nothing to reach", "{kind: redis}", "store.url"},
		{"redis two deployments", "{kind: redis, url: 'redis://a:1', redis: {cluster: ['b:2']}}", "store.redis"},
		{"redis seed without port", "{kind: redis, redis: {cluster: ['10.0.0.1']}}", "store.redis.cluster[0]"},
		{"redis sentinel without master", "{kind: redis, redis: {sentinel: {addrs: ['10.0.0.1:26379']}}}", "store.redis.sentinel.master"},
		{"redis missing ca", "{kind: redis, redis: {cluster: ['a:1'], tls: {enabled: true, ca_file: /nonexistent/ca.pem}}}", "store.redis.tls.ca_file"},
		{"redis replicas timeout alone", "{kind: redis, url: 'redis://a:1', redis: {replicas_timeout: 1s}}", "store.redis.replicas_timeout"},
		{"redis settings on another store", "{kind: memory, redis: {replicas: 1}}", "store.redis"},
		{"postgres bad port", "{kind: postgres, url: 'postgres://u:hunter2@127.0.0.1:notaport/db'}", "store.url"},
		{"postgres unknown sslmode", "{kind: postgres, url: 'postgres://127.0.0.1/db?sslmode=sometimes'}", "store.url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeConfig(t, tc.store, "", "http://127.0.0.1:9")
			var out strings.Builder
			app := &App{Stdout: &out, Stderr: io.Discard, LookupEnv: env(nil)}
			checkErr := app.Run(context.Background(), []string{"check", "--config", cfg})
			if checkErr == nil || !strings.Contains(checkErr.Error(), tc.field+":") {
				t.Fatalf("check: %v\n%s\nwant an error about %s", checkErr, out.String(), tc.field)
			}
			if strings.Contains(checkErr.Error(), "hunter2") {
				t.Fatalf("check shows the password: %v", checkErr)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			serveErr := (&App{Stdout: io.Discard, Stderr: io.Discard, LookupEnv: env(nil), Clock: time.Now,
				Ready: func(string, string) { t.Error("serve started listening") }}).Run(ctx, []string{"serve", "--config", cfg})
			if serveErr == nil || !strings.Contains(serveErr.Error(), tc.field+":") {
				t.Fatalf("serve: %v, want an error about %s", serveErr, tc.field)
			}
		})
	}
}

// check says which servers the store is on, and how acknowledgements are
// made, without the credentials.
func TestCheckShowsTheStore(t *testing.T) {
	for _, tc := range []struct {
		store, want string
	}{
		{"{kind: redis, url: 'redis://gw:hunter2@redis.internal:6380/2'}", "store redis: Redis server redis.internal:6380 (db 2), user gw, writes do not wait for replicas"},
		{"{kind: redis, redis: {cluster: ['10.0.0.1:6379', '10.0.0.2:6379'], username: gw, password: hunter2, tls: {enabled: true}, replicas: 1}}",
			"store redis: Redis Cluster (seeds 10.0.0.1:6379, 10.0.0.2:6379), user gw, TLS, writes wait for 1 replica (1s)"},
		{"{kind: redis, redis: {sentinel: {master: ledger, addrs: ['10.0.0.1:26379', '10.0.0.2:26379']}, password: hunter2, replicas: 2, replicas_timeout: 500ms}}",
			`store redis: Redis via Sentinel (master "ledger", sentinels 10.0.0.1:26379, 10.0.0.2:26379, db 0), writes wait for 2 replicas (500ms)`},
		{"{kind: postgres, url: 'postgres://gw:hunter2@10.0.0.1:5432,10.0.0.2:5433/ledger?target_session_attrs=read-write'}",
			"store postgres (10.0.0.1:5432, 10.0.0.2:5433, database ledger, target_session_attrs read-write)"},
		{"{kind: bolt, path: data/ledger.db}", "store bolt (data/ledger.db)"},
	} {
		out, err := runCheck(t, "store: "+tc.store+"\n"+validSource, nil)
		if err != nil {
			t.Fatalf("%s: %v", tc.store, err)
		}
		if !strings.Contains(out, tc.want) {
			t.Errorf("check said:\n%s\nwant %q", out, tc.want)
		}
		if strings.Contains(out, "hunter2") {
			t.Errorf("check shows the password:\n%s", out)
		}
	}
}

// clusterSeeds returns the test cluster's seed addresses, or nil when
// there is none; in CI (which starts one) the test fails without them.
func clusterSeeds(t *testing.T) []string {
	t.Helper()
	addrs := os.Getenv("REPLYONCE_TEST_REDIS_CLUSTER")
	if addrs == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("REPLYONCE_TEST_REDIS_CLUSTER is not set: .ci/run starts a Redis Cluster")
		}
		return nil
	}
	return strings.Split(addrs, ",")
}

const noCluster = "REPLYONCE_TEST_REDIS_CLUSTER is not set (go run ./scripts/redis-cluster start DIR starts a cluster)"

// clusterStoreConfig is a store config on the test cluster under a key
// prefix of its own, whose keys are deleted from every master at the end;
// "" when there is no test cluster.
func clusterStoreConfig(t *testing.T, extra string) string {
	seeds := clusterSeeds(t)
	if seeds == nil {
		return ""
	}
	prefix := fmt.Sprintf("replyonce-e2e:%016x:", rand.Uint64())
	t.Cleanup(func() {
		c := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: seeds})
		defer c.Close()
		ctx := context.Background()
		err := c.ForEachMaster(ctx, func(ctx context.Context, node *goredis.Client) error {
			iter := node.Scan(ctx, 0, prefix+"*", 1000).Iterator()
			for iter.Next(ctx) {
				node.Del(ctx, iter.Val())
			}
			return iter.Err()
		})
		if err != nil {
			t.Errorf("cleanup %s: %v", prefix, err)
		}
	})
	return fmt.Sprintf("{kind: redis, prefix: '%s', redis: {cluster: ['%s']%s}}", prefix, strings.Join(seeds, "', '"), extra)
}

// A gateway on Redis Cluster (check, then serve) records and delivers, and
// a redelivery is a duplicate.
func TestServeOnRedisCluster(t *testing.T) {
	store := clusterStoreConfig(t, ", replicas: 1")
	if store == "" {
		t.Skip(noCluster)
	}
	agent := newSink(t)
	cfg := writeConfig(t, store, "", agent.srv.URL)
	var out strings.Builder
	if err := (&App{Stdout: &out, Stderr: io.Discard, LookupEnv: env(nil)}).Run(context.Background(), []string{"check", "--config", cfg}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "store redis: Redis Cluster (seeds ") || !strings.Contains(out.String(), "writes wait for 1 replica") {
		t.Fatalf("check said:\n%s", out.String())
	}
	g := startGateway(t, cfg)
	deliverTwice(t, g, agent, "evt_cluster")
}

// deliverTwice sends one event twice to an inline source: delivered, then
// a duplicate, with one forward.
func deliverTwice(t *testing.T, g *gateway, agent *sink, prefix string) {
	t.Helper()
	client := newClient(t)
	id := fmt.Sprintf("%s_%d", prefix, time.Now().UnixNano())
	body, header := stripeEvent(t, id, nil)
	first := post(t, client, g.hook("stripe"), body, header)
	if first.status != http.StatusOK || first.body["status"] != "delivered" {
		t.Fatalf("first delivery: %d %v", first.status, first.body)
	}
	again := post(t, client, g.hook("stripe"), body, header)
	if again.status != http.StatusOK || again.body["status"] != "duplicate" || agent.count() != 1 {
		t.Fatalf("redelivery: %d %v, agent received %d", again.status, again.body, agent.count())
	}
}
