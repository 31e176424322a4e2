package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"net/url"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replyonce/gateway/internal/cputime"
	"github.com/replyonce/gateway/signatures"
)

func parseURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	return u, nil
}

// event is one signed webhook, ready to send as often as the plan says.
type event struct {
	id     string
	body   []byte
	header http.Header
}

// makeEvents signs n events of about size bytes for one pass. Ids carry the
// pass's tag so that no two passes, repeats or runs share an event.
func (e *env) makeEvents(tag string, n, size int) ([]event, error) {
	now := time.Now()
	pad := strings.Repeat("x", max(size-260, 0))
	out := make([]event, n)
	for i := range out {
		id := "evt_" + tag + "_" + strconv.Itoa(i)
		// Shaped like a Stripe event: the id at the top, a customer, a
		// creation time, and padding standing for the object.
		body := `{"id":"` + id + `","object":"event","type":"invoice.paid","created":` + strconv.FormatInt(now.Unix(), 10) +
			`,"livemode":false,"pending_webhooks":1,"data":{"object":{"id":"in_` + strconv.Itoa(i) +
			`","customer":"cus_` + strconv.Itoa(i%997) + `","amount_paid":4200,"currency":"eur","description":"` + pad + `"}}}`
		r := &signatures.Request{Method: http.MethodPost, Header: http.Header{}, Body: []byte(body)}
		r.Header.Set("Content-Type", "application/json")
		if e.provider == "standard-webhooks" {
			// Its event id is webhook-id, which the signer signs over.
			r.Header.Set("Webhook-Id", id)
		}
		if err := e.signer.Sign(r, now); err != nil {
			return nil, fmt.Errorf("bench: sign: %w", err)
		}
		r.Header.Set(headerBenchID, id)
		out[i] = event{id: id, body: r.Body, header: r.Header}
	}
	return out, nil
}

// load is one pass's traffic plan through one target, and what came back.
// A pass runs in slices, interleaved with the other targets' slices (see
// runSlices), so the fields accumulate over calls to run.
type load struct {
	name        string
	url         string
	events      []event
	requests    int
	concurrency int
	duplicates  float64
	rate        float64 // 0: closed loop
	seed        uint64
	client      *http.Client
	// store, on a gateway pass, times the store calls of its requests;
	// serverCPU, if the store has a server whose CPU can be read, is how.
	store     *storeRecorder
	serverCPU serverCPU
	// storeCPU is the store server's CPU over this load's slices; storeCPUErr
	// the first failure to read it, after which it is not reported.
	storeCPU    time.Duration
	storeCPUErr error

	nextNew   atomic.Int64 // events handed out so far
	completed struct {
		sync.Mutex
		idx []int // events whose first delivery was answered 2xx
	}

	latencies                          []time.Duration // by slot
	done                               int             // slots sent
	elapsed, cpu                       time.Duration
	sliceRates                         []float64
	redeliveries, delivered, duplicate atomic.Int64
	errors                             atomic.Int64
	errOnce                            sync.Once
	firstError                         string

	// tally, on a queued gateway pass, is the sink's count, read before
	// and after each of this load's slices: the deliveries made while the
	// load was sending, against the events it had accepted meanwhile,
	// are the dispatcher's steady-state rate, free of the catch-up it
	// does while other targets' slices run.
	tally                           *tally
	acceptedInSlices, delivInSlices int
	backlog                         int // accepted but not yet delivered when the last slice ended
}

// deliveredCount is how many of the events handed out so far the sink has
// seen at least once.
func (l *load) deliveredCount() int {
	n := int(l.nextNew.Load())
	l.tally.mu.Lock()
	defer l.tally.mu.Unlock()
	got := 0
	for i := range n {
		if l.tally.counts[l.events[i].id] > 0 {
			got++
		}
	}
	return got
}

func newLoad(name, url string, events []event, requests int, cfg Config, rate float64) *load {
	return &load{name: name, url: url, events: events, requests: requests, concurrency: cfg.Concurrency,
		duplicates: cfg.Duplicates, rate: rate, seed: cfg.Seed, client: newClient(cfg.Concurrency),
		latencies: make([]time.Duration, requests)}
}

func (l *load) close() { l.client.Transport.(*http.Transport).CloseIdleConnections() }

// isRedelivery spreads the redeliveries evenly over the slots: slot i is
// one when the running count floor((i+1)·ratio) steps up, which gives
// exactly floor(n·ratio) of them and no clumps for the seed to explain.
func isRedelivery(i int, ratio float64) bool {
	return math.Floor(float64(i+1)*ratio) > math.Floor(float64(i)*ratio)
}

func newClient(concurrency int) *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			Proxy:               nil, // loopback only, never through a proxy
			MaxIdleConns:        concurrency,
			MaxIdleConnsPerHost: concurrency,
			MaxConnsPerHost:     concurrency,
			IdleConnTimeout:     30 * time.Second,
			DisableCompression:  true,
		},
		Timeout: 60 * time.Second,
	}
}

// run sends slots [from, to) and waits for every sender. Each sender loops
// over slot numbers taken from a shared counter, so the loop ends by itself
// when the slots run out or ctx is done.
func (l *load) run(ctx context.Context, from, to int) {
	var (
		next atomic.Int64
		wg   sync.WaitGroup
	)
	next.Store(int64(from))
	if l.store != nil {
		l.store.attach()
		defer l.store.detach()
	}
	runtime.GC() // so the previous slice's garbage is not collected on this one's time
	var deliv0, new0 int
	if l.tally != nil {
		deliv0, new0 = l.deliveredCount(), int(l.nextNew.Load())
	}
	srv0, srvErr := l.readServerCPU(ctx)
	cpu0 := cpuTime()
	start := time.Now()
	for w := range l.concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			pprof.SetGoroutineLabels(pprof.WithLabels(ctx, pprof.Labels("part", "generator")))
			rng := rand.New(rand.NewPCG(l.seed, uint64(from)<<16|uint64(w)))
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= to {
					return
				}
				began := time.Now()
				if l.rate > 0 {
					// Open loop: the request is due at its place in the
					// schedule whether or not the server kept up, and its
					// latency counts from then.
					began = start.Add(time.Duration(float64(i-from) / l.rate * float64(time.Second)))
					if d := time.Until(began); d > 0 {
						sleep(ctx, d)
					}
				}
				l.send(ctx, i, began, rng)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if l.tally != nil {
		deliv1, new1 := l.deliveredCount(), int(l.nextNew.Load())
		l.delivInSlices += deliv1 - deliv0
		l.acceptedInSlices += new1 - new0
		l.backlog = new1 - deliv1
	}
	l.cpu += cpuTime() - cpu0
	if srv1, err := l.readServerCPU(ctx); srvErr == nil && err == nil {
		l.storeCPU += srv1 - srv0
	} else if l.storeCPUErr == nil {
		l.storeCPUErr = errors.Join(srvErr, err)
	}
	l.elapsed += elapsed
	sent := min(int(next.Load()), to) - from
	l.done += sent
	if elapsed > 0 {
		l.sliceRates = append(l.sliceRates, float64(sent)/elapsed.Seconds())
	}
}

// readServerCPU reads the store server's CPU, if this load measures it.
func (l *load) readServerCPU(ctx context.Context) (time.Duration, error) {
	if l.serverCPU == nil {
		return 0, nil
	}
	return l.serverCPU(ctx)
}

// send delivers slot i and records its latency and answer.
func (l *load) send(ctx context.Context, i int, began time.Time, rng *rand.Rand) {
	ev, again := l.pick(i, rng)
	if again {
		l.redeliveries.Add(1)
	}
	status, body, err := post(ctx, l.client, l.url, &l.events[ev])
	l.latencies[i] = time.Since(began)
	switch {
	case err == nil && status/100 == 2 && bytes.Contains(body, []byte(`"status":"duplicate"`)):
		l.duplicate.Add(1)
	case err == nil && status/100 == 2:
		l.delivered.Add(1)
		if !again {
			l.completed.Lock()
			l.completed.idx = append(l.completed.idx, ev)
			l.completed.Unlock()
		}
	default:
		l.errors.Add(1)
		l.errOnce.Do(func() {
			if err != nil {
				l.firstError = err.Error()
			} else {
				l.firstError = fmt.Sprintf("status %d: %s", status, bytes.TrimSpace(body))
			}
		})
	}
}

// pick chooses slot i's event: a new one, or for a redelivery slot an
// event whose first delivery is already answered.
func (l *load) pick(i int, rng *rand.Rand) (ev int, again bool) {
	if l.duplicates > 0 && isRedelivery(i, l.duplicates) {
		l.completed.Lock()
		if n := len(l.completed.idx); n > 0 {
			ev = l.completed.idx[rng.IntN(n)]
			l.completed.Unlock()
			return ev, true
		}
		l.completed.Unlock()
	}
	return int(l.nextNew.Add(1) - 1), false
}

func post(ctx context.Context, client *http.Client, url string, ev *event) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(ev.body))
	if err != nil {
		return 0, nil, err
	}
	// A copy: the transport only reads headers, but redeliveries of one
	// event may be in flight at once and a shared map is one edit away
	// from a race.
	req.Header = ev.header.Clone()
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	return resp.StatusCode, body, err
}

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

// cpuTime is this process's user plus system CPU time so far, 0 where the
// platform does not say (Report.CPUMeasured is then false).
func cpuTime() time.Duration {
	d, _ := cputime.Self()
	return d
}

// cpuMeasured reports whether cpuTime gives real figures here.
func cpuMeasured() bool {
	_, ok := cputime.Self()
	return ok
}

func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	// Nearest rank: the smallest latency at least p of the requests beat.
	k := int(math.Ceil(p*float64(len(sorted)))) - 1
	return sorted[min(max(k, 0), len(sorted)-1)]
}

// warmup is how many requests precede a pass: enough for every sender to
// send twice, and never more than a tenth of the pass.
func warmup(requests, concurrency int) int {
	return max(min(2*concurrency, requests/10), 1)
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// runSlices sends every load's requests, interleaved: slice k of each load
// runs right after slice k of the one before it, the order rotating from
// one round to the next. On a machine shared with other work, load comes
// and goes over seconds; interleaving makes every target live through the
// same mix of it, so the ratios compare like with like. Before the first
// slice each target gets a warm-up (connections opened, code paths
// touched) whose events are not counted.
func (e *env) runSlices(ctx context.Context, cfg Config, tag string, loads []*load) error {
	for _, l := range loads {
		warm, err := e.makeEvents(tag+"_warm_"+l.name, warmup(l.requests, cfg.Concurrency), cfg.BodySize)
		if err != nil {
			return err
		}
		w := newLoad(l.name+"-warmup", l.url, warm, len(warm), cfg, 0)
		w.run(ctx, 0, len(warm))
		w.close()
	}
	size := cfg.Slice
	if size <= 0 || size > loads[0].requests {
		size = loads[0].requests
	}
	for round, from := 0, 0; from < loads[0].requests; round, from = round+1, from+size {
		for k := range loads {
			l := loads[(k+round)%len(loads)]
			l.run(ctx, from, min(from+size, l.requests))
			if err := ctx.Err(); err != nil {
				return fmt.Errorf("bench: %s cut short: %w", l.name, err)
			}
		}
	}
	return nil
}

// result turns a finished load into a Pass, including what the sink saw.
func (l *load) result(t *tally, offered float64) Pass {
	p := Pass{Name: l.name, Offered: offered, Requests: l.done, Unique: int(l.nextNew.Load()),
		Redeliveries: int(l.redeliveries.Load()), Delivered: int(l.delivered.Load()), Duplicate: int(l.duplicate.Load()),
		Errors: int(l.errors.Load()), FirstError: l.firstError, Seconds: l.elapsed.Seconds(), Slices: len(l.sliceRates)}
	if l.elapsed > 0 {
		p.Throughput = float64(p.Requests) / l.elapsed.Seconds()
	}
	if p.Requests > 0 {
		p.CPUus = float64(l.cpu) / float64(time.Microsecond) / float64(p.Requests)
	}
	lat := slices.Clone(l.latencies[:l.done])
	slices.Sort(lat)
	p.P50ms, p.P95ms, p.P99ms = ms(percentile(lat, .50)), ms(percentile(lat, .95)), ms(percentile(lat, .99))
	if len(lat) > 0 {
		p.MaxMs = ms(lat[len(lat)-1])
	}
	if l.store != nil {
		st := l.store.finish()
		if l.serverCPU != nil && l.storeCPUErr == nil && p.Requests > 0 {
			us := float64(l.storeCPU) / float64(time.Microsecond) / float64(p.Requests)
			st.ServerCPUus = &us
		}
		p.Store = &st
	}
	// Every handler has returned before its answer reached the sender, and
	// the sink counts before it answers: the tally is complete.
	t.mu.Lock()
	defer t.mu.Unlock()
	for i := range p.Unique {
		n := t.counts[l.events[i].id]
		p.Forwards += n
		switch {
		case n == 0:
			p.Missing++
		case n > 1:
			p.Repeated++
		}
	}
	if p.Unique > 0 {
		p.ForwardsPerUnique = float64(p.Forwards) / float64(p.Unique)
	}
	return p
}

func (e *env) progress(cfg Config, p Pass) {
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "  %-14s %6d req  %8.0f req/s  p99 %7.2f ms  cpu %6s µs/req  fwd/unique %.3f  errors %d\n",
			p.Name, p.Requests, p.Throughput, p.P99ms, cpuCell(cpuMeasured(), "%.1f", p.CPUus), p.ForwardsPerUnique, p.Errors)
	}
}

// phase runs the named targets interleaved, all at rate (0: full speed),
// and returns their passes in the same order.
func (e *env) phase(ctx context.Context, cfg Config, tag string, requests int, rate float64, names, urls []string) ([]Pass, []*load, error) {
	loads := make([]*load, len(names))
	for i, name := range names {
		events, err := e.makeEvents(tag+"_"+name, requests, cfg.BodySize)
		if err != nil {
			return nil, nil, err
		}
		loads[i] = newLoad(name, urls[i], events, requests, cfg, rate)
		defer loads[i].close()
		if strings.HasPrefix(urls[i], e.gwSrv.url+"/") {
			loads[i].store = e.storeTimer.newRecorder(requests)
			loads[i].serverCPU = e.store.serverCPU
		}
	}
	t := e.sink.reset()
	if e.queued {
		for _, l := range loads {
			if l.store != nil {
				l.tally = t
			}
		}
	}
	defer e.sink.current.Store(nil)
	err := e.runSlices(ctx, cfg, tag, loads)
	drains := make([]time.Duration, len(loads))
	if err == nil && e.queued {
		// Queued answers come before the forwards: wait for the dispatcher
		// to deliver every unique event the gateway accepted.
		start := time.Now()
		for i, l := range loads {
			if l.store == nil {
				continue
			}
			if err = e.drain(ctx, t, l); err != nil {
				break
			}
			drains[i] = time.Since(start)
		}
	}
	// The warm-ups were counted on the tally just reset; their ids are
	// their own, so they do not touch the passes' figures.
	passes := make([]Pass, len(loads))
	for i, l := range loads {
		passes[i] = l.result(t, rate)
		if d := drains[i]; d > 0 || (e.queued && l.store != nil) {
			passes[i].DrainSeconds = d.Seconds()
			if total := passes[i].Seconds + d.Seconds(); total > 0 {
				passes[i].DeliveredRate = float64(passes[i].Unique) / total
			}
			if l.elapsed > 0 {
				passes[i].SteadyAccepted = float64(l.acceptedInSlices) / l.elapsed.Seconds()
				passes[i].SteadyDelivered = float64(l.delivInSlices) / l.elapsed.Seconds()
			}
			passes[i].Backlog = l.backlog
		}
		e.progress(cfg, passes[i])
	}
	return passes, loads, err
}

// maxDrain bounds the wait for a queued pass's deliveries.
const maxDrain = 10 * time.Minute

// drain waits until the sink has seen every unique event of l. Each look
// moves past the events seen so far and stops at the first one not seen,
// so the whole wait reads each event once: a scan of every event on each
// look held the sink's tally lock long enough, with a 100,000-event
// backlog, to slow the very deliveries it was waiting for.
func (e *env) drain(ctx context.Context, t *tally, l *load) error {
	deadline := time.Now().Add(maxDrain)
	n := int(l.nextNew.Load())
	seen := 0
	for {
		t.mu.Lock()
		for seen < n && t.counts[l.events[seen].id] > 0 {
			seen++
		}
		t.mu.Unlock()
		if seen == n {
			return nil
		}
		missing := n - seen
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: up to %d of %d queued events (%s first) still undelivered after %s", missing, n, l.events[seen].id, maxDrain)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(5 * time.Millisecond):
		}
	}
}

// pairRatios divides a's slice rates by b's, slice by slice: each pair ran
// back to back, so each ratio saw about the same machine.
func pairRatios(a, b *load) []float64 {
	n := min(len(a.sliceRates), len(b.sliceRates))
	out := make([]float64, 0, n)
	for k := range n {
		if b.sliceRates[k] > 0 {
			out = append(out, a.sliceRates[k]/b.sliceRates[k])
		}
	}
	return out
}

// repeat runs one round: direct (calibration), baseline and gateway at full
// speed, interleaved; then baseline and gateway at the half-load rate,
// interleaved.
func (e *env) repeat(ctx context.Context, cfg Config, r int) (Repeat, error) {
	tag := fmt.Sprintf("%s_r%d", runID(), r)
	hook := "/hooks/" + sourceName
	var rr Repeat
	full, loads, err := e.phase(ctx, cfg, tag+"_full", cfg.Requests, 0, []string{"direct", "baseline", "gateway"},
		[]string{e.sinkSrv.url + "/events", e.proxySrv.url + hook, e.gwSrv.url + hook})
	if err != nil {
		return rr, err
	}
	rr.Direct, rr.Baseline, rr.Gateway = full[0], full[1], full[2]
	for _, p := range []*Pass{&rr.Baseline, &rr.Gateway} {
		p.NetCPUus = p.CPUus - rr.Direct.CPUus
	}
	if rr.Baseline.Throughput > 0 {
		rr.ThroughputRatio = rr.Gateway.Throughput / rr.Baseline.Throughput
	}
	rr.SliceRatios = spreadOf(pairRatios(loads[2], loads[1]))
	if rr.Gateway.CPUus > 0 {
		rr.CPURatio = rr.Baseline.CPUus / rr.Gateway.CPUus
	}
	if rr.Baseline.P99ms > 0 {
		rr.P99Ratio = rr.Gateway.P99ms / rr.Baseline.P99ms
	}
	rr.AddedP99ms = rr.Gateway.P99ms - rr.Baseline.P99ms
	if cfg.HalfLoad < 0 {
		return rr, nil
	}
	rate := cfg.Rate
	if rate == 0 {
		rate = rr.Gateway.Throughput / 2
	}
	if rate <= 0 {
		return rr, nil
	}
	half, _, err := e.phase(ctx, cfg, tag+"_half", cfg.HalfLoad, rate, []string{"baseline@half", "gateway@half"},
		[]string{e.proxySrv.url + hook, e.gwSrv.url + hook})
	if err != nil {
		return rr, err
	}
	// No net CPU at half load: the calibration ran at full speed, and a
	// process that idles between requests pays more per request for
	// wake-ups, so the difference would not be the middle box's.
	rr.BaselineHalf, rr.GatewayHalf = &half[0], &half[1]
	added := half[1].P99ms - half[0].P99ms
	rr.AddedP99HalfMs = &added
	return rr, nil
}
