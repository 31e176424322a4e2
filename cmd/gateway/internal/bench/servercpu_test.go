package bench

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// writeStat writes a /proc/PID/stat line with the fields the bench reads
// and fillers for the rest, as the kernel lays them out.
func writeStat(t *testing.T, proc string, pid int, comm string, ppid int, utime, stime, cutime, cstime int64) {
	t.Helper()
	dir := filepath.Join(proc, fmt.Sprint(pid))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	line := fmt.Sprintf("%d (%s) S %d 1 1 0 -1 4194560 100 0 0 0 %d %d %d %d 20 0 1 0 100 1000 10\n",
		pid, comm, ppid, utime, stime, cutime, cstime)
	if err := os.WriteFile(filepath.Join(dir, "stat"), []byte(line), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestPostgresCPUSumsThePostmasterAndItsChildren(t *testing.T) {
	proc := t.TempDir()
	writeStat(t, proc, 100, "postgres", 1, 5, 3, 40, 2) // 8 own + 42 of children it reaped
	writeStat(t, proc, 101, "postgres", 100, 7, 1, 0, 0)
	writeStat(t, proc, 102, "postgres", 100, 20, 10, 0, 0)
	writeStat(t, proc, 200, "other (with) parens", 1, 999, 999, 0, 0) // not a child
	writeStat(t, proc, 201, "postgres", 200, 999, 999, 0, 0)          // another server's backend
	if err := os.MkdirAll(filepath.Join(proc, "self"), 0o755); err != nil {
		t.Fatal(err)
	}

	got, err := postgresCPU(proc, 100)
	if err != nil {
		t.Fatal(err)
	}
	if want := time.Duration(8+42+8+30) * clockTick; got != want {
		t.Fatalf("postgres CPU = %v, want %v", got, want)
	}

	// A backend that exits is reaped into the postmaster's cutime: the
	// total must not go backwards or count it twice.
	if err := os.RemoveAll(filepath.Join(proc, "102")); err != nil {
		t.Fatal(err)
	}
	writeStat(t, proc, 100, "postgres", 1, 5, 3, 70, 2)
	if got2, err := postgresCPU(proc, 100); err != nil || got2 != got {
		t.Fatalf("after a backend exited: %v, %v; want %v", got2, err, got)
	}

	if _, err := postgresCPU(proc, 300); err == nil {
		t.Fatal("a postmaster that is not there must be an error, not zero CPU")
	}
}

func TestFindPostmasterWantsTheServersDataDirectory(t *testing.T) {
	proc := t.TempDir()
	writeStat(t, proc, 100, "postgres", 1, 0, 0, 0, 0)
	writeStat(t, proc, 101, "postgres", 100, 0, 0, 0, 0)
	writeStat(t, proc, 300, "bash", 1, 0, 0, 0, 0)
	data := t.TempDir()
	if err := os.Symlink(data, filepath.Join(proc, "100", "cwd")); err != nil {
		t.Fatal(err)
	}

	if pm, err := findPostmaster(proc, 101, data+"/"); err != nil || pm != 100 {
		t.Fatalf("local server: postmaster %d, %v; want 100", pm, err)
	}
	// A remote server's backend id that happens to name a local process.
	if _, err := findPostmaster(proc, 101, "/elsewhere/data"); err == nil || !strings.Contains(err.Error(), "/elsewhere/data") {
		t.Errorf("another data directory: err = %v, want one naming it", err)
	}
	if _, err := findPostmaster(proc, 300, data); err == nil {
		t.Error("a backend that is not postgres must not be taken for one")
	}
	if _, err := findPostmaster(proc, 999, data); err == nil {
		t.Error("a backend that is not here must not be taken for one")
	}
}

func TestReadProcStatTakesTheNameUpToTheLastParenthesis(t *testing.T) {
	proc := t.TempDir()
	writeStat(t, proc, 7, "a) b (c", 3, 11, 12, 13, 14)
	st, err := readProcStat(proc, 7)
	if err != nil {
		t.Fatal(err)
	}
	want := procStat{comm: "a) b (c", ppid: 3, utime: 11, stime: 12, cutime: 13, cstime: 14}
	if st != want {
		t.Fatalf("got %+v, want %+v", st, want)
	}

	if err := os.WriteFile(filepath.Join(proc, "7", "stat"), []byte("7 (x) S 3 1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readProcStat(proc, 7); err == nil || !strings.Contains(err.Error(), "fields") {
		t.Fatalf("a short stat line: err = %v, want one saying so", err)
	}
}

func TestRedisServerCPUGrowsWithWork(t *testing.T) {
	url := os.Getenv("REPLYONCE_TEST_REDIS")
	if url == "" {
		t.Skip("REPLYONCE_TEST_REDIS is not set")
	}
	opts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	client := goredis.NewClient(opts)
	defer client.Close()
	ctx := context.Background()
	read := redisServerCPU(client)
	before, err := read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	key := "replyonce-bench-test-cpu:" + runID()
	defer client.Del(ctx, key)
	// Enough work to be sure to move Redis's counter (microsecond resolution).
	for range 2000 {
		if err := client.Incr(ctx, key).Err(); err != nil {
			t.Fatal(err)
		}
	}
	after, err := read(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if after <= before {
		t.Fatalf("server CPU went from %v to %v over 2000 commands", before, after)
	}
}
