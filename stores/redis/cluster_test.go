package redis

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/storetest"
)

// envClusterAddrs names the variable that points the Cluster test at a real
// Redis Cluster: comma-separated seed addresses.
const envClusterAddrs = "REPLYONCE_TEST_REDIS_CLUSTER"

// testClusterClient connects to the cluster named by envClusterAddrs,
// failing when it does not answer, or is not named in CI (.ci/run starts
// one), and skipping otherwise.
func testClusterClient(t *testing.T) *goredis.ClusterClient {
	t.Helper()
	addrs := os.Getenv(envClusterAddrs)
	if addrs == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set: .ci/run starts a Redis Cluster for the Cluster tests", envClusterAddrs)
		}
		t.Skipf("%s is not set: set it to a Redis Cluster's seed addresses (e.g. 127.0.0.1:7101,127.0.0.1:7102; go run ./scripts/redis-cluster start DIR starts one) to run the Cluster tests", envClusterAddrs)
	}
	c := goredis.NewClusterClient(&goredis.ClusterOptions{
		Addrs:                 strings.Split(addrs, ","),
		ContextTimeoutEnabled: true,
		PoolSize:              64,
	})
	t.Cleanup(func() { _ = c.Close() }) // registered first, so it runs after the key cleanups
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("%s is set but the cluster does not answer: %v", envClusterAddrs, err)
	}
	return c
}

// clusterPrefix is testPrefix for a cluster: keys live on every master.
func clusterPrefix(t *testing.T, c *goredis.ClusterClient) string {
	prefix := fmt.Sprintf("replyonce-test:%016x:", rand.Uint64())
	t.Cleanup(func() {
		_ = c.ForEachMaster(context.Background(), func(ctx context.Context, node *goredis.Client) error {
			deletePrefix(t, node, prefix)
			return nil
		})
	})
	return prefix
}

func TestClusterConformance(t *testing.T) {
	c := testClusterClient(t)
	storetest.Run(t, func(t *testing.T) ledger.Store {
		return New(c, Options{KeyPrefix: clusterPrefix(t, c)})
	})
}

// The same with every write waiting for its master's replica: scripts and
// their WAIT go to the master of each key, alone and in per-master
// pipelines.
func TestClusterConformanceReplicas(t *testing.T) {
	c := testClusterClient(t)
	storetest.Run(t, func(t *testing.T) ledger.Store {
		return New(c, Options{KeyPrefix: clusterPrefix(t, c), Replicas: 1})
	})
}

// Every script call must be legal on Cluster (its keys in one slot), and
// the review listing must see scopes on every master.
func TestCluster(t *testing.T) {
	c := testClusterClient(t)
	ctx := ctxT(t)
	prefix := clusterPrefix(t, c)
	s := New(c, Options{KeyPrefix: prefix})

	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 60 {
		if err := s.Transact(ctx, fmt.Sprintf("conv-%02d", i), put(`{}`, time.Hour, t0.Add(time.Duration(i)*time.Second))); err != nil {
			t.Fatal(err)
		}
	}
	got, err := s.ScopesToReview(ctx, t0.Add(59*time.Second), 60)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 60 || got[0] != "conv-00" || got[59] != "conv-59" {
		t.Fatalf("ScopesToReview = %v", got)
	}

	// The scopes really are spread over the masters.
	var masters, holding atomic.Int64
	err = c.ForEachMaster(ctx, func(ctx context.Context, node *goredis.Client) error {
		masters.Add(1)
		keys, _, err := node.Scan(ctx, 0, prefix+"*", 1000).Result()
		if len(keys) > 0 {
			holding.Add(1)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if masters.Load() > 1 && holding.Load() < 2 {
		t.Fatalf("keys on %d of %d masters", holding.Load(), masters.Load())
	}

	// Racing writers, a forgotten script, an expired document.
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for j := range 20 {
				if err := increment(ctx, s, fmt.Sprintf("hot-%d", j%4)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	for j := range 4 {
		doc, err := s.Read(ctx, fmt.Sprintf("hot-%d", j))
		if err != nil || decodeCounter(t, doc).N != 80 {
			t.Fatalf("hot-%d = %q, %v; want n 80", j, doc, err)
		}
	}
	if err := c.ForEachMaster(ctx, func(ctx context.Context, node *goredis.Client) error {
		return node.ScriptFlush(ctx).Err()
	}); err != nil {
		t.Fatal(err)
	}
	if err := s.Transact(ctx, "conv-00", put(`{}`, 30*time.Millisecond, t0)); err != nil {
		t.Fatalf("after SCRIPT FLUSH: %v", err)
	}
	waitGone(t, s, "conv-00")
	got, err = s.ScopesToReview(ctx, t0.Add(time.Second), 10)
	if err != nil || len(got) != 1 || got[0] != "conv-01" {
		t.Fatalf("after conv-00 expired: %v, %v", got, err)
	}
}
