//go:build unix

// Command redis-cluster starts a throwaway Redis Cluster on loopback for
// CI (three masters, three replicas, redis-server from PATH, ports from
// REPLYONCE_TEST_PORTS) and leaves it running, or stops one it started:
//
//	go run ./scripts/redis-cluster start DIR   # prints the seed addresses
//	go run ./scripts/redis-cluster stop DIR
//
// DIR holds the nodes' files and the pids that stop reads. The tests find
// the cluster through REPLYONCE_TEST_REDIS_CLUSTER, set to what start
// prints.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/replyonce/gateway/stores/testservers"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "redis-cluster:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 2 || (args[0] != "start" && args[0] != "stop") {
		return fmt.Errorf("usage: redis-cluster start|stop DIR")
	}
	dir, err := filepath.Abs(args[1])
	if err != nil {
		return err
	}
	if args[0] == "stop" {
		return testservers.StopPids(dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := testservers.StartCluster(ctx, testservers.ClusterOptions{Dir: dir, Detach: true})
	if err != nil {
		return err
	}
	if err := c.WritePids(dir); err != nil {
		c.Stop()
		return err
	}
	fmt.Println(strings.Join(c.Seeds(), ","))
	return nil
}
