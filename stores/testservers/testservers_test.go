//go:build unix

package testservers

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestPortRange(t *testing.T) {
	for _, bad := range []string{"17000", "a-b", "18000-17000", "80-90", "17000-70000"} {
		t.Setenv(EnvPorts, bad)
		if _, err := FreePort(); err == nil || !strings.Contains(err.Error(), EnvPorts) {
			t.Errorf("%s=%q: %v, want an error naming the variable", EnvPorts, bad, err)
		}
	}
	t.Setenv(EnvPorts, "17990-17999")
	for range 20 {
		p, err := FreePort()
		if err != nil || p < 17990 || p > 17999 {
			t.Fatalf("FreePort = %d, %v; want a port in 17990-17999", p, err)
		}
	}
}

// A replica follows its master; a paused one stops answering and resumes;
// a Sentinel knows the master.
func TestRedisReplicaAndSentinel(t *testing.T) {
	master := Redis(t)
	replica := RedisReplica(t, master)
	sentinel := Sentinel(t, "m", master)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	mc, rc := master.Client(), replica.Client()
	defer mc.Close()
	defer rc.Close()
	if err := mc.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := mc.Do(ctx, "wait", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 = %d, %v", n, err)
	}
	if v, err := rc.Get(ctx, "k").Result(); err != nil || v != "v" {
		t.Fatalf("replica has %q, %v", v, err)
	}
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	if err := mc.Set(ctx, "k", "w", 0).Err(); err != nil {
		t.Fatal(err)
	}
	if n, err := mc.Do(ctx, "wait", 1, 300).Int(); err != nil || n != 0 {
		t.Fatalf("WAIT 1 with the replica paused = %d, %v; want 0", n, err)
	}
	if err := replica.Resume(); err != nil {
		t.Fatal(err)
	}
	if n, err := mc.Do(ctx, "wait", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 after resuming = %d, %v", n, err)
	}

	sc := goredis.NewSentinelClient(&goredis.Options{Addr: sentinel.Addr()})
	defer sc.Close()
	addr, err := sc.GetMasterAddrByName(ctx, "m").Result()
	if err != nil || addr[1] != master.Addr()[len("127.0.0.1:"):] {
		t.Fatalf("sentinel says the master is %v, %v; want %s", addr, err, master.Addr())
	}
	if err := master.Kill(); err != nil || master.Running() {
		t.Fatalf("kill: %v, running %v", err, master.Running())
	}
}

func TestCluster(t *testing.T) {
	c := NewCluster(t, ClusterOptions{})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	nodes, err := c.ClusterNodes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	masters, replicas := 0, 0
	for _, n := range nodes {
		if n.Master {
			masters++
		} else if n.MasterID != "" {
			replicas++
		}
		if c.Node(n.Addr) == nil {
			t.Errorf("node %s is not one of ours", n.Addr)
		}
	}
	if masters != 3 || replicas != 3 {
		t.Fatalf("%d masters, %d replicas; want 3 and 3", masters, replicas)
	}
	cc := goredis.NewClusterClient(&goredis.ClusterOptions{Addrs: c.Seeds()[:1]})
	defer cc.Close()
	for i := range 30 {
		if err := cc.Set(ctx, "k"+string(rune('a'+i)), i, 0).Err(); err != nil {
			t.Fatal(err)
		}
	}
	// A killed node started again rejoins with its files.
	var replica *Process
	for _, n := range nodes {
		if !n.Master {
			replica = c.Node(n.Addr)
		}
	}
	if err := replica.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := replica.Restart(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.WaitHealthy(ctx, 3, 3); err != nil {
		t.Fatal(err)
	}
}

// A primary with a streaming standby: a row committed on the primary is
// on the standby, and after the primary stops, the promoted standby takes
// writes.
func TestPostgresStandby(t *testing.T) {
	primary := NewPostgres(t, map[string]string{"synchronous_standby_names": "*"})
	standby := NewStandby(t, primary, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pc, err := pgx.Connect(ctx, primary.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := pc.Exec(ctx, "CREATE TABLE t (n int); INSERT INTO t VALUES (1)"); err != nil {
		t.Fatal(err)
	}
	_ = pc.Close(ctx)
	if err := primary.Stop(true); err != nil {
		t.Fatal(err)
	}
	if err := standby.Promote(ctx); err != nil {
		t.Fatal(err)
	}
	sc, err := pgx.Connect(ctx, standby.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer sc.Close(ctx)
	var n int
	if _, err := sc.Exec(ctx, "INSERT INTO t VALUES (2)"); err != nil {
		t.Fatalf("the promoted standby refuses a write: %v", err)
	}
	if err := sc.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n < 2 {
		t.Fatalf("count = %d, %v", n, err)
	}
	// A stopped server starts again on its port with its data.
	if err := standby.Stop(false); err != nil {
		t.Fatal(err)
	}
	if err := standby.Start(ctx); err != nil {
		t.Fatalf("restart: %v", err)
	}
	sc2, err := pgx.Connect(ctx, standby.DSN("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer sc2.Close(ctx)
	if err := sc2.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 2 {
		t.Fatalf("after a restart, count = %d, %v; want 2", n, err)
	}
}
