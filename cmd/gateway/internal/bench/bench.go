package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/stores"
)

// Config is one benchmark run. Zero fields take the defaults noted on each.
type Config struct {
	Store    string // memory (default) | bolt | postgres | redis
	Provider string // stripe (default) | standard-webhooks
	// Mode is the bench source's forward.mode: inline (default) or queued.
	// Queued passes wait after sending until the dispatcher has delivered
	// every unique event, and report that drain.
	Mode string
	// DispatchConcurrency is forward.concurrency in queued mode (default 16).
	DispatchConcurrency int
	// AcceptWait is forward.accept_wait in queued mode.
	AcceptWait time.Duration
	// Backlog, when positive, runs RunBacklog instead of the passes: that
	// many events queued with dispatch paused, then drained.
	Backlog int
	// LongScope, when set, runs RunLongScope instead of the passes: one
	// conversation per length, seeded with that many settled effects (or,
	// with LongScopeWaiting, items waiting behind a held head under
	// order: scope), then Requests webhooks into each, one at a time.
	LongScope        []int
	LongScopeWaiting bool

	Requests    int     // per full-speed pass (default 20000)
	HalfLoad    int     // requests per half-load pass; 0: Requests/2; negative: skip those passes
	Concurrency int     // senders (default 64)
	Duplicates  float64 // fraction of requests that are redeliveries, in [0, 1)
	BodySize    int     // approximate event size in bytes (default 1024)
	// Rate is the offered load of the half-load passes in requests per
	// second; 0 means half of the gateway's peak measured in the same repeat.
	Rate   float64
	Repeat int // how many times the passes run (default 1)
	// Slice is how many requests each target gets before the next target's
	// turn (default 2000; see runSlices). Negative, or more than Requests:
	// no interleaving, each pass in one go.
	Slice int

	// SignForward signs forwarded requests with Standard Webhooks, as
	// forward.signing_secret does.
	SignForward bool
	// KeepBody sets forward.keep_body on the bench source: inline events
	// keep their body in the store beside their record.
	KeepBody bool
	// Log is where the gateway's request log goes: "devnull" (default: zap
	// JSON at info to /dev/null) or "none" (no logger).
	Log string

	PostgresDSN string
	// PostgresPool sets the pgx pool size; 0 leaves the DSN's
	// pool_max_conns or pgx's default, which is what `serve` gets.
	PostgresPool int
	RedisURL     string
	// Dir is where the bolt file is created (default os.TempDir()).
	Dir string

	Seed uint64 // picks the redeliveries; 0 means 1
	// Progress, when set, receives a line as each pass ends.
	Progress io.Writer
}

// Defaults.
const (
	DefaultRequests    = 20000
	DefaultConcurrency = 64
	DefaultBodySize    = 1024
	DefaultSlice       = 2000
)

func (c Config) withDefaults() Config {
	if c.Store == "" {
		c.Store = "memory"
	}
	if c.Provider == "" {
		c.Provider = "stripe"
	}
	if c.Mode == "" {
		c.Mode = "inline"
	}
	if c.Requests <= 0 {
		c.Requests = DefaultRequests
	}
	if c.HalfLoad == 0 {
		c.HalfLoad = max(c.Requests/2, 1)
	}
	if c.Concurrency <= 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.BodySize <= 0 {
		c.BodySize = DefaultBodySize
	}
	if c.Repeat <= 0 {
		c.Repeat = 1
	}
	if c.Slice == 0 {
		c.Slice = DefaultSlice
	}
	if c.Log == "" {
		c.Log = "devnull"
	}
	if c.Seed == 0 {
		c.Seed = 1
	}
	return c
}

// Validate reports a configuration Run would refuse.
func (c Config) Validate() error {
	c = c.withDefaults()
	switch {
	case c.Store == "postgres" && c.PostgresDSN == "":
		return errors.New("bench: postgres needs a DSN (--postgres or REPLYONCE_TEST_POSTGRES)")
	case c.Store == "redis" && c.RedisURL == "":
		return errors.New("bench: redis needs a URL (--redis or REPLYONCE_TEST_REDIS)")
	case !slices.Contains(stores.Kinds(), c.Store):
		return fmt.Errorf("bench: store %q is not one of %s", c.Store, strings.Join(stores.Kinds(), ", "))
	}
	switch c.Mode {
	case "", "inline", "queued":
	default:
		return fmt.Errorf("bench: mode %q is not inline or queued", c.Mode)
	}
	if c.Backlog < 0 {
		return errors.New("bench: backlog must not be negative")
	}
	for _, n := range c.LongScope {
		if n < 0 {
			return fmt.Errorf("bench: long-scope length %d must not be negative", n)
		}
	}
	switch {
	case len(c.LongScope) > 0 && c.Backlog > 0:
		return errors.New("bench: --long-scope and --backlog are separate runs: ask for one")
	case c.LongScopeWaiting && len(c.LongScope) == 0:
		return errors.New("bench: --long-scope-waiting needs --long-scope lengths")
	case c.LongScopeWaiting && c.Mode != "queued":
		return errors.New("bench: --long-scope-waiting needs --mode queued (items wait only in a queue)")
	case len(c.LongScope) > 0 && c.Requests < longScopeRounds:
		return fmt.Errorf("bench: a long-scope run needs at least %d requests per scope (--n)", longScopeRounds)
	}
	if c.DispatchConcurrency < 0 {
		return errors.New("bench: dispatch concurrency must not be negative")
	}
	if c.AcceptWait < 0 || c.AcceptWait > dispatch.MaxAcceptWait {
		return fmt.Errorf("bench: accept wait %s is not between 0 and %s", c.AcceptWait, dispatch.MaxAcceptWait)
	}
	switch c.Provider {
	case "stripe", "standard-webhooks":
	default:
		return fmt.Errorf("bench: provider %q is not stripe or standard-webhooks", c.Provider)
	}
	if c.Duplicates < 0 || c.Duplicates >= 1 || math.IsNaN(c.Duplicates) {
		return fmt.Errorf("bench: duplicates %v must be in [0, 1)", c.Duplicates)
	}
	if c.Rate < 0 {
		return errors.New("bench: rate must not be negative")
	}
	switch c.Log {
	case "devnull", "none":
	default:
		return fmt.Errorf("bench: log %q is not devnull or none", c.Log)
	}
	return nil
}

// Pass is one stream of requests through one target.
type Pass struct {
	Name    string  `json:"name"`                  // direct | baseline | gateway, with "@half" for the fixed-rate passes
	Offered float64 `json:"offered_rps,omitempty"` // 0: closed loop, as fast as the senders go

	Requests     int `json:"requests"`
	Unique       int `json:"unique_events"`
	Redeliveries int `json:"redeliveries"`
	Delivered    int `json:"answered_delivered"` // 2xx other than "duplicate"
	Duplicate    int `json:"answered_duplicate"`
	Errors       int `json:"errors"` // non-2xx answers and transport errors
	// FirstError describes one failed request, when there was one.
	FirstError string `json:"first_error,omitempty"`

	Seconds    float64 `json:"seconds"` // time spent sending, summed over its slices
	Slices     int     `json:"slices"`
	Throughput float64 `json:"throughput_rps"`
	P50ms      float64 `json:"p50_ms"`
	P95ms      float64 `json:"p95_ms"`
	P99ms      float64 `json:"p99_ms"`
	MaxMs      float64 `json:"max_ms"`

	// CPUus is process CPU per request, generator and sink included;
	// NetCPUus subtracts the calibration pass's figure (see the package doc).
	CPUus    float64 `json:"cpu_us_per_req"`
	NetCPUus float64 `json:"net_cpu_us_per_req"`

	Forwards          int     `json:"forwards"`
	ForwardsPerUnique float64 `json:"forwards_per_unique_event"`
	Missing           int     `json:"events_never_forwarded"`
	Repeated          int     `json:"events_forwarded_twice_or_more"`

	// Store is the time spent inside the ledger store, gateway passes only.
	Store *StoreTiming `json:"store_calls,omitempty"`

	// Queued mode: DrainSeconds is how long after its last answer the
	// dispatcher took to forward every unique event; DeliveredRate is
	// unique events over the pass's sending time plus that drain (a lower
	// bound: other targets' slices ran in between).
	DrainSeconds  float64 `json:"drain_seconds,omitempty"`
	DeliveredRate float64 `json:"delivered_rps,omitempty"`
	// SteadyAccepted and SteadyDelivered are new events accepted, and
	// events delivered to the sink, per second of the pass's own slices:
	// the dispatcher's rate while the gateway is under load, not its
	// catch-up between slices. Backlog is what was accepted and not yet
	// delivered when the pass's last slice ended.
	SteadyAccepted  float64 `json:"steady_accepted_eps,omitempty"`
	SteadyDelivered float64 `json:"steady_delivered_eps,omitempty"`
	Backlog         int     `json:"backlog_at_end,omitempty"`
}

// Repeat is one round of passes and the ratios drawn from it.
type Repeat struct {
	Direct       Pass  `json:"direct"`
	Baseline     Pass  `json:"baseline"`
	Gateway      Pass  `json:"gateway"`
	BaselineHalf *Pass `json:"baseline_half,omitempty"`
	GatewayHalf  *Pass `json:"gateway_half,omitempty"`

	ThroughputRatio float64 `json:"throughput_ratio"` // gateway / baseline, over all slices
	// SliceRatios are the throughput ratios of the slice pairs.
	SliceRatios Spread `json:"slice_throughput_ratios"`
	// CPURatio is baseline CPU per request over the gateway's, both raw:
	// the throughput ratio a CPU-bound, otherwise idle machine would show
	// when the store's work is not on it (memory, bolt).
	CPURatio       float64  `json:"cpu_ratio"`
	P99Ratio       float64  `json:"p99_ratio"`                   // gateway / baseline
	AddedP99ms     float64  `json:"added_p99_ms"`                // gateway - baseline, full speed
	AddedP99HalfMs *float64 `json:"added_p99_half_ms,omitempty"` // at the half-load rate
}

// Spread is a figure over the repeats (or over the slices of one).
type Spread struct {
	Median float64 `json:"median"`
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
}

func spreadOf(xs []float64) Spread {
	if len(xs) == 0 {
		return Spread{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	m := s[len(s)/2]
	if len(s)%2 == 0 {
		m = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return Spread{Median: m, Min: s[0], Max: s[len(s)-1]}
}

// Summary gathers the repeats.
type Summary struct {
	ThroughputRatio    Spread  `json:"throughput_ratio"`
	CPURatio           Spread  `json:"cpu_ratio"`
	P99Ratio           Spread  `json:"p99_ratio"`
	AddedP99ms         Spread  `json:"added_p99_ms"`
	AddedP99HalfMs     *Spread `json:"added_p99_half_ms,omitempty"`
	GatewayThroughput  Spread  `json:"gateway_rps"`
	BaselineThroughput Spread  `json:"baseline_rps"`
	GatewayNetCPUus    Spread  `json:"gateway_net_cpu_us_per_req"`
	BaselineNetCPUus   Spread  `json:"baseline_net_cpu_us_per_req"`
	// GatewayServerCPUus is the store server's CPU per gateway request, at
	// full speed, when it was measured (Postgres, Redis).
	GatewayServerCPUus *Spread `json:"gateway_store_server_cpu_us_per_req,omitempty"`
	// ForwardsPerUnique is the worst gateway pass's figure; it must be 1.
	ForwardsPerUnique float64  `json:"gateway_forwards_per_unique_event"`
	Targets           []Target `json:"targets"`
}

// Target is one of the goals and whether this run met it.
type Target struct {
	What  string  `json:"what"`
	Goal  string  `json:"goal"`
	Value float64 `json:"value"`
	Met   bool    `json:"met"`
}

// Report is everything a run measured.
type Report struct {
	Store       string  `json:"store"`
	Mode        string  `json:"mode"`
	StoreNotes  string  `json:"store_notes,omitempty"`
	Provider    string  `json:"provider"`
	Requests    int     `json:"requests"`
	Concurrency int     `json:"concurrency"`
	Duplicates  float64 `json:"duplicates"`
	BodySize    int     `json:"body_bytes"`
	SignForward bool    `json:"sign_forward"`
	Log         string  `json:"log"`
	GOMAXPROCS  int     `json:"gomaxprocs"`
	NumCPU      int     `json:"num_cpu"`
	GoVersion   string  `json:"go_version"`
	// CPUMeasured is false where the platform reports no process CPU
	// time: every CPU figure is then 0 and the table prints "-".
	CPUMeasured bool      `json:"cpu_measured"`
	Slice       int       `json:"slice"`
	Started     time.Time `json:"started"`
	Repeats     []Repeat  `json:"repeats"`
	Summary     Summary   `json:"summary"`
}

// ErrDuplicateForward is wrapped by Run's error when a gateway pass
// forwarded some event more or less than once, or left requests unanswered.
var ErrDuplicateForward = errors.New("bench: the gateway did not forward every unique event exactly once")

// Run performs the benchmark. The report is returned even when the run
// fails a check, so the caller can print what was measured.
func Run(ctx context.Context, cfg Config) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	rep := &Report{
		Store: cfg.Store, Mode: cfg.Mode, Provider: cfg.Provider, Requests: cfg.Requests, Concurrency: cfg.Concurrency,
		Duplicates: cfg.Duplicates, Slice: cfg.Slice, BodySize: cfg.BodySize, SignForward: cfg.SignForward, Log: cfg.Log,
		GOMAXPROCS: runtime.GOMAXPROCS(0), NumCPU: runtime.NumCPU(), GoVersion: runtime.Version(), Started: time.Now().UTC(),
		CPUMeasured: cpuMeasured(),
	}
	env, err := startEnv(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer env.close()
	rep.StoreNotes = env.storeNotes

	var failed []string
	for r := range cfg.Repeat {
		rr, err := env.repeat(ctx, cfg, r)
		if err != nil {
			return rep, err
		}
		rep.Repeats = append(rep.Repeats, rr)
		for _, p := range []*Pass{&rr.Gateway, rr.GatewayHalf} {
			if p != nil && !p.exact() {
				failed = append(failed, fmt.Sprintf("repeat %d %s: %d requests, %d unique, %d forwards (%.4f per unique), %d never forwarded, %d forwarded twice, %d errors (%s)",
					r+1, p.Name, p.Requests, p.Unique, p.Forwards, p.ForwardsPerUnique, p.Missing, p.Repeated, p.Errors, p.FirstError))
			}
		}
	}
	rep.Summary = summarize(cfg, rep.Repeats)
	if len(failed) > 0 {
		return rep, fmt.Errorf("%w:\n  %s", ErrDuplicateForward, strings.Join(failed, "\n  "))
	}
	return rep, nil
}

// exact is the gateway's promise for a pass: every request answered, every
// unique event forwarded exactly once.
func (p *Pass) exact() bool {
	return p.Errors == 0 && p.Missing == 0 && p.Repeated == 0 && p.Forwards == p.Unique
}

// targets are the goals for each store: the throughput ratio at 64
// senders and the p99 added at half load (0: no goal).
var targets = map[string]struct{ ratio, addedMs float64 }{
	"memory":   {0.80, 2},
	"bolt":     {0.50, 0},
	"redis":    {0.60, 5},
	"postgres": {0.40, 5},
}

// queuedTargets are issue #13's accepted-throughput goals at 64 senders,
// against the same baseline: the answer does not wait for the agent.
var queuedTargets = map[string]float64{"memory": 0.95, "bolt": 0.60, "redis": 0.80, "postgres": 0.60}

func summarize(cfg Config, rs []Repeat) Summary {
	var tr, cr, pr, add, addHalf, gt, bt, gc, bc, gs []float64
	worst := 1.0
	for _, r := range rs {
		tr = append(tr, r.ThroughputRatio)
		cr = append(cr, r.CPURatio)
		pr = append(pr, r.P99Ratio)
		add = append(add, r.AddedP99ms)
		gt = append(gt, r.Gateway.Throughput)
		bt = append(bt, r.Baseline.Throughput)
		gc = append(gc, r.Gateway.NetCPUus)
		bc = append(bc, r.Baseline.NetCPUus)
		if st := r.Gateway.Store; st != nil && st.ServerCPUus != nil {
			gs = append(gs, *st.ServerCPUus)
		}
		if r.AddedP99HalfMs != nil {
			addHalf = append(addHalf, *r.AddedP99HalfMs)
		}
		for _, p := range []*Pass{&r.Gateway, r.GatewayHalf} {
			if p != nil && math.Abs(p.ForwardsPerUnique-1) > math.Abs(worst-1) {
				worst = p.ForwardsPerUnique
			}
		}
	}
	s := Summary{
		ThroughputRatio: spreadOf(tr), CPURatio: spreadOf(cr), P99Ratio: spreadOf(pr), AddedP99ms: spreadOf(add),
		GatewayThroughput: spreadOf(gt), BaselineThroughput: spreadOf(bt),
		GatewayNetCPUus: spreadOf(gc), BaselineNetCPUus: spreadOf(bc), ForwardsPerUnique: worst,
	}
	if len(addHalf) > 0 {
		h := spreadOf(addHalf)
		s.AddedP99HalfMs = &h
	}
	if len(gs) > 0 && len(gs) == len(rs) {
		g := spreadOf(gs)
		s.GatewayServerCPUus = &g
	}
	if q, ok := queuedTargets[cfg.Store]; ok && cfg.Mode == "queued" {
		s.Targets = append(s.Targets, Target{
			What: "accepted throughput vs baseline (median)", Goal: fmt.Sprintf(">= %.2fx", q),
			Value: s.ThroughputRatio.Median, Met: s.ThroughputRatio.Median >= q,
		})
		var steady []float64
		for _, r := range rs {
			if g := r.Gateway; g.SteadyAccepted > 0 {
				steady = append(steady, g.SteadyDelivered/g.SteadyAccepted)
			}
		}
		if len(steady) > 0 {
			m := spreadOf(steady).Median
			s.Targets = append(s.Targets, Target{What: "delivered / accepted at steady state (median)", Goal: ">= 0.90x", Value: m, Met: m >= 0.9})
		}
	} else if t, ok := targets[cfg.Store]; ok {
		s.Targets = append(s.Targets, Target{
			What: "throughput vs baseline (median)", Goal: fmt.Sprintf(">= %.2fx", t.ratio),
			Value: s.ThroughputRatio.Median, Met: s.ThroughputRatio.Median >= t.ratio,
		})
		if t.addedMs > 0 && s.AddedP99HalfMs != nil {
			s.Targets = append(s.Targets, Target{
				What: "p99 added at half load (median)", Goal: fmt.Sprintf("<= %.0f ms", t.addedMs),
				Value: s.AddedP99HalfMs.Median, Met: s.AddedP99HalfMs.Median <= t.addedMs,
			})
		}
	}
	s.Targets = append(s.Targets, Target{What: "forwards per unique event (worst pass)", Goal: "= 1.00", Value: worst, Met: worst == 1})
	return s
}
