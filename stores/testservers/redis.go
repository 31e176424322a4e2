//go:build unix

package testservers

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// RedisOptions shapes one redis-server.
type RedisOptions struct {
	// Dir holds the server's files (its own subdirectory is made).
	Dir string
	// Args are more redis-server arguments ("--maxmemory", "10mb", ...);
	// they come after the defaults, so they win.
	Args []string
	// Detach leaves the server running after this program exits.
	Detach bool
}

// StartRedis starts a redis-server on a free port and waits until it
// answers (PING, whose answer may be a refusal from a server that wants a
// password). In Args, the word PORT is replaced by the port chosen, for
// servers that listen with TLS only ("--port", "0", "--tls-port", "PORT"):
// those are up once they accept connections.
func StartRedis(ctx context.Context, o RedisOptions) (*Process, error) {
	return withFreePorts(1, func(ports []int) (*Process, error) {
		return startRedis(ctx, o, ports[0], nil)
	})
}

func startRedis(ctx context.Context, o RedisOptions, port int, extra []string) (*Process, error) {
	dir := filepath.Join(o.Dir, "redis-"+strconv.Itoa(port))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	args := []string{"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", dir, "--daemonize", "no", "--logfile", ""}
	args = append(args, extra...)
	for _, a := range o.Args {
		args = append(args, strings.ReplaceAll(a, "PORT", strconv.Itoa(port)))
	}
	p, err := start(startOptions{name: "redis " + strconv.Itoa(port), dir: dir, bin: "redis-server", args: args, detach: o.Detach})
	if err != nil {
		return nil, err
	}
	p.Port = port
	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	tlsOnly := slices.Contains(o.Args, "--tls-port")
	p.ready = func(ctx context.Context) error {
		if tlsOnly {
			conn, err := (&net.Dialer{}).DialContext(ctx, "tcp", p.Addr())
			if err == nil {
				_ = conn.Close()
			}
			return err
		}
		c := goredis.NewClient(&goredis.Options{Addr: p.Addr(), MaxRetries: -1, DialTimeout: time.Second})
		defer c.Close()
		err := c.Ping(ctx).Err()
		var reply goredis.Error
		if errors.As(err, &reply) {
			return nil // a refusal is an answer
		}
		return err
	}
	err = waitUntil(wctx, p, "answering", p.ready)
	if err != nil {
		_ = p.Kill()
		if strings.Contains(p.Log(), "Address already in use") {
			return nil, fmt.Errorf("%w: %v", errBind, err)
		}
		return nil, err
	}
	return p, nil
}

// Client returns a go-redis client of the server, which the caller closes.
func (p *Process) Client() *goredis.Client {
	return goredis.NewClient(&goredis.Options{Addr: p.Addr(), ContextTimeoutEnabled: true})
}

// StartRedisReplica starts a replica of master and waits until its link
// to the master is up and it has the master's data.
func StartRedisReplica(ctx context.Context, master *Process, o RedisOptions) (*Process, error) {
	o.Args = append([]string{"--replicaof", "127.0.0.1", strconv.Itoa(master.Port)}, o.Args...)
	r, err := StartRedis(ctx, o)
	if err != nil {
		return nil, err
	}
	c := r.Client()
	defer c.Close()
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err = waitUntil(wctx, r, "replicating", func(ctx context.Context) error {
		info, err := c.Info(ctx, "replication").Result()
		if err != nil {
			return err
		}
		if !strings.Contains(info, "master_link_status:up") {
			return errors.New("master link not up")
		}
		return nil
	})
	if err != nil {
		_ = r.Kill()
		return nil, err
	}
	return r, nil
}

// StartSentinel starts a Sentinel that monitors master under name (quorum
// 1, down after one second) and waits until it knows the master.
func StartSentinel(ctx context.Context, name string, master *Process, o RedisOptions) (*Process, error) {
	return withFreePorts(1, func(ports []int) (*Process, error) {
		port := ports[0]
		dir := filepath.Join(o.Dir, "sentinel-"+strconv.Itoa(port))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, err
		}
		conf := filepath.Join(dir, "sentinel.conf")
		text := fmt.Sprintf("port %d\nbind 127.0.0.1\ndir %s\nsentinel monitor %s 127.0.0.1 %d 1\n"+
			"sentinel down-after-milliseconds %s 1000\nsentinel failover-timeout %s 10000\n",
			port, dir, name, master.Port, name, name)
		// Sentinel rewrites its file as it learns: it must be writable.
		if err := os.WriteFile(conf, []byte(text), 0o644); err != nil {
			return nil, err
		}
		p, err := start(startOptions{name: "sentinel " + strconv.Itoa(port), dir: dir, bin: "redis-server",
			args: []string{conf, "--sentinel"}, detach: o.Detach})
		if err != nil {
			return nil, err
		}
		p.Port = port
		c := goredis.NewSentinelClient(&goredis.Options{Addr: p.Addr(), MaxRetries: -1})
		defer c.Close()
		wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		defer cancel()
		err = waitUntil(wctx, p, "knowing the master", func(ctx context.Context) error {
			return c.GetMasterAddrByName(ctx, name).Err()
		})
		if err != nil {
			_ = p.Kill()
			if strings.Contains(p.Log(), "Address already in use") {
				return nil, fmt.Errorf("%w: %v", errBind, err)
			}
			return nil, err
		}
		return p, nil
	})
}

// ClusterOptions shapes a Redis Cluster.
type ClusterOptions struct {
	Dir string
	// Masters and ReplicasPerMaster: three and one when zero.
	Masters           int
	ReplicasPerMaster int
	// NodeTimeout is cluster-node-timeout: how long a node may be
	// unreachable before the others count it failed. Default 2s.
	NodeTimeout time.Duration
	// Args are more redis-server arguments for every node.
	Args []string
	// Detach leaves the nodes running after this program exits.
	Detach bool
}

// Cluster is a running Redis Cluster.
type Cluster struct {
	Nodes []*Process
}

// Seeds are every node's address, for a client's seed list.
func (c *Cluster) Seeds() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Addr()
	}
	return out
}

// Node returns the node listening on addr.
func (c *Cluster) Node(addr string) *Process {
	for _, n := range c.Nodes {
		if n.Addr() == addr {
			return n
		}
	}
	return nil
}

// Stop kills every node.
func (c *Cluster) Stop() {
	for _, n := range c.Nodes {
		_ = n.Kill()
	}
}

// StartCluster starts Masters×(1+ReplicasPerMaster) nodes, joins them with
// redis-cli --cluster create, and waits until every node agrees that all
// slots are served. Replicas may always fail over, however far behind
// their master (cluster-replica-validity-factor 0): the failover tests
// promote replicas that were cut off on purpose.
func StartCluster(ctx context.Context, o ClusterOptions) (*Cluster, error) {
	if o.Masters == 0 {
		o.Masters, o.ReplicasPerMaster = 3, 1
	}
	if o.NodeTimeout == 0 {
		o.NodeTimeout = 2 * time.Second
	}
	n := o.Masters * (1 + o.ReplicasPerMaster)
	c := &Cluster{}
	for len(c.Nodes) < n {
		p, err := withFreePorts(2, func(ports []int) (*Process, error) {
			return startRedis(ctx, RedisOptions{Dir: o.Dir, Args: o.Args, Detach: o.Detach}, ports[0], []string{
				"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
				"--cluster-node-timeout", strconv.FormatInt(o.NodeTimeout.Milliseconds(), 10),
				"--cluster-port", strconv.Itoa(ports[1]),
				"--cluster-replica-validity-factor", "0",
				// replicas copy their master as soon as they join, so
				// the cluster is in step when it is declared up
				"--repl-diskless-sync-delay", "0",
				"--appendonly", "no",
			})
		})
		if err != nil {
			c.Stop()
			return nil, err
		}
		c.Nodes = append(c.Nodes, p)
	}
	args := append([]string{"--cluster", "create"}, c.Seeds()...)
	args = append(args, "--cluster-replicas", strconv.Itoa(o.ReplicasPerMaster), "--cluster-yes")
	if out, err := exec.CommandContext(ctx, "redis-cli", args...).CombinedOutput(); err != nil {
		c.Stop()
		return nil, fmt.Errorf("redis-cli --cluster create: %w\n%s", err, out)
	}
	if err := c.WaitHealthy(ctx, o.Masters, o.Masters*o.ReplicasPerMaster); err != nil {
		c.Stop()
		return nil, err
	}
	return c, nil
}

// WaitHealthy waits until every running node says the cluster is ok and
// sees masters masters serving slots and replicas replicas, none failing;
// every replica has copied its master and follows it; and redis-cli
// --cluster check finds every slot served and agreed on.
func (c *Cluster) WaitHealthy(ctx context.Context, masters, replicas int) error {
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var last error
	for {
		if last = c.healthy(wctx, masters, replicas); last == nil {
			return nil
		}
		select {
		case <-wctx.Done():
			return fmt.Errorf("the cluster did not become healthy: %w", last)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (c *Cluster) healthy(ctx context.Context, masters, replicas int) error {
	var live *Process
	for _, p := range c.Nodes {
		if !p.Running() {
			continue
		}
		live = p
		cl := p.Client()
		info, err := cl.ClusterInfo(ctx).Result()
		var nodes []ClusterNode
		if err == nil {
			nodes, err = readNodes(ctx, cl)
		}
		var repl string
		if err == nil {
			repl, err = cl.Info(ctx, "replication").Result()
		}
		_ = cl.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", p.Name, err)
		}
		if strings.Contains(repl, "role:slave") &&
			(!strings.Contains(repl, "master_link_status:up") || !strings.Contains(repl, "master_sync_in_progress:0")) {
			return fmt.Errorf("%s: a replica that has not copied its master yet", p.Name)
		}
		if !strings.Contains(info, "cluster_state:ok") {
			return fmt.Errorf("%s: cluster_state is not ok", p.Name)
		}
		m, r := 0, 0
		for _, n := range nodes {
			switch {
			case n.Failing:
			case n.Master && len(n.Slots) > 0:
				m++
			case !n.Master && n.MasterID != "":
				r++
			}
		}
		if m != masters || r != replicas {
			return fmt.Errorf("%s sees %d masters and %d replicas, want %d and %d", p.Name, m, r, masters, replicas)
		}
	}
	if live == nil {
		return errors.New("no node is running")
	}
	out, err := exec.CommandContext(ctx, "redis-cli", "--cluster", "check", live.Addr()).CombinedOutput()
	if err != nil {
		return fmt.Errorf("redis-cli --cluster check: %w\n%s", err, out)
	}
	return nil
}

// ClusterNode is one line of CLUSTER NODES.
type ClusterNode struct {
	ID       string
	Addr     string // host:port for clients
	Master   bool
	MasterID string // a replica's master
	Failing  bool   // fail, fail? or noaddr
	Slots    []string
}

// ClusterNodes asks a running node for the cluster's view of itself.
func (c *Cluster) ClusterNodes(ctx context.Context) ([]ClusterNode, error) {
	for _, p := range c.Nodes {
		if !p.Running() {
			continue
		}
		cl := p.Client()
		nodes, err := readNodes(ctx, cl)
		_ = cl.Close()
		if err == nil {
			return nodes, nil
		}
	}
	return nil, errors.New("no node answers CLUSTER NODES")
}

func readNodes(ctx context.Context, cl *goredis.Client) ([]ClusterNode, error) {
	text, err := cl.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, err
	}
	var out []ClusterNode
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 8 {
			continue
		}
		addr, _, _ := strings.Cut(f[1], "@")
		flags := "," + f[2] + ","
		n := ClusterNode{ID: f[0], Addr: addr, Master: strings.Contains(flags, ",master,"),
			Failing: strings.Contains(flags, ",fail,") || strings.Contains(flags, ",fail?,") || strings.Contains(flags, ",noaddr,")}
		if f[3] != "-" {
			n.MasterID = f[3]
		}
		n.Slots = f[8:]
		out = append(out, n)
	}
	return out, sc.Err()
}

// WritePids records the cluster's nodes in dir/pids, for StopPids.
func (c *Cluster) WritePids(dir string) error {
	var b strings.Builder
	for _, n := range c.Nodes {
		fmt.Fprintf(&b, "%d\n", n.Pid())
	}
	return os.WriteFile(filepath.Join(dir, "pids"), []byte(b.String()), 0o644)
}

// StopPids kills the processes WritePids recorded in dir and waits for
// them to be gone.
func StopPids(dir string) error {
	b, err := os.ReadFile(filepath.Join(dir, "pids"))
	if err != nil {
		return err
	}
	var errs []error
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil {
			errs = append(errs, fmt.Errorf("pids: %q", f))
			continue
		}
		p := &Process{Name: "pid " + f, pid: pid}
		errs = append(errs, p.Kill())
	}
	return errors.Join(errs...)
}
