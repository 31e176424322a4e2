//go:build failover

package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/replyonce/gateway/stores/redis"
	"github.com/replyonce/gateway/stores/testservers"
)

// A Redis Cluster master is killed while a provider sends queued events;
// its replica is promoted. Two ways, each with store.redis.replicas 0 and
// 1:
//
//   - kill: the replica is in step with its master when the master dies,
//     as on a healthy network;
//   - kill-lagging: the replica was cut off from its master (paused, its
//     link closed by the master) for a second and a half before the master
//     died, as in a partition: whatever the master acknowledged in that
//     time exists nowhere else.
//
// The killed node is then started again, as an orchestrator would, and
// rejoins as the new master's replica: with replicas 1, a master without
// a replica refuses every write (503) until then.
//
// With replicas 1 no acknowledged event may be lost: a write the replica
// did not confirm was a 503, and the provider's retry landed on the
// promoted replica. With replicas 0 the test reports what was lost and
// asserts nothing about it. Events forwarded twice are counted in both:
// a delivery whose settle was lost, or refused, is delivered again.
func TestFailoverRedisCluster(t *testing.T) {
	for _, scenario := range []string{"kill", "kill-lagging"} {
		for _, replicas := range []int{0, 1} {
			t.Run(fmt.Sprintf("%s/replicas=%d", scenario, replicas), func(t *testing.T) {
				o, promoted, down := redisClusterFailover(t, scenario, replicas)
				t.Logf("redis cluster, master killed (%s), replicas %d: %s; replica promoted %s after the kill, last refusal %s after it",
					scenario, replicas, o, promoted.Round(10*time.Millisecond), down.Round(10*time.Millisecond))
				fmt.Printf("failover: redis cluster, master killed (%s), replicas %d: %s\n", scenario, replicas, o)
				if replicas > 0 && o.lost > 0 {
					t.Errorf("with replicas %d, %d acknowledged events were lost", replicas, o.lost)
				}
				if o.stuck > 0 {
					t.Errorf("%d acknowledged events are in the store but were never delivered", o.stuck)
				}
			})
		}
	}
}

func redisClusterFailover(t *testing.T, scenario string, replicas int) (o outcome, promoted, down time.Duration) {
	cluster := testservers.NewCluster(t, testservers.ClusterOptions{NodeTimeout: 2 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	extra := ""
	if replicas > 0 {
		extra = fmt.Sprintf(", replicas: %d, replicas_timeout: 500ms", replicas)
	}
	store := fmt.Sprintf("{kind: redis, redis: {cluster: ['%s']%s}}", strings.Join(cluster.Seeds(), "', '"), extra)
	// An agent slower than the provider (40 events/s), so that a backlog
	// of accepted events waits for delivery when the master dies.
	agent := newCountingAgent(t, 100*time.Millisecond)
	g := startGateway(t, failoverConfig(t, store, agent.srv.URL))
	p := startProvider(t, g.hook("stripe"), fmt.Sprintf("evt_redis_%s_%d_", strings.ReplaceAll(scenario, "-", "_"), replicas), 8)
	p.waitAcked(200)

	// The victim: the first master, and its replica.
	nodes, err := cluster.ClusterNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var master, replica testservers.ClusterNode
	for _, n := range nodes {
		if n.Master && len(n.Slots) > 0 && master.ID == "" {
			master = n
		}
	}
	for _, n := range nodes {
		if n.MasterID == master.ID {
			replica = n
		}
	}
	mp, rp := cluster.Node(master.Addr), cluster.Node(replica.Addr)
	if mp == nil || rp == nil {
		t.Fatalf("no master with a replica in %+v", nodes)
	}

	if scenario == "kill-lagging" {
		if err := rp.Pause(); err != nil {
			t.Fatal(err)
		}
		mc := mp.Client()
		err := mc.Do(ctx, "client", "kill", "type", "replica").Err()
		_ = mc.Close()
		if err != nil {
			t.Fatal(err)
		}
		time.Sleep(1500 * time.Millisecond) // the provider keeps sending
	}
	mc := mp.Client()
	info, _ := mc.Info(ctx, "replication").Result()
	_ = mc.Close()
	if err := mp.Kill(); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	t.Logf("at the kill, the master's replication: %s", oneLine(info))
	if scenario == "kill-lagging" {
		if err := rp.Resume(); err != nil {
			t.Fatal(err)
		}
	}
	for {
		nodes, err := cluster.ClusterNodes(ctx)
		if err == nil && isMaster(nodes, replica.ID) {
			promoted = time.Since(killed)
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("the replica %s was not promoted: %v", replica.Addr, ctx.Err())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := mp.Restart(ctx); err != nil {
		t.Fatalf("restart the killed master: %v", err)
	}
	if err := cluster.WaitHealthy(ctx, 3, 3); err != nil {
		t.Fatal(err)
	}
	p.waitAcked(200) // the gateway takes events again
	p.finish()
	top, err := redis.Config{Cluster: cluster.Seeds()}.Topology("")
	if err != nil {
		t.Fatal(err)
	}
	s, err := top.Open(ctx, redis.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	recorded := func(id string) bool {
		doc, err := s.Read(ctx, "stripe:"+id)
		if err != nil {
			t.Fatal(err)
		}
		return doc != nil
	}
	return settle(t, p, agent, 15*time.Second, recorded), promoted, p.downtime(killed)
}

func oneLine(info string) string {
	var keep []string
	for _, l := range strings.Split(info, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "slave0:") || strings.HasPrefix(l, "master_repl_offset:") || strings.HasPrefix(l, "connected_slaves:") {
			keep = append(keep, l)
		}
	}
	return strings.Join(keep, " ")
}

func isMaster(nodes []testservers.ClusterNode, id string) bool {
	for _, n := range nodes {
		if n.ID == id {
			return n.Master && !n.Failing
		}
	}
	return false
}
