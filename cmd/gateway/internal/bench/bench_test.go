package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

// TestMain fails the package if a run leaves a goroutine behind: every
// server, sender and transport a run starts must be stopped by the run.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func shortConfig(store string) Config {
	return Config{Store: store, Requests: 200, HalfLoad: 100, Concurrency: 8, Duplicates: 0.2, BodySize: 512,
		SignForward: true, Dir: os.TempDir()}
}

func runShort(t *testing.T, cfg Config) *Report {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rep, err := Run(ctx, cfg)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkSane(t, cfg, rep)
	return rep
}

// checkSane asserts what every run must show, whatever the machine's speed.
func checkSane(t *testing.T, cfg Config, rep *Report) {
	t.Helper()
	if len(rep.Repeats) != max(cfg.Repeat, 1) {
		t.Fatalf("%d repeats, want %d", len(rep.Repeats), max(cfg.Repeat, 1))
	}
	for _, rr := range rep.Repeats {
		for _, p := range []*Pass{&rr.Direct, &rr.Baseline, &rr.Gateway, rr.BaselineHalf, rr.GatewayHalf} {
			if p == nil {
				t.Fatal("a half-load pass is missing")
			}
			want := cfg.Requests
			if p.Offered > 0 {
				want = cfg.HalfLoad
			}
			if p.Requests != want || p.Errors != 0 {
				t.Errorf("%s: %d requests, %d errors (%s); want %d and none", p.Name, p.Requests, p.Errors, p.FirstError, want)
			}
			if p.Unique+p.Redeliveries != p.Requests {
				t.Errorf("%s: %d unique + %d redeliveries != %d requests", p.Name, p.Unique, p.Redeliveries, p.Requests)
			}
			// Slots meant as redeliveries before anything completed send a
			// new event instead, so there may be a few fewer, never more.
			planned := int(math.Floor(float64(p.Requests) * cfg.Duplicates))
			if p.Redeliveries > planned || p.Redeliveries < planned-cfg.Concurrency {
				t.Errorf("%s: %d redeliveries, want about %d", p.Name, p.Redeliveries, planned)
			}
			if p.Throughput <= 0 || p.P50ms <= 0 || p.P50ms > p.P95ms || p.P95ms > p.P99ms || p.P99ms > p.MaxMs || p.CPUus <= 0 {
				t.Errorf("%s: implausible figures %+v", p.Name, *p)
			}
		}
		for _, p := range []*Pass{&rr.Gateway, rr.GatewayHalf} {
			if p.ForwardsPerUnique != 1 || p.Forwards != p.Unique || p.Missing != 0 || p.Repeated != 0 {
				t.Errorf("%s: %d forwards for %d unique events (%.3f), %d missing, %d repeated", p.Name, p.Forwards, p.Unique, p.ForwardsPerUnique, p.Missing, p.Repeated)
			}
			if p.Duplicate != p.Redeliveries || p.Delivered != p.Unique {
				t.Errorf("%s: answered %d delivered and %d duplicate; sent %d unique and %d redeliveries", p.Name, p.Delivered, p.Duplicate, p.Unique, p.Redeliveries)
			}
			// A new event costs two store transactions (BeginClaim, then
			// Settle), a redelivery none: the bench redelivers only events
			// this gateway already settled, which its ledger remembers.
			// Queued: one Enqueue per request, new or not (the handler's
			// store calls are the ones timed; the dispatcher's are not).
			wantCalls := 2 * p.Unique
			if cfg.Mode == "queued" {
				wantCalls = p.Requests
			}
			if st := p.Store; st == nil || st.Requests != p.Requests || st.Calls != wantCalls {
				t.Errorf("%s: store calls %+v, want %d requests and %d calls", p.Name, st, p.Requests, wantCalls)
			} else if st.CallP50ms <= 0 || st.CallP50ms > st.CallP99ms || st.ReqP50ms > st.ReqP99ms || st.ReqP99ms > p.MaxMs {
				t.Errorf("%s: implausible store figures %+v", p.Name, *st)
			}
		}
		for _, p := range []*Pass{&rr.Direct, &rr.Baseline, rr.BaselineHalf} {
			// Neither the sink nor the bare proxy deduplicates: every
			// request is a forward, and that is what the gateway saves.
			if p.Store != nil {
				t.Errorf("%s: store figures %+v on a pass that has no store", p.Name, *p.Store)
			}
			if p.Forwards != p.Requests || p.Duplicate != 0 {
				t.Errorf("%s: %d forwards, %d duplicate answers for %d requests", p.Name, p.Forwards, p.Duplicate, p.Requests)
			}
			if p.Redeliveries > 0 && p.ForwardsPerUnique <= 1 {
				t.Errorf("%s: forwards per unique %.3f with %d redeliveries", p.Name, p.ForwardsPerUnique, p.Redeliveries)
			}
		}
		if want := rr.Gateway.Throughput / rr.Baseline.Throughput; rr.ThroughputRatio != want || want <= 0 {
			t.Errorf("throughput ratio %v, want %v", rr.ThroughputRatio, want)
		}
		if want := rr.Gateway.P99ms / rr.Baseline.P99ms; rr.P99Ratio != want || want <= 0 {
			t.Errorf("p99 ratio %v, want %v", rr.P99Ratio, want)
		}
		if rr.AddedP99ms != rr.Gateway.P99ms-rr.Baseline.P99ms {
			t.Errorf("added p99 %v", rr.AddedP99ms)
		}
		if rr.AddedP99HalfMs == nil || *rr.AddedP99HalfMs != rr.GatewayHalf.P99ms-rr.BaselineHalf.P99ms {
			t.Errorf("added p99 at half load %v", rr.AddedP99HalfMs)
		}
		if rr.GatewayHalf.Offered != rr.BaselineHalf.Offered || math.Abs(rr.GatewayHalf.Offered-rr.Gateway.Throughput/2) > 1e-9 {
			t.Errorf("half-load rate: gateway %v, baseline %v, want both half of %v", rr.GatewayHalf.Offered, rr.BaselineHalf.Offered, rr.Gateway.Throughput)
		}
		if rr.Gateway.NetCPUus != rr.Gateway.CPUus-rr.Direct.CPUus {
			t.Errorf("net cpu %v, want %v - %v", rr.Gateway.NetCPUus, rr.Gateway.CPUus, rr.Direct.CPUus)
		}
	}
	s := rep.Summary
	if s.ForwardsPerUnique != 1 || s.ThroughputRatio.Median <= 0 || s.AddedP99HalfMs == nil {
		t.Errorf("summary %+v", s)
	}
	last := s.Targets[len(s.Targets)-1]
	if !last.Met || last.Value != 1 {
		t.Errorf("forwards target %+v", last)
	}
}

func TestRunMemory(t *testing.T) {
	cfg := shortConfig("memory")
	cfg.Repeat = 2
	rep := runShort(t, cfg)
	if len(rep.Summary.Targets) != 3 {
		t.Errorf("targets %+v, want throughput, half-load p99 and forwards", rep.Summary.Targets)
	}

	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"baseline@half", "gateway@half", "throughput ratio", "p99 added at half load", "forwards per unique event", "store calls/req"} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, table.String())
		}
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("JSON does not read back: %v", err)
	}
	if back.Summary.ForwardsPerUnique != 1 || len(back.Repeats) != 2 || back.Repeats[1].GatewayHalf == nil {
		t.Errorf("JSON round trip lost figures: %+v", back.Summary)
	}
	if g := back.Repeats[1].GatewayHalf.Store; g == nil || *g != *rep.Repeats[1].GatewayHalf.Store {
		t.Errorf("JSON round trip lost the store figures: %+v", g)
	}
}

func TestRunStandardWebhooksUnsignedForwardNoLog(t *testing.T) {
	cfg := shortConfig("memory")
	cfg.Provider, cfg.SignForward, cfg.Log = "standard-webhooks", false, "none"
	runShort(t, cfg)
}

func TestRunBoltRemovesItsFile(t *testing.T) {
	cfg := shortConfig("bolt")
	cfg.Dir = t.TempDir()
	runShort(t, cfg)
	left, err := os.ReadDir(cfg.Dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("the run left %v behind", left)
	}
}

func TestRunPostgresDropsItsTable(t *testing.T) {
	dsn := os.Getenv("REPLYONCE_TEST_POSTGRES")
	if dsn == "" {
		t.Skip("REPLYONCE_TEST_POSTGRES is not set")
	}
	cfg := shortConfig("postgres")
	cfg.PostgresDSN, cfg.PostgresPool = dsn, 8
	rep := runShort(t, cfg)
	if !strings.Contains(rep.StoreNotes, "synchronous_commit=on") {
		t.Errorf("store notes %q do not confirm synchronous_commit", rep.StoreNotes)
	}
	checkServerCPU(t, rep)
	table := strings.Fields(strings.TrimPrefix(rep.StoreNotes, "table "))[0]
	table = strings.TrimSuffix(table, ",")
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	var exists bool
	if err := pool.QueryRow(ctx, "SELECT to_regclass($1) IS NOT NULL", pgx.Identifier{table}.Sanitize()).Scan(&exists); err != nil {
		t.Fatal(err)
	}
	if exists {
		t.Errorf("table %s is still there", table)
	}
}

func TestRunRedisDeletesItsKeys(t *testing.T) {
	url := os.Getenv("REPLYONCE_TEST_REDIS")
	if url == "" {
		t.Skip("REPLYONCE_TEST_REDIS is not set")
	}
	cfg := shortConfig("redis")
	cfg.RedisURL = url
	rep := runShort(t, cfg)
	checkServerCPU(t, rep)
	prefix := strings.TrimSuffix(strings.Fields(strings.TrimPrefix(rep.StoreNotes, "key prefix "))[0], ",")
	opts, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	c := goredis.NewClient(opts)
	defer c.Close()
	keys, _, err := c.Scan(context.Background(), 0, prefix+"*", 10000).Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("%d keys under %s are still there, e.g. %s", len(keys), prefix, keys[0])
	}
}

func TestRunFixedRateAndNoHalfLoad(t *testing.T) {
	cfg := shortConfig("memory")
	cfg.HalfLoad = -1
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r := rep.Repeats[0]; r.GatewayHalf != nil || r.AddedP99HalfMs != nil || rep.Summary.AddedP99HalfMs != nil {
		t.Error("half-load passes ran although they were switched off")
	}

	cfg = shortConfig("memory")
	cfg.Rate, cfg.HalfLoad = 400, 80
	rep, err = Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	gh := rep.Repeats[0].GatewayHalf
	if gh.Offered != 400 || gh.Requests != 80 {
		t.Errorf("fixed rate pass: offered %v, %d requests", gh.Offered, gh.Requests)
	}
	// 80 requests due over 0.2 s cannot finish much sooner than that.
	if gh.Seconds < 0.19 {
		t.Errorf("the fixed-rate pass took %.3fs, faster than its schedule", gh.Seconds)
	}
}

func TestRunStopsWithItsContext(t *testing.T) {
	// At 100 requests a second, 20,000 requests take 200 s: a run that
	// ignored its context would end with a pass, not with its deadline.
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	cfg := shortConfig("memory")
	cfg.Requests = 20000
	cfg.Rate = 100
	_, err := Run(ctx, cfg)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a run cut short by its context returned %v, want its deadline named", err)
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []Config{
		{Store: "sqlite"},
		{Provider: "github"},
		{Duplicates: 1},
		{Duplicates: -0.1},
		{Rate: -1},
		{Log: "stdout"},
		{Store: "postgres"},
		{Store: "redis"},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v was accepted", c)
		}
	}
	if err := (Config{}).Validate(); err != nil {
		t.Errorf("the zero config: %v", err)
	}
}

func TestIsRedeliverySpreadsExactly(t *testing.T) {
	for _, tc := range []struct {
		n     int
		ratio float64
		want  int
	}{{200, 0.2, 40}, {20000, 0.2, 4000}, {1000, 0.5, 500}, {7, 0, 0}, {1000, 0.333, 333}} {
		got, run, longest := 0, 0, 0
		for i := range tc.n {
			if isRedelivery(i, tc.ratio) {
				got++
				run++
				longest = max(longest, run)
			} else {
				run = 0
			}
		}
		if got != tc.want {
			t.Errorf("n=%d ratio=%v: %d redeliveries, want %d", tc.n, tc.ratio, got, tc.want)
		}
		if tc.ratio <= 0.5 && longest > 1 {
			t.Errorf("n=%d ratio=%v: %d redeliveries in a row", tc.n, tc.ratio, longest)
		}
	}
}

func TestPercentileNearestRank(t *testing.T) {
	var d []time.Duration
	for i := 1; i <= 100; i++ {
		d = append(d, time.Duration(i)*time.Millisecond)
	}
	for p, want := range map[float64]time.Duration{.5: 50 * time.Millisecond, .95: 95 * time.Millisecond, .99: 99 * time.Millisecond, 1: 100 * time.Millisecond} {
		if got := percentile(d, p); got != want {
			t.Errorf("p%v = %v, want %v", p*100, got, want)
		}
	}
	if percentile(nil, .99) != 0 {
		t.Error("empty percentile")
	}
}

func TestExactIsTheGatewayPromise(t *testing.T) {
	ok := Pass{Unique: 10, Forwards: 10}
	if !ok.exact() {
		t.Error("a clean pass is not exact")
	}
	for _, p := range []Pass{
		{Unique: 10, Forwards: 11, Repeated: 1},
		{Unique: 10, Forwards: 9, Missing: 1},
		{Unique: 10, Forwards: 10, Errors: 1},
		{Unique: 10, Forwards: 12, Repeated: 1, Missing: 1},
	} {
		if p.exact() {
			t.Errorf("%+v passed as exact", p)
		}
	}
}

// checkServerCPU asserts that a run on a store with a server of its own (on
// this host, as in CI) reported that server's CPU for the gateway passes,
// and only for them.
func checkServerCPU(t *testing.T, rep *Report) {
	t.Helper()
	for _, r := range rep.Repeats {
		if st := r.Gateway.Store; st == nil || st.ServerCPUus == nil || *st.ServerCPUus <= 0 {
			t.Errorf("gateway pass: store server CPU not reported (%+v; notes %q)", st, rep.StoreNotes)
		}
		if r.Baseline.Store != nil {
			t.Errorf("baseline pass has store figures: %+v", r.Baseline.Store)
		}
	}
	if rep.Summary.GatewayServerCPUus == nil {
		t.Error("summary: no store server CPU")
	}
}

func TestRunQueuedReportsSteadyDelivery(t *testing.T) {
	cfg := shortConfig("memory")
	cfg.Mode = "queued"
	rep := runShort(t, cfg)
	g := rep.Repeats[0].Gateway
	if g.SteadyAccepted <= 0 || g.SteadyDelivered <= 0 || g.Backlog < 0 || g.Backlog > g.Unique {
		t.Errorf("steady-state figures missing or impossible: %+v", g)
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "steady state") {
		t.Errorf("table lacks the steady-state line:\n%s", table.String())
	}
}

func TestRunBacklogDrainsEveryEventOnce(t *testing.T) {
	cfg := shortConfig("bolt")
	cfg.Dir = t.TempDir()
	cfg.Backlog = 300
	rep, err := RunBacklog(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	if rep.Forwards != 300 || rep.Missing != 0 || rep.Repeated != 0 || rep.DrainRate <= 0 || rep.AcceptRate <= 0 || rep.InlineRate <= 0 || rep.ProxyRate <= 0 || rep.ProxyEvents != cfg.Requests {
		t.Errorf("backlog report %+v", rep)
	}
	if rep.DeliveredEarly > 0 {
		t.Errorf("%d events delivered while dispatch was paused", rep.DeliveredEarly)
	}
	if rep.BytesPerEvent < 1024 {
		t.Errorf("a queued 1 KiB event took %.0f bytes of the bolt file: the body is not even there", rep.BytesPerEvent)
	}
}

// Where the platform reports no CPU time, the table says so and prints
// "-" for every CPU figure, not zeros that would read as free requests.
func TestWriteTableWithoutCPU(t *testing.T) {
	pass := func(name string) Pass {
		return Pass{Name: name, Requests: 10, Throughput: 100, CPUus: 0, NetCPUus: 0, Unique: 10, Forwards: 10, ForwardsPerUnique: 1}
	}
	rep := &Report{Store: "memory", Repeats: []Repeat{{Direct: pass("direct"), Baseline: pass("baseline"), Gateway: pass("gateway"), ThroughputRatio: 1}},
		Summary: Summary{ThroughputRatio: Spread{Median: 1, Min: 1, Max: 1}}}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	out := table.String()
	for _, want := range []string{`cpu: not measured`, `cpu ratio -,`, `gateway net cpu µs/req +-\n`, `cpu ratio \(baseline/gateway cpu per request\) +-\n`} {
		if !regexp.MustCompile(want).MatchString(out) {
			t.Errorf("table lacks %s:\n%s", want, out)
		}
	}
	for _, bad := range []string{"cpu ratio 0.00", "0.0  -  "} {
		if strings.Contains(out, bad) {
			t.Errorf("table shows %q for an unmeasured CPU:\n%s", bad, out)
		}
	}
	rep.CPUMeasured = true
	table.Reset()
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if out := table.String(); strings.Contains(out, "not measured") || !strings.Contains(out, "cpu ratio 0.00×") {
		t.Errorf("a measured report prints its figures:\n%s", out)
	}
}

// A store that cannot be reached ends the run with an error naming it,
// and what was started before it (the sink, the servers) is stopped: no
// panic from closing a half-built environment.
func TestRunWithAStoreDownSaysSo(t *testing.T) {
	cfg := shortConfig("postgres")
	cfg.PostgresDSN, cfg.PostgresPool = "postgres://postgres@127.0.0.1:1/none?sslmode=disable", 1
	_, err := Run(context.Background(), cfg)
	if err == nil || !strings.Contains(err.Error(), "postgres store") {
		t.Fatalf("bench with Postgres unreachable: %v, want an error naming the store", err)
	}
}

// A long-scope run puts every timed webhook into its length's own
// conversation: the settled kind delivers each once and lists it there;
// the waiting kind leaves every seeded and timed item behind the held head.
func TestRunLongScope(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, tc := range []struct{ mode string }{{"inline"}, {"queued"}} {
		cfg := Config{Store: "memory", Mode: tc.mode, LongScope: []int{40, 3}, Requests: 8, BodySize: 300}
		rep, err := RunLongScope(ctx, cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.mode, err)
		}
		if len(rep.Scopes) != 2 || rep.Scopes[0].Length != 3 || rep.Scopes[1].Length != 40 {
			t.Fatalf("%s: scopes %+v, want lengths 3 then 40", tc.mode, rep.Scopes)
		}
		for _, c := range rep.Scopes {
			if c.Accepted != 8 || c.Items != 8 || c.Forwards != 8 || c.Repeated != 0 || c.Waiting != 0 || c.MeanMillis <= 0 {
				t.Errorf("%s: length %d: %+v, want 8 accepted, listed and forwarded once each", tc.mode, c.Length, c)
			}
		}
		if rep.Scopes[0].Ratio != 1 {
			t.Errorf("%s: the shortest scope's ratio is %v, want 1", tc.mode, rep.Scopes[0].Ratio)
		}
		if rep.Scopes[1].DocBytes <= rep.Scopes[0].DocBytes {
			t.Errorf("%s: the longer scope's document (%d bytes) is not larger than the shorter's (%d)", tc.mode, rep.Scopes[1].DocBytes, rep.Scopes[0].DocBytes)
		}
	}

	cfg := Config{Store: "memory", Mode: "queued", LongScope: []int{5, 20}, LongScopeWaiting: true, Requests: 8, BodySize: 300}
	rep, err := RunLongScope(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range rep.Scopes {
		if c.Waiting != c.Length+8 || c.Items != c.Length+9 || c.Forwards != 0 {
			t.Errorf("waiting: length %d: %+v, want %d waiting behind the held head and nothing forwarded", c.Length, c, c.Length+8)
		}
	}
	var table bytes.Buffer
	if err := rep.WriteTable(&table); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(table.String(), "waiting history") {
		t.Errorf("table:\n%s", table.String())
	}

	for _, bad := range []Config{
		{LongScope: []int{10}, LongScopeWaiting: true}, // inline
		{LongScopeWaiting: true, Mode: "queued"},       // no lengths
		{LongScope: []int{10}, Backlog: 100},           // two runs at once
		{LongScope: []int{-1}},                         // negative
		{LongScope: []int{10}, Requests: 2},            // fewer than the rounds
	} {
		if err := bad.Validate(); err == nil {
			t.Errorf("Validate(%+v) accepted it", bad)
		}
	}
}
