package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"

	"github.com/replyonce/gateway/internal/cputime"
)

// serverCPU reads the CPU time a store server has used so far. With it, a
// gateway pass on Postgres or Redis can say what the work it moved out of
// this process cost: on a machine whose cores the server shares with the
// bench, that CPU is part of the gateway's price per request.
type serverCPU func(ctx context.Context) (time.Duration, error)

// redisServerCPU is Redis's own account of its CPU.
func redisServerCPU(client goredis.UniversalClient) serverCPU {
	return func(ctx context.Context) (time.Duration, error) {
		info, err := client.Info(ctx, "cpu").Result()
		if err != nil {
			return 0, fmt.Errorf("redis INFO cpu: %w", err)
		}
		return cputime.RedisServer(info)
	}
}

// clockTick is the unit of the CPU times in /proc/PID/stat (USER_HZ), which
// Linux fixes at 100 per second for user space whatever the kernel's HZ.
const clockTick = 10 * time.Millisecond

// localPostgresCPU finds the PostgreSQL server behind pool on this host, if
// it is here, and reads its CPU from /proc: the postmaster's own, that of
// its children that have exited (which it has reaped), and that of those
// still running (backends, WAL writer, checkpointer...). It returns nil,
// with the reason, when the server is not a local process it can read.
//
// The backend's process id alone could name an unrelated local process when
// the server is elsewhere, so the postmaster must also be working in the
// server's data directory (PostgreSQL changes into it at start).
func localPostgresCPU(ctx context.Context, pool *pgxpool.Pool, proc string) (serverCPU, string) {
	var (
		backend int
		dataDir string
	)
	if err := pool.QueryRow(ctx, "SELECT pg_backend_pid(), current_setting('data_directory')").Scan(&backend, &dataDir); err != nil {
		return nil, "server CPU not measured: " + err.Error()
	}
	postmaster, err := findPostmaster(proc, backend, dataDir)
	if err != nil {
		return nil, "server CPU not measured: " + err.Error()
	}
	return func(context.Context) (time.Duration, error) {
		return postgresCPU(proc, postmaster)
	}, fmt.Sprintf("server CPU from %s (postmaster %d and its children)", proc, postmaster)
}

// findPostmaster returns the parent of backend, if both are PostgreSQL
// processes in this /proc and the parent works in dataDir.
func findPostmaster(proc string, backend int, dataDir string) (int, error) {
	st, err := readProcStat(proc, backend)
	if err != nil || st.comm != "postgres" {
		return 0, errors.New("the server is not a process on this host")
	}
	pm, err := readProcStat(proc, st.ppid)
	if err != nil || pm.comm != "postgres" {
		return 0, fmt.Errorf("the server's postmaster is not readable in %s", proc)
	}
	cwd, err := os.Readlink(filepath.Join(proc, strconv.Itoa(st.ppid), "cwd"))
	if err != nil || filepath.Clean(cwd) != filepath.Clean(dataDir) {
		return 0, fmt.Errorf("no postmaster on this host works in the server's data directory %s", dataDir)
	}
	return st.ppid, nil
}

func postgresCPU(proc string, postmaster int) (time.Duration, error) {
	pm, err := readProcStat(proc, postmaster)
	if err != nil {
		return 0, fmt.Errorf("postgres server CPU: %w", err)
	}
	ticks := pm.utime + pm.stime + pm.cutime + pm.cstime
	entries, err := os.ReadDir(proc)
	if err != nil {
		return 0, fmt.Errorf("postgres server CPU: %w", err)
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readProcStat(proc, pid)
		if err != nil || st.ppid != postmaster {
			continue // not a child, or gone since the listing: its time is in the postmaster's cutime
		}
		ticks += st.utime + st.stime
	}
	return time.Duration(ticks) * clockTick, nil
}

type procStat struct {
	comm                         string
	ppid                         int
	utime, stime, cutime, cstime int64
}

// readProcStat parses the fields of /proc/PID/stat the bench needs. The
// command name is in parentheses and may itself hold spaces or
// parentheses, so the fields are counted from the last ')'.
func readProcStat(proc string, pid int) (procStat, error) {
	b, err := os.ReadFile(filepath.Join(proc, strconv.Itoa(pid), "stat"))
	if err != nil {
		return procStat{}, err
	}
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return procStat{}, fmt.Errorf("%s/%d/stat: no command name", proc, pid)
	}
	// After the name: state(3) ppid(4) ... utime(14) stime(15) cutime(16) cstime(17).
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 15 {
		return procStat{}, fmt.Errorf("%s/%d/stat: %d fields after the name", proc, pid, len(f))
	}
	st := procStat{comm: string(b[open+1 : end])}
	var perr error
	num := func(i int) int64 {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil && perr == nil {
			perr = fmt.Errorf("%s/%d/stat field %d: %w", proc, pid, i+3, err)
		}
		return n
	}
	st.ppid = int(num(1))
	st.utime, st.stime, st.cutime, st.cstime = num(11), num(12), num(13), num(14)
	return st, perr
}
