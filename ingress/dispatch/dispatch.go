package dispatch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress/dispatch/alerts"
	"github.com/replyonce/gateway/ledger"
)

// Defaults for zero Options.
const (
	DefaultPoll  = time.Second
	DefaultBatch = 64
	// corruptLogEvery bounds how often a corrupt paused sources record is
	// logged: once a minute, not once a sweep.
	corruptLogEvery = time.Minute
	// maxBackoff bounds the wait between sweeps while the store fails.
	maxBackoff = 10 * time.Second
	// settleTimeout bounds recording an attempt's outcome; past it the
	// claim runs out and the delivery is due again.
	settleTimeout = 10 * time.Second
)

// Options wire a Dispatcher. Ledger, Forwarder and Sources are required.
type Options struct {
	Ledger    *ledger.Ledger
	Forwarder *forward.Forwarder
	// Sources are the gateway's sources (ingress.Source.Queued); only
	// queued ones are dispatched.
	Sources []*Source
	Logger  *zap.Logger
	Metrics *Metrics
	// Conversation counts events settled superseded at take time and
	// ordered scopes moving on past a dead letter: the gateway's
	// (ingress.Metrics.Conversation), so each figure has one name.
	Conversation *ConversationMetrics
	// Clock is the ledger's clock: it times the retry schedule.
	Clock func() time.Time
	// Alerts is told when a source starts failing (alerts.after_failures
	// attempts in a row), recovers, or pauses itself (forward.pause_after);
	// nil raises none. Its Raise never blocks.
	Alerts *alerts.Notifier
	// Jitter returns a number in [0, 1) for the schedule's ±20 % jitter
	// (RetryPolicy.Jitter), for sources whose policy has none; nil:
	// math/rand.
	Jitter func() float64
	// Poll is how often the store's due index is read when nothing wakes
	// the dispatcher sooner (an event queued here, a slot freed), and the
	// longest the paused sources record goes unread (see paused).
	Poll time.Duration
	// Batch bounds the due deliveries read per sweep.
	Batch int
	// TracerProvider, when set, traces every delivery attempt (see
	// trace.go). Nil: no tracing, at no cost.
	TracerProvider trace.TracerProvider
	// Instance names this dispatcher in the pause acknowledgements
	// (pauseack.go); empty: a random id.
	Instance string
}

// Dispatcher delivers queued events: the ones the gateway hands it as they
// are accepted, and every due one it finds in the store, from any process.
type Dispatcher struct {
	l       *ledger.Ledger
	fwd     *forward.Forwarder
	log     *zap.Logger
	metrics *Metrics
	conv    *ConversationMetrics
	now     func() time.Time
	poll    time.Duration
	batch   int
	sources map[string]*source
	wake    chan struct{}
	tracer  trace.Tracer // nil: tracing off
	// instance, acked and ackedAt: see pauseack.go (acked and ackedAt
	// are Run's goroutine only).
	instance string
	acked    map[string]bool
	ackedAt  time.Time
	alerts   *alerts.Notifier

	// forwards is the context every forward runs in; Shutdown cancels it
	// once the grace period is over.
	forwards context.Context
	cut      context.CancelFunc

	// lastUnpark is when the sweep last looked for parked deliveries of
	// every unpaused source; unparking, the sources it is bringing back
	// (both Run's goroutine only).
	lastUnpark time.Time
	unparking  map[string]bool
	lastGauge  time.Time // the last full page read for the queue gauges
	healthRead time.Time // the last read of the source health record (incident.go)
	// corruptLogged is when the sweep last logged an unreadable paused
	// sources record (Run's goroutine only).
	corruptLogged time.Time
	// paused is the paused sources record as last read, at pausedAt
	// (real time; both Run's goroutine only). A sweep reads the record
	// again when the poll asks for it, when the copy is a Poll old, or
	// when rereadPaused says this process changed a pause (PauseNow):
	// in the steady state of queued delivery a sweep runs for about
	// every tenth event, and a read per sweep was a store round trip for
	// a record that almost never changes (issue #29). Another process's
	// pause reaches this one within a Poll, as it did while idle.
	paused       map[string]bool
	pausedAt     time.Time
	rereadPaused atomic.Bool
	// pending is what the last page read from the due index left for lack
	// of a free slot, read at pendingAt (real time): later sweeps take from
	// it before reading the index again, for at most one Poll. Each take
	// re-checks on the document that the delivery is still due.
	pending   []ledger.QueueItem
	pendingAt time.Time
	// foundNone says the last page read from the due index was empty.
	// Until the next poll, a freed slot then reads the index again only
	// if mayBeDue says work may have become due since: an event accepted
	// without a place (Notify), a delivery given back, or a settle that
	// may have freed the next event of an ordered or debounced scope. In
	// the steady state of queued delivery every event is handed to a free
	// place at accept and the index is empty: a read per freed place was
	// a due-index read per event (on Redis, one per bucket), for nothing
	// (issue #29). Work that becomes due by the clock (retries, expired
	// claims, other processes' events) is found by the poll, as before.
	foundNone bool
	mayBeDue  atomic.Bool
	// lookFrom is where the next look past busy sources' deliveries
	// starts in the due index (see lookPastBusy); zero: after the head.
	lookFrom time.Time

	mu      sync.Mutex
	taking  map[string]string // entry id → scope, for the takes under way
	closed  bool
	running sync.WaitGroup // reserved slots and deliveries in flight
	// workers runs the takes and deliveries; Shutdown stops them once
	// running is done.
	workers *workers
}

// inFlight lists, per source, the deliveries held (for tests and metrics).
func (d *Dispatcher) inFlight() map[string]int {
	out := map[string]int{}
	for name, s := range d.sources {
		if n := len(s.holds); n > 0 {
			out[name] = n
		}
	}
	return out
}

// source is one queued source's share of the dispatcher. A delivery this
// process holds (handed over at accept, or taken from the store) keeps a
// place in holds from its reservation until its outcome is recorded, and
// a place in agent only while its request to the agent is in flight, so
// the store steps around a forward never hold one of the agent's
// forward.concurrency requests.
type source struct {
	src    *Source
	retry  RetryPolicy   // src's, with the dispatcher's jitter
	agent  chan struct{} // forward.concurrency places: requests to the agent in flight
	holds  chan struct{} // takeAhead × forward.concurrency places (× 1 unless Source.HoldsAhead): deliveries held
	paused bool          // guarded by Dispatcher.mu
	// waiting counts the accepts waiting in Reserve for a place: the
	// signal a test waits for before it frees one.
	waiting atomic.Int32
	// pausedNow mirrors paused for a delivery's last look before its
	// forward, without the lock.
	pausedNow atomic.Bool
	// incident follows the agent's failures for the log (incident.go).
	incident incident
	// latency is a moving average of the agent's answer time, in
	// nanoseconds: deliveries are held beyond forward.concurrency only
	// while it is under takeAheadLatency.
	latency atomic.Int64
}

const (
	// takeAhead bounds the deliveries a process holds per source, as a
	// multiple of forward.concurrency. Held deliveries beyond the agent's
	// places wait for one; they overlap their store steps (the accept or
	// take before, the settle after) with other deliveries' forwards, which
	// is what lets a fast agent be fed at the rate events are accepted.
	takeAhead = 8
	// takeAheadLatency is the answer time (moving average) under which a
	// source's deliveries are held ahead of a free agent place. A waiting
	// delivery must start its forward soon enough to settle within its
	// claim (Source.StartBy); with slow agents it would only wait, give
	// the delivery back and take it again.
	takeAheadLatency = 500 * time.Millisecond
)

// mayHold says whether one more delivery of s may be held now: always
// within forward.concurrency, and up to takeAhead times that while the
// agent answers fast.
func (s *source) mayHold() bool {
	n := len(s.holds)
	if n < cap(s.agent) {
		return true
	}
	return n < cap(s.holds) && time.Duration(s.latency.Load()) < takeAheadLatency
}

// observeLatency folds one forward's answer time into the moving average
// (weight 1/8: a few slow answers are enough to stop holding ahead).
func (s *source) observeLatency(l time.Duration) {
	for {
		old := s.latency.Load()
		if s.latency.CompareAndSwap(old, old+(int64(l)-old)/8) {
			return
		}
	}
}

// New builds a dispatcher. It starts nothing: call Run.
func New(o Options) (*Dispatcher, error) {
	if o.Ledger == nil || o.Forwarder == nil {
		return nil, errors.New("dispatch: a ledger and a forwarder are required")
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Metrics == nil {
		o.Metrics = NewMetrics(nil)
	}
	if o.Conversation == nil {
		o.Conversation = NewConversationMetrics(nil)
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Poll <= 0 {
		o.Poll = DefaultPoll
	}
	if o.Batch <= 0 {
		o.Batch = DefaultBatch
	}
	if o.Instance == "" {
		o.Instance = randomInstance()
	}
	d := &Dispatcher{l: o.Ledger, fwd: o.Forwarder, log: o.Logger, metrics: o.Metrics, conv: o.Conversation, now: o.Clock, alerts: o.Alerts,
		poll: o.Poll, batch: o.Batch, sources: map[string]*source{}, wake: make(chan struct{}, 1), instance: o.Instance,
		workers: newWorkers(workerIdle)}
	for _, s := range o.Sources {
		if s.Policy.Mode != ModeQueued {
			continue
		}
		c, holds := s.Policy.Concurrency, s.Policy.Concurrency
		if s.HoldsAhead() {
			holds *= takeAhead
		}
		retry := s.Policy.Retry
		if retry.Jitter == nil {
			retry.Jitter = o.Jitter
		}
		d.sources[s.Name] = &source{src: s, retry: retry, agent: make(chan struct{}, c), holds: make(chan struct{}, holds)}
	}
	if o.TracerProvider != nil {
		d.tracer = o.TracerProvider.Tracer(TracerName)
	}
	d.forwards, d.cut = context.WithCancel(context.Background())
	return d, nil
}

// Notify wakes the sweep: an event was queued without a slot (or one was
// freed), so there may be due work now rather than at the next poll.
func (d *Dispatcher) Notify() {
	d.mayBeDue.Store(true)
	d.wakeLoop()
}

// wakeLoop lets Run sweep now, for the places or work it has in hand.
func (d *Dispatcher) wakeLoop() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// Reserve is a place to hold one more delivery of
// a queued, unpaused source, unless the dispatcher is shutting down. When
// every place is taken but the agent answers fast, it waits up to the
// source's forward.accept_wait for one (ctx permitting): a place then frees within
// milliseconds, an event handed over costs one store step less than one
// swept from the store, and accepts that wait for the dispatcher keep the
// backlog from outgrowing what the agent is fed. With a slow agent it
// never waits: the event is stored and swept.
func (d *Dispatcher) Reserve(ctx context.Context, name string) (*Slot, bool) {
	s := d.sources[name]
	if s == nil {
		return nil, false
	}
	if sl, ok := d.tryReserve(s); ok {
		return sl, true
	}
	d.mu.Lock()
	wait := *s.src.Policy.AcceptWait
	if d.closed || s.paused || !s.src.HoldsAhead() || time.Duration(s.latency.Load()) >= takeAheadLatency {
		wait = 0
	}
	d.mu.Unlock()
	if wait <= 0 {
		return nil, false
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	select {
	case s.holds <- struct{}{}:
	case <-timer.C:
		return nil, false
	case <-ctx.Done():
		return nil, false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || s.paused {
		<-s.holds
		return nil, false
	}
	d.running.Add(1)
	return &Slot{d: d, s: s}, true
}

// tryReserve is Reserve without waiting (see source.mayHold).
func (d *Dispatcher) tryReserve(s *source) (*Slot, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed || s.paused || !s.mayHold() {
		return nil, false
	}
	select {
	case s.holds <- struct{}{}:
	default:
		return nil, false
	}
	d.running.Add(1)
	return &Slot{d: d, s: s}, true
}

// Slot is one reserved place for a delivery (Reserve). Exactly one of
// Deliver and Release must be called.
type Slot struct {
	d    *Dispatcher
	s    *source
	used bool
}

// Deliver hands the slot a delivery whose claim the caller holds (taken
// at accept): the dispatcher forwards it and records its outcome.
func (sl *Slot) Deliver(t ledger.Taken, ev ledger.QueuedEvent) {
	if sl.used {
		return
	}
	sl.used = true
	d, s := sl.d, sl.s
	d.workers.run(func() { d.deliver(s, t, &ev) })
}

// Release gives the place back unused.
func (sl *Slot) Release() {
	if sl.used {
		return
	}
	sl.used = true
	sl.d.done(sl.s)
}

// done frees a held delivery's place and lets the loop look for more work:
// what the last page left, or the index when work may be due (foundNone).
func (d *Dispatcher) done(s *source) {
	<-s.holds
	d.running.Done()
	d.wakeLoop()
}

// sweepLogEvery paces the reminders of a store outage in Run's log.
const sweepLogEvery = time.Minute

// Run sweeps the store for due deliveries until ctx ends. Deliveries it
// started keep running; Shutdown waits for them.
func (d *Dispatcher) Run(ctx context.Context) {
	if len(d.sources) == 0 {
		<-ctx.Done()
		return
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	var backoff time.Duration
	// A store outage is one incident in the log, not a line per backoff
	// step: its first failed sweep, a reminder at most every
	// sweepLogEvery while it lasts, and the recovery.
	var failures int
	var failingSince, lastLogged time.Time
	for {
		polled := false
		select {
		case <-ctx.Done():
			return
		case <-d.wake:
		case <-timer.C:
			polled = true
		}
		full, err := d.sweep(ctx, polled)
		next := d.poll
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			backoff = min(max(backoff*2, 100*time.Millisecond), maxBackoff)
			next = backoff
			d.metrics.sweepErrors.Inc()
			failures++
			switch now := time.Now(); {
			case failures == 1:
				failingSince, lastLogged = now, now
				d.log.Warn("dispatch: reading due deliveries failed; retrying with backoff, next reminder in a minute", zap.Duration("backoff", backoff), zap.Error(err))
			case now.Sub(lastLogged) >= sweepLogEvery:
				lastLogged = now
				d.log.Warn("dispatch: reading due deliveries still failing", zap.Int("failed_sweeps", failures),
					zap.Duration("for", now.Sub(failingSince).Round(time.Second)), zap.Duration("backoff", backoff), zap.Error(err))
			}
		case full:
			backoff, next = 0, 0
		default:
			backoff = 0
		}
		if err == nil && failures > 0 {
			d.log.Info("dispatch: reading due deliveries again", zap.Int("failed_sweeps", failures),
				zap.Duration("after", time.Since(failingSince).Round(time.Millisecond)))
			failures = 0
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
		timer.Reset(next)
	}
}

// pausedSources returns the paused sources record: read from the store
// when polled, when this process changed a pause, or when the copy in
// hand is a Poll old; the copy otherwise (see paused).
func (d *Dispatcher) pausedSources(ctx context.Context, polled bool) (map[string]bool, error) {
	reread := d.rereadPaused.Swap(false)
	if !polled && !reread && d.paused != nil && time.Since(d.pausedAt) < d.poll {
		return d.paused, nil
	}
	paused, err := d.l.Sources().PausedSources(ctx)
	if err != nil {
		// Read again at the next sweep, whatever the error was.
		d.paused = nil
		return paused, err
	}
	d.paused, d.pausedAt = paused, time.Now()
	return paused, nil
}

// sweep takes due deliveries while slots are free. full says it filled a
// whole page, so there may be more right away. polled says the loop's
// timer asked for it (the poll, a full page, a backoff), not a freed
// place: it reads the index even when the last read found it empty.
func (d *Dispatcher) sweep(ctx context.Context, polled bool) (full bool, err error) {
	if !polled && len(d.pending) == 0 && d.foundNone && !d.mayBeDue.Load() && time.Since(d.pendingAt) < d.poll {
		// A freed place, nothing in hand and nothing said to be due: not
		// even the paused sources need reading before the poll.
		return false, nil
	}
	paused, err := d.pausedSources(ctx, polled)
	if errors.Is(err, ledger.ErrCorruptControl) {
		// An unreadable record pauses nothing and stops nothing: every
		// source is dispatched until a pause or resume writes it afresh.
		if now := time.Now(); now.Sub(d.corruptLogged) >= corruptLogEvery {
			d.corruptLogged = now
			d.log.Error("dispatch: the paused sources record is corrupt; dispatching every source until a pause or resume rewrites it", zap.Error(err))
		}
	} else if err != nil {
		return false, err
	}
	var resumed []string
	d.mu.Lock()
	for name, s := range d.sources {
		if s.paused && !paused[name] {
			resumed = append(resumed, name)
		}
		s.paused = paused[name]
		s.pausedNow.Store(s.paused)
	}
	d.mu.Unlock()
	// Only now, with every paused source stopped here, may this process
	// say so: a pause waits for that (pauseack.go).
	if err := d.ackPaused(ctx, paused); err != nil {
		return false, err
	}
	unparked, err := d.unpark(ctx, resumed)
	if err != nil {
		return false, err
	}
	d.readHealth(ctx)
	gauge := d.gaugeDue()
	if d.freeSlots() == 0 && !gauge {
		return unparked, nil // every slot busy: a freed one wakes the loop
	}
	// A page read from the index serves the following sweeps too (see
	// pending), so a freed slot costs no index read of its own.
	notified := d.mayBeDue.Swap(false)
	items, fresh := d.pending, gauge || len(d.pending) == 0 && (polled || notified || !d.foundNone) || time.Since(d.pendingAt) >= d.poll
	d.pending = nil
	if fresh {
		skip := d.scopesTaking()
		if items, err = d.l.Queue().Due(ctx, ledger.DueQuery{Limit: d.batch, Skip: skip}); err != nil {
			return false, err
		}
		d.pendingAt = time.Now()
		d.metrics.observeDue(items, d.now())
		if gauge {
			// A gauge that cannot be read is no reason to stop delivering.
			if n, err := d.l.Queue().CountDue(ctx); err != nil {
				d.metrics.sweepErrors.Inc()
				d.log.Warn("dispatch: counting the due backlog failed", zap.Error(err))
			} else {
				d.metrics.dueScopes.Set(float64(n))
			}
		}
		full = len(items) == d.batch
		if items, err = d.lookPastBusy(ctx, items, skip); err != nil {
			return false, err
		}
		d.foundNone = len(items) == 0
	}
	now := d.now()
	items, parked, err := d.park(ctx, items, paused)
	if err != nil {
		return false, err
	}
	took := 0
	var left []ledger.QueueItem
	for _, q := range items {
		s := d.sources[q.Source]
		if s == nil {
			continue // a source no longer configured (or inline here): left due for an instance that has it
		}
		if !d.startTake(q) {
			continue // a take of it from an earlier sweep is still under way
		}
		sl, ok := d.tryReserve(s)
		if !ok {
			d.endTake(q)
			left = append(left, q) // no slot now: tried first when one is freed
			continue
		}
		took++
		// Taken on a worker of its own: the takes of one page share the
		// store's group commits instead of waiting for one each in turn.
		d.workers.run(func() { d.take(s, sl, q, now) })
	}
	if !fresh && took == 0 {
		// What was left of the last page has no slot free: read the
		// index afresh, other sources may have work.
		return true, nil
	}
	d.pending = left
	return parked > 0 || unparked || took > 0 && full, nil
}

// lookAhead bounds the further pages of the due index one sweep reads past
// a page of busy sources' deliveries.
const lookAhead = 4

// lookPastBusy returns page and, when page is full and holds deliveries of
// busy sources only (no free place, paused or not configured here) while
// another source has a free place, the deliveries of further pages, up to
// lookAhead of them. The index is in due order across sources, so without
// this a busy source's backlog at its head would hide every other source's
// due work until it drained. Each such sweep goes on where the last one
// stopped (lookFrom) and starts again after the head at the index's end,
// so a backlog of any size is looked past in turn. skip (the scopes being
// taken) is extended.
func (d *Dispatcher) lookPastBusy(ctx context.Context, page []ledger.QueueItem, skip map[string]bool) ([]ledger.QueueItem, error) {
	items := page
	for i := range lookAhead {
		if len(page) < d.batch {
			d.lookFrom = time.Time{} // the end of the index: next time from the head
			return items, nil
		}
		if !d.othersFree(page) {
			return items, nil
		}
		from := lastPlace(page, skip)
		if i == 0 && d.lookFrom.After(from) {
			from = d.lookFrom
		}
		var err error
		if page, err = d.l.Queue().Due(ctx, ledger.DueQuery{Limit: d.batch, From: from, Skip: skip}); err != nil {
			return nil, err
		}
		items = append(items, page...)
		d.lookFrom = lastPlace(page, skip)
	}
	return items, nil
}

// lastPlace is where the last scope of page sits in the due index (its
// earliest due delivery), and adds page's scopes to skip: the next page
// starts there, without them.
func lastPlace(page []ledger.QueueItem, skip map[string]bool) time.Time {
	first := map[string]time.Time{}
	for _, q := range page {
		if at, ok := first[q.Scope]; !ok || dueAt(q).Before(at) {
			first[q.Scope] = dueAt(q)
		}
		skip[q.Scope] = true
	}
	var last time.Time
	for _, at := range first {
		if at.After(last) {
			last = at
		}
	}
	return last
}

// othersFree says whether every delivery of page belongs to a source that
// cannot take it now while some other source could take one.
func (d *Dispatcher) othersFree(page []ledger.QueueItem) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	inPage := map[string]bool{}
	for _, q := range page {
		if s := d.sources[q.Source]; s != nil && !s.paused && s.mayHold() {
			return false // the page has work for a free place
		}
		inPage[q.Source] = true
	}
	for name, s := range d.sources {
		if !inPage[name] && !s.paused && s.mayHold() {
			return true
		}
	}
	return false
}

func dueAt(q ledger.QueueItem) time.Time {
	if q.Status == ledger.DeliveryDelivering {
		return q.LeaseUntil
	}
	return q.NextAt
}

// deliver forwards one taken delivery and records what it came to. ev's
// body is nil when the event has to be read from the store first.
func (d *Dispatcher) deliver(s *source, t ledger.Taken, ev *ledger.QueuedEvent) {
	defer d.done(s)
	ctx := d.forwards
	fields := []zap.Field{zap.String("source", s.src.Name), zap.String("event_id", t.Item.EventID),
		zap.String("run_id", t.Run.ID), zap.Int("delivery", t.Run.Delivery)}
	startBy := s.src.StartBy(t.Item.LeaseUntil)
	if ev.Body == nil && ev.EventID == "" {
		// A read that lasts past the start-by time is of no use.
		rctx, cancel := context.WithTimeout(ctx, startBy.Sub(d.now()))
		got, err := d.l.Queue().QueuedEventOf(rctx, t.Item)
		cancel()
		if err != nil && ctx.Err() == nil && d.now().After(startBy) {
			d.giveBack(s, t, "not sent: the store answered the event's read too late to forward within its claim", fields)
			return
		}
		if err != nil {
			// The claim runs out and the delivery is due again.
			d.metrics.storeErrors.WithLabelValues(s.src.Name).Inc()
			d.log.Warn("dispatch: reading the event failed", append(fields, zap.Error(err))...)
			return
		}
		ev = &got
	}
	if !d.awaitAgent(s, t) {
		d.giveBack(s, t, "not sent: too little of its claim was left to forward and settle (no request place came free in time, or the store answered slowly)", fields)
		return
	}
	if s.pausedNow.Load() {
		// Paused while it was held: it goes back unsent (and is parked).
		<-s.agent
		d.giveBack(s, t, "not sent: its source was paused while it was held", fields)
		return
	}
	start := d.now()
	actx, span := d.startAttempt(ctx, s, t, ev)
	// Cut at the claim's end minus the settle margin if that comes before
	// forward.timeout does: the outcome must be recorded within the claim.
	actx, cutForward := context.WithTimeout(actx, s.src.ForwardBy(t.Item.LeaseUntil).Sub(start))
	out := d.fwd.Forward(actx, s.src.ForwardRequest(*ev, t))
	cutForward()
	<-s.agent
	s.observeLatency(out.Latency)
	fin := d.outcome(s, t, out, ctx.Err() != nil)
	fin.Record.At = start
	sctx, cancel := context.WithTimeout(trace.ContextWithSpan(context.Background(), span), settleTimeout)
	res, err := d.l.Queue().FinishDelivery(sctx, fin)
	cancel()
	if t.Item.Order != "" || t.Item.Quiet > 0 || fin.Status == ledger.DeliveryQueued && !fin.NextAt.After(d.now()) {
		d.mayBeDue.Store(true) // the scope's next event, or this one again
	}
	label := string(fin.Status)
	if fin.Status == ledger.DeliveryQueued {
		label = "retry"
		if out.Kind == forward.Fault {
			label = "fault"
		}
	}
	endAttempt(span, label, out, err)
	d.metrics.attempts.WithLabelValues(s.src.Name, label).Inc()
	d.metrics.forwardLatency.WithLabelValues(s.src.Name).Observe(out.Latency.Seconds())
	fields = append(fields, zap.String("outcome", label), zap.Int("agent_status", out.Status), zap.Duration("latency", out.Latency))
	if out.Err != nil {
		fields = append(fields, zap.String("reason", out.Err.Error()))
	}
	switch {
	case ctx.Err() != nil: // cut by shutdown: says nothing about the agent
	case out.Kind == forward.Delivered || out.Kind == forward.Rejected:
		d.answered(s, start)
	default:
		d.failed(s, out, fields, start)
	}
	switch {
	case err != nil:
		d.metrics.storeErrors.WithLabelValues(s.src.Name).Inc()
		d.log.Warn("dispatch: recording the outcome failed; the delivery is due again once its claim runs out", append(fields, zap.Error(err))...)
		return
	case res.LateSettle:
		d.log.Warn("dispatch: the claim ran out before the outcome was recorded; another delivery took over", fields...)
		return
	case fin.Status == ledger.DeliveryDead && t.Item.Order == string(ledger.OrderScope):
		d.metrics.dead.WithLabelValues(s.src.Name).Inc()
		d.alerts.DeadLetter(s.src.Name, t.Item.EventID, fin.Record.Error)
		d.conv.MovedOn(s.src.Name)
		d.log.Warn("dispatch: retry schedule exhausted; the event is in dead letter and its scope moves on to the next event in order",
			append(fields, zap.String("scope", t.Item.Scope))...)
		return
	case fin.Status == ledger.DeliveryDead:
		d.metrics.dead.WithLabelValues(s.src.Name).Inc()
		d.alerts.DeadLetter(s.src.Name, t.Item.EventID, fin.Record.Error)
		d.log.Warn("dispatch: retry schedule exhausted; the event is in dead letter", fields...)
		return
	case fin.Status == ledger.DeliveryQueued:
		fields = append(fields, zap.Time("next_at", fin.NextAt))
	}
	d.log.Info("dispatch", fields...)
}

// awaitAgent waits for one of the agent's places for held delivery t:
// false when the forward could no longer start in time to settle within
// t's claim (Source.StartBy), or shutdown cut the forwards first. The
// claim is checked against the clock whether or not a place is free at
// once, and again once one is had.
func (d *Dispatcher) awaitAgent(s *source, t ledger.Taken) bool {
	startBy := s.src.StartBy(t.Item.LeaseUntil)
	wait := startBy.Sub(d.now())
	if wait < 0 {
		return false
	}
	select {
	case s.agent <- struct{}{}:
	default:
		if !d.waitAgent(s, wait) {
			return false
		}
	}
	if d.now().After(startBy) {
		<-s.agent
		return false
	}
	return true
}

// waitAgent waits up to wait for one of s's request places.
func (d *Dispatcher) waitAgent(s *source, wait time.Duration) bool {
	timer := time.NewTimer(wait)
	defer timer.Stop()
	select {
	case s.agent <- struct{}{}:
		return true
	case <-timer.C:
	case <-d.forwards.Done():
	}
	return false
}

// giveBack records a held delivery that never reached the agent as due
// again at once, not counted as a failure (as a forward cut by shutdown
// is), so that a dispatcher takes it again under a fresh claim. If even
// that fails, it is due when its claim runs out.
func (d *Dispatcher) giveBack(s *source, t ledger.Taken, why string, fields []zap.Field) {
	fin := ledger.Finish{Taken: t, Status: ledger.DeliveryQueued, NextAt: d.now(), Interrupted: true,
		Record: ledger.AttemptRecord{Outcome: "interrupted", Error: why}}
	ctx, cancel := context.WithTimeout(context.Background(), settleTimeout)
	_, err := d.l.Queue().FinishDelivery(ctx, fin)
	cancel()
	d.mayBeDue.Store(true)
	d.metrics.attempts.WithLabelValues(s.src.Name, "given_back").Inc()
	if err != nil {
		d.metrics.storeErrors.WithLabelValues(s.src.Name).Inc()
		d.log.Warn("dispatch: giving back a delivery that was not sent failed; it is due again once its claim runs out", append(fields, zap.Error(err))...)
		return
	}
	d.log.Info("dispatch: delivery given back unsent; it is due again", fields...)
}

// outcome turns a forward's result into the delivery's next state, as the
// source's retry policy says: delivered or rejected for good, due again,
// or dead. A forward cut short by shutdown is due again at once and is not
// counted as a failure.
func (d *Dispatcher) outcome(s *source, t ledger.Taken, out forward.Outcome, interrupted bool) ledger.Finish {
	rec := ledger.AttemptRecord{AgentStatus: out.Status, Latency: out.Latency, Answer: out.Answer, Outcome: out.Kind.String()}
	if out.Err != nil {
		rec.Error = out.Err.Error()
	}
	fin := ledger.Finish{Taken: t, Record: rec}
	if s.retry.Ends(out) {
		fin.Status = ledger.DeliveryStatus(out.Kind.String())
		fin.Value = forward.RecordOf(out)
		return fin
	}
	now := d.now()
	if interrupted {
		fin.Status, fin.NextAt, fin.Interrupted = ledger.DeliveryQueued, now, true
		fin.Record.Outcome = "interrupted"
		return fin
	}
	next, dead := s.retry.Next(t.Item.Failures+1, out, t.Item.ReceivedAt, now)
	if dead {
		fin.Status = ledger.DeliveryDead
		return fin
	}
	fin.Status, fin.NextAt = ledger.DeliveryQueued, next
	return fin
}

// Shutdown stops taking work and waits for the deliveries in flight until
// ctx ends; then it cuts their forwards, which are recorded as due again
// at once, and waits for that. Run must have returned or its context been
// cancelled.
func (d *Dispatcher) Shutdown(ctx context.Context) error {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.leavePauseAcks(ctx)
	idle := make(chan struct{})
	go func() {
		d.running.Wait()
		d.workers.stop()
		close(idle)
	}()
	select {
	case <-idle:
		d.cut()
		return nil
	case <-ctx.Done():
	}
	d.cut()
	<-idle
	return fmt.Errorf("dispatch: grace period ended with deliveries in flight; they were cut and left due: %w", ctx.Err())
}
