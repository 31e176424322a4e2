//go:build unix

package testservers

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"
)

// Need ends the test unless the programs are installed: it fails with CI
// set (CI must run every test) and skips otherwise.
func Need(t testing.TB, programs ...string) {
	t.Helper()
	for _, prog := range programs {
		if _, err := exec.LookPath(prog); err != nil {
			if os.Getenv("CI") != "" {
				t.Fatalf("%s is not installed: CI must run this test", prog)
			}
			t.Skipf("%s is not installed", prog)
		}
	}
}

// needPostgres is Need for the PostgreSQL server binaries.
func needPostgres(t testing.TB) {
	t.Helper()
	if _, err := PostgresBin(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v: CI must run this test", err)
		}
		t.Skip(err)
	}
}

func ctxFor(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// stopAtEnd kills p when the test ends, showing its log if the test
// failed.
func stopAtEnd(t testing.TB, p *Process) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log (end):\n%s", p.Name, p.Log())
		}
		_ = p.Kill()
	})
}

// stopPostgresAtEnd stops p (whichever process it runs as by then, after
// restarts) when the test ends. Immediate shutdown ends its backends too,
// which a SIGKILL of the postmaster alone would leave behind for a while.
func stopPostgresAtEnd(t testing.TB, p *Postgres) {
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("%s log (end):\n%s", p.Name, p.Log())
		}
		if err := p.Stop(true); err != nil {
			_ = p.Kill()
		}
	})
}

// Redis starts a redis-server for the test; args as RedisOptions.Args.
func Redis(t testing.TB, args ...string) *Process {
	t.Helper()
	Need(t, "redis-server")
	p, err := StartRedis(ctxFor(t), RedisOptions{Dir: t.TempDir(), Args: args})
	if err != nil {
		t.Fatal(err)
	}
	stopAtEnd(t, p)
	return p
}

// RedisReplica starts a replica of master for the test.
func RedisReplica(t testing.TB, master *Process, args ...string) *Process {
	t.Helper()
	p, err := StartRedisReplica(ctxFor(t), master, RedisOptions{Dir: t.TempDir(), Args: args})
	if err != nil {
		t.Fatal(err)
	}
	stopAtEnd(t, p)
	return p
}

// Sentinel starts a Sentinel watching master as name for the test.
func Sentinel(t testing.TB, name string, master *Process) *Process {
	t.Helper()
	p, err := StartSentinel(ctxFor(t), name, master, RedisOptions{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	stopAtEnd(t, p)
	return p
}

// NewCluster starts a Redis Cluster for the test.
func NewCluster(t testing.TB, o ClusterOptions) *Cluster {
	t.Helper()
	Need(t, "redis-server", "redis-cli")
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	c, err := StartCluster(ctxFor(t), o)
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		stopAtEnd(t, n)
	}
	return c
}

// NewPostgres starts a fresh PostgreSQL cluster for the test, with extra
// settings (name → value).
func NewPostgres(t testing.TB, settings map[string]string) *Postgres {
	t.Helper()
	needPostgres(t)
	dir := postgresDir(t)
	p, err := StartPostgres(ctxFor(t), PostgresOptions{Dir: dir, Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	stopPostgresAtEnd(t, p)
	return p
}

// NewStandby starts a streaming standby of primary for the test.
func NewStandby(t testing.TB, primary *Postgres, settings map[string]string) *Postgres {
	t.Helper()
	s, err := primary.StartStandby(ctxFor(t), PostgresOptions{Dir: filepath.Dir(filepath.Dir(primary.Data)), Settings: settings})
	if err != nil {
		t.Fatal(err)
	}
	stopPostgresAtEnd(t, s)
	return s
}

// postgresDir is a directory the server's user can reach (t.TempDir's
// parents are private to this user), removed at the end.
func postgresDir(t testing.TB) string {
	dir, err := os.MkdirTemp("", "replyonce-pg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}
