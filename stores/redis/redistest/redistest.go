// Package redistest starts throwaway Redis servers for tests that need a
// server of their own: one whose settings they change (CONFIG SET), or
// that they kill. Each listens on a unix socket in a fresh temporary
// directory, so it needs no port and never meets another test's server.
//
// It needs redis-server on the PATH. Without it a test skips, and fails
// when CI is set: there a skipped test would hide the case.
package redistest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// Start runs redis-server with the given extra arguments (for example
// "--appendonly", "yes") and returns its URL, unix://…/redis.sock. The
// server is killed, and its directory removed, when the test ends.
// Persistence is off unless args turn it on.
func Start(t testing.TB, args ...string) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is not on the PATH; CI installs it")
		}
		t.Skip("redis-server is not on the PATH: install it to run this test")
	}
	// A short directory of its own: a unix socket's path is limited to
	// about 100 bytes, and test names make t.TempDir long.
	dir, err := os.MkdirTemp("", "redistest")
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "redis.sock")
	argv := append([]string{"--port", "0", "--unixsocket", sock, "--dir", dir, "--save", "", "--appendonly", "no",
		"--logfile", filepath.Join(dir, "redis.log")}, args...)
	cmd := exec.Command(bin, argv...)
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		t.Fatalf("start redis-server: %v", err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(exited)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		_ = os.RemoveAll(dir)
	})
	url := "unix://" + sock
	opts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(opts)
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		err := c.Ping(ctx).Err()
		cancel()
		if err == nil {
			return url
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server exited at start: %s", log)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("redis-server on %s does not answer: %v", sock, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
