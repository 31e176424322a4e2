//go:build unix

// Command storecost counts the store work one accepted event costs, per
// store and delivery mode: the statements PostgreSQL ran (from
// pg_stat_statements) and the commands Redis ran (from INFO commandstats),
// with the bytes written (WAL, network) and the server's execution time.
// It starts a PostgreSQL and a Redis of its own (stores/testservers), so
// nothing else on the machine adds to the counts, runs `gateway bench`
// against each (one full-speed pass), and divides what the server counted
// by the events accepted.
//
//	go run ./scripts/storecost                         # builds ./cmd/gateway
//	go run ./scripts/storecost -gateway /tmp/gw-old -modes inline
//
// Counts and bytes do not depend on how loaded the machine is; the
// execution times do, so compare them only as ratios within one run. The
// server's CPU time (from /proc: the server process, its live children and
// those it reaped, so every PostgreSQL backend of the pass) is counted
// too: unlike the execution times, it leaves out the time a statement
// waited for a CPU on a busy machine, though not the server's own
// background work (its checkpointer, WAL writer, vacuum), and it is read
// in clock ticks (10 ms), so a pass of a few thousand events reads it to a
// few per cent. For PostgreSQL it also counts the commits and sessions of
// the pass (pg_stat_database), the statements planned and the time spent
// planning them (a prepared statement gets a plan of its own at each of
// its first five executions on a session, and at every execution while
// PostgreSQL finds no generic plan as cheap), and what a session's start costs the
// server: it opens and closes sessions of its own before the passes and
// reads the server's CPU around them. A session start (a backend forked
// and set up) costs tens of milliseconds of CPU, so a pass in which the
// gateway's pool grows to 30 connections spends more of the server's CPU
// starting them than on a few thousand events' statements, where a
// long-running gateway starts them once; the report gives the CPU less
// the pass's session starts as well.
// Issue #29 uses it to say where a queued event's cost goes.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/replyonce/gateway/stores/testservers"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "storecost:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("storecost", flag.ContinueOnError)
	gateway := fs.String("gateway", "", "gateway binary to bench (default: build ./cmd/gateway)")
	n := fs.Int("n", 3000, "requests in the bench's pass (20 % are redeliveries)")
	modes := fs.String("modes", "inline,queued", "delivery modes to count (an old binary without -mode: inline)")
	kinds := fs.String("stores", "postgres,redis", "stores to count")
	top := fs.Int("top", 8, "statements or commands listed per run")
	if err := fs.Parse(args); err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "storecost-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	bin := *gateway
	if bin == "" {
		bin = filepath.Join(dir, "gateway")
		build := exec.CommandContext(ctx, "go", "build", "-o", bin, "./cmd/gateway")
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("build the gateway: %w", err)
		}
	}
	for _, kind := range strings.Split(*kinds, ",") {
		var c counter
		switch kind {
		case "postgres":
			pg, err := startPostgres(ctx, dir)
			if err != nil {
				return err
			}
			defer func() { _ = pg.srv.Stop(false) }()
			c = pg
			if pg.session, err = pg.sessionCPU(ctx); err != nil {
				return err
			}
			fmt.Fprintf(out, "\npostgres: a session's start, one statement and end cost the server %.1f ms of CPU (%d sessions)\n",
				float64(pg.session)/float64(time.Millisecond), calibrationSessions)
		case "redis":
			rd, err := testservers.StartRedis(ctx, testservers.RedisOptions{Dir: dir})
			if err != nil {
				return err
			}
			defer func() { _ = rd.Kill() }()
			c = &redisCounter{addr: rd.Addr(), client: rd}
		default:
			return fmt.Errorf("-stores: %q is not postgres or redis", kind)
		}
		for _, mode := range strings.Split(*modes, ",") {
			if err := c.reset(ctx); err != nil {
				return err
			}
			cpu0, err := treeCPU(c.pid())
			if err != nil {
				return err
			}
			events, err := bench(ctx, bin, kind, c.url(), mode, *n)
			if err != nil {
				return err
			}
			// The pass's backends have exited with the gateway; give
			// the server a moment to reap them.
			time.Sleep(200 * time.Millisecond)
			cpu1, err := treeCPU(c.pid())
			if err != nil {
				return err
			}
			rows, totals, err := c.read(ctx)
			if err != nil {
				return err
			}
			totals["cpu"] = float64(cpu1-cpu0) / float64(time.Microsecond)
			if pg, ok := c.(*pgCounter); ok {
				totals["session cpu"] = float64(pg.session) / float64(time.Microsecond)
			}
			report(out, kind, mode, events, rows, totals, *top)
		}
	}
	return nil
}

// row is one statement or command and what the server counted for it.
type row struct {
	what  string
	calls float64
	ms    float64
	bytes float64 // WAL bytes (Postgres); 0 for Redis, which does not count them per command
	plans float64 // times planned (Postgres); 0 for Redis
}

// counter reads one server's counts.
type counter interface {
	url() string
	reset(ctx context.Context) error
	// read returns the counted rows and the totals (calls, bytes, ms;
	// bytes: WAL for Postgres, network input for Redis).
	read(ctx context.Context) ([]row, map[string]float64, error)
	// pid is the server's process.
	pid() int
}

// calibrationSessions is how many sessions storecost opens to time one
// session's start on the server.
const calibrationSessions = 20

// sessionCPU is the server's CPU for one session started, run (one
// statement) and ended, from calibrationSessions of them opened one after
// another: pgx's own start, without the statements a gateway prepares on
// each connection, so a lower bound on what the gateway's cost.
func (c *pgCounter) sessionCPU(ctx context.Context) (time.Duration, error) {
	cpu0, err := treeCPU(c.pid())
	if err != nil {
		return 0, err
	}
	for range calibrationSessions {
		if err := c.exec(ctx, "SELECT 1"); err != nil {
			return 0, err
		}
	}
	// Let the server reap the last backends.
	time.Sleep(200 * time.Millisecond)
	cpu1, err := treeCPU(c.pid())
	if err != nil {
		return 0, err
	}
	return (cpu1 - cpu0) / calibrationSessions, nil
}

// treeCPU is the CPU time (user and system) of process pid, of its live
// children, and of the children it has waited for, from /proc.
func treeCPU(pid int) (time.Duration, error) {
	root, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("server CPU: %w", err)
	}
	_, ticks, err := statCPU(string(root))
	if err != nil {
		return 0, err
	}
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		if ppid, t, err := statCPU(string(b)); err == nil && ppid == pid {
			ticks += t
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}

// clockTicks is USER_HZ, the unit of /proc/PID/stat's times: 100 on every
// Linux architecture the gateway builds for.
const clockTicks = 100

// statCPU reads a /proc/PID/stat line: the parent's pid and utime + stime
// + cutime + cstime, in clock ticks.
func statCPU(stat string) (ppid int, ticks int64, err error) {
	// The command name (field 2) is in parentheses and may hold spaces.
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("server CPU: bad stat line %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state): ppid is field 4, utime..cstime 14..17.
	if len(f) < 15 {
		return 0, 0, fmt.Errorf("server CPU: short stat line %q", stat)
	}
	if ppid, err = strconv.Atoi(f[1]); err != nil {
		return 0, 0, fmt.Errorf("server CPU: %w", err)
	}
	for _, s := range f[11:15] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("server CPU: %w", err)
		}
		ticks += v
	}
	return ppid, ticks, nil
}

// bench runs one pass of gateway bench and returns the events the gateway
// accepted (first deliveries, not redeliveries).
func bench(ctx context.Context, bin, kind, url, mode string, n int) (int, error) {
	args := []string{"bench", "--store", kind, "--" + kind, url, "--n", strconv.Itoa(n), "--half-n", "-1", "--json", "--quiet"}
	if mode != "inline" {
		args = append(args, "--mode", mode)
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stderr = os.Stderr
	raw, err := cmd.Output()
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", bin, strings.Join(args, " "), err)
	}
	var rep struct {
		Repeats []struct {
			Gateway struct {
				Answered int `json:"answered_delivered"`
			} `json:"gateway"`
		} `json:"repeats"`
	}
	if err := json.Unmarshal(raw, &rep); err != nil || len(rep.Repeats) == 0 {
		return 0, fmt.Errorf("reading the bench report: %v", err)
	}
	return rep.Repeats[0].Gateway.Answered, nil
}

func report(out io.Writer, kind, mode string, events int, rows []row, totals map[string]float64, top int) {
	per := func(v float64) float64 { return v / float64(max(events, 1)) }
	unit := map[string]string{"postgres": "WAL bytes", "redis": "bytes in"}[kind]
	fmt.Fprintf(out, "\n== %s %s: %d events accepted; per event: %.2f %s, %.0f %s, %.1f µs server time, %.1f µs server CPU\n",
		kind, mode, events, per(totals["calls"]), map[string]string{"postgres": "statements", "redis": "commands"}[kind],
		per(totals["bytes"]), unit, per(totals["ms"])*1000, per(totals["cpu"]))
	if kind == "postgres" {
		fmt.Fprintf(out, "   %.2f commits per event, %.0f sessions in the pass; server CPU less their starts: %.1f µs per event\n",
			per(totals["commits"]), totals["sessions"], per(totals["cpu"]-max(totals["sessions"]-1, 0)*totals["session cpu"]))
		fmt.Fprintf(out, "   %.2f plans per event, %.1f µs of planning per event\n", per(totals["plans"]), per(totals["plan ms"])*1000)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].calls > rows[j].calls })
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  per event\tµs each\tbytes each\tplanned\twhat")
	for i, r := range rows {
		if i == top {
			break
		}
		each, bytes, planned := 0.0, 0.0, 0.0
		if r.calls > 0 {
			each, bytes, planned = r.ms*1000/r.calls, r.bytes/r.calls, r.plans/r.calls
		}
		fmt.Fprintf(tw, "  %.2f\t%.1f\t%.0f\t%.2f\t%s\n", per(r.calls), each, bytes, planned, r.what)
	}
	_ = tw.Flush()
}

type pgCounter struct {
	srv *testservers.Postgres
	// session is the server's CPU per session (sessionCPU).
	session time.Duration
}

func startPostgres(ctx context.Context, dir string) (*pgCounter, error) {
	srv, err := testservers.StartPostgres(ctx, testservers.PostgresOptions{Dir: dir,
		// The bench refuses a server that does not flush its commits, as
		// production does not (and fsync changes what a commit costs).
		Settings: map[string]string{"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all",
			"pg_stat_statements.track_planning": "on", "fsync": "on", "full_page_writes": "on"}})
	if err != nil {
		return nil, err
	}
	c := &pgCounter{srv: srv}
	if err := c.exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements"); err != nil {
		_ = srv.Stop(false)
		return nil, err
	}
	return c, nil
}

func (c *pgCounter) url() string { return c.srv.DSN("postgres") }

func (c *pgCounter) pid() int { return c.srv.Pid() }

func (c *pgCounter) exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, c.url())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	return err
}

func (c *pgCounter) reset(ctx context.Context) error {
	return c.exec(ctx, "SELECT pg_stat_statements_reset(), pg_stat_reset()")
}

func (c *pgCounter) read(ctx context.Context) ([]row, map[string]float64, error) {
	conn, err := pgx.Connect(ctx, c.url())
	if err != nil {
		return nil, nil, err
	}
	defer conn.Close(ctx)
	totals := map[string]float64{}
	// Commits and sessions of the database the gateway uses (this
	// program's own few included): a commit of a write flushes WAL, a
	// read outside a transaction counts as one too; a session is a
	// backend started, whose statements pgx prepares again.
	var commits, sessions float64
	if err := conn.QueryRow(ctx, `SELECT xact_commit::float8, sessions::float8 FROM pg_stat_database
		WHERE datname = current_database()`).Scan(&commits, &sessions); err != nil {
		return nil, nil, err
	}
	// The count includes this session, whose CPU is not in the pass's:
	// the report leaves it out of the correction.
	totals["commits"], totals["sessions"] = commits, sessions
	rs, err := conn.Query(ctx, `SELECT calls, total_exec_time, wal_bytes::float8, plans, total_plan_time, query FROM pg_stat_statements
		WHERE query !~* 'pg_stat_statements|^\s*(begin|commit|rollback)'`)
	if err != nil {
		return nil, nil, err
	}
	defer rs.Close()
	var rows []row
	for rs.Next() {
		var calls int64
		var ms, wal, planMS float64
		var plans int64
		var q string
		if err := rs.Scan(&calls, &ms, &wal, &plans, &planMS, &q); err != nil {
			return nil, nil, err
		}
		totals["plans"] += float64(plans)
		totals["plan ms"] += planMS
		totals["calls"] += float64(calls)
		totals["ms"] += ms
		totals["bytes"] += wal
		rows = append(rows, row{what: shorten(q), calls: float64(calls), ms: ms, bytes: wal, plans: float64(plans)})
	}
	return rows, totals, rs.Err()
}

// shorten is a statement on one line, its table names cut to their
// suffix, at most 100 characters.
func shorten(q string) string {
	q = strings.Join(strings.Fields(q), " ")
	if len(q) > 100 {
		q = q[:100] + "…"
	}
	return q
}

type redisCounter struct {
	addr   string
	client *testservers.Process
}

func (c *redisCounter) url() string { return "redis://" + c.addr + "/0" }

func (c *redisCounter) pid() int { return c.client.Pid() }

func (c *redisCounter) reset(ctx context.Context) error {
	return c.client.Client().ConfigResetStat(ctx).Err()
}

func (c *redisCounter) read(ctx context.Context) ([]row, map[string]float64, error) {
	cl := c.client.Client()
	defer cl.Close()
	cmds, err := cl.Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, nil, err
	}
	stats, err := cl.Info(ctx, "stats").Result()
	if err != nil {
		return nil, nil, err
	}
	rows, totals := parseCommandStats(cmds)
	for _, line := range strings.Split(stats, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_net_input_bytes:"); ok {
			totals["bytes"], _ = strconv.ParseFloat(v, 64)
		}
	}
	return rows, totals, nil
}

// parseCommandStats reads INFO commandstats: lines such as
// "cmdstat_evalsha:calls=5054,usec=112682,usec_per_call=22.30,...".
// Commands a script runs are counted too, each under its own name; the
// script's own usec includes theirs, so the total time is the scripts'
// plus the commands sent directly (those not run by a script cannot be
// told apart here, so the total counts every command's time once and
// may count a script's inner commands twice: read it as an upper bound).
func parseCommandStats(info string) ([]row, map[string]float64) {
	totals := map[string]float64{}
	var rows []row
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		r := row{what: name}
		for _, kv := range strings.Split(rest, ",") {
			k, v, _ := strings.Cut(kv, "=")
			f, _ := strconv.ParseFloat(v, 64)
			switch k {
			case "calls":
				r.calls = f
			case "usec":
				r.ms = f / 1000
			}
		}
		if r.what == "config|resetstat" || r.what == "info" {
			continue // this program's own
		}
		totals["calls"] += r.calls
		totals["ms"] += r.ms
		rows = append(rows, r)
	}
	return rows, totals
}
