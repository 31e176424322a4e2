package dispatch_test

import (
	"context"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/internal/testkit"
	"github.com/replyonce/gateway/ledger"
)

// Accepted means recorded: 202 queued, then the agent gets exactly what
// inline mode sends, and every later copy is a duplicate.
func TestQueuedAcceptAndDeliver(t *testing.T) {
	h := newHarness(t, queuedSource())
	status, ans := h.post(t, "d-1")
	if status != http.StatusAccepted || ans["status"] != "queued" || ans["event_id"] != "d-1" || ans["run_id"] != "github:d-1" {
		t.Fatalf("accept: %d %v, want 202 queued", status, ans)
	}
	if st, a := h.post(t, "d-1"); st != http.StatusOK || a["status"] != "duplicate" {
		t.Fatalf("copy while queued: %d %v, want 200 duplicate", st, a)
	}
	settle(t, h.d)
	reqs := h.agent.requests("d-1")
	if len(reqs) != 1 {
		t.Fatalf("agent got %d requests, want 1", len(reqs))
	}
	g := reqs[0]
	if string(g.Body) != string(githubBody("d-1")) {
		t.Errorf("body %q, want the provider's bytes", g.Body)
	}
	wantHeader(t, g, "Content-Type", "application/json")
	wantHeader(t, g, "X-Github-Event", "issues")
	wantHeader(t, g, forward.HeaderRunID, "github:d-1")
	wantHeader(t, g, forward.HeaderDelivery, "1")
	wantHeader(t, g, forward.HeaderScope, "github:d-1")
	if g.Header.Get("X-Hub-Signature-256") != "" {
		t.Error("the provider's signature was forwarded")
	}
	if g.Header.Get(forward.HeaderWebhookSignature) == "" || g.Header.Get(forward.HeaderFencingToken) == "" {
		t.Error("no Standard Webhooks signature or fencing token on the queued forward")
	}
	if q := h.item(t, "d-1"); q.Status != ledger.DeliveryDelivered {
		t.Fatalf("item %s, want delivered", q.Status)
	}
	if st, a := h.post(t, "d-1"); st != http.StatusOK || a["status"] != "duplicate" || a["outcome"] != "delivered" {
		t.Fatalf("copy after delivery: %d %v", st, a)
	}
	if n := len(h.agent.requests("d-1")); n != 1 {
		t.Fatalf("duplicates reached the agent: %d requests", n)
	}
}

// The provider's answer never waits for the agent.
func TestQueuedAnswerDoesNotWaitForTheAgent(t *testing.T) {
	h := newHarness(t, queuedSource())
	release := make(chan struct{})
	h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		<-release
		w.WriteHeader(http.StatusOK)
	})
	if st, _ := h.post(t, "slow"); st != http.StatusAccepted {
		t.Fatalf("status %d, want 202 while the agent is still busy", st)
	}
	if q := h.item(t, "slow"); q.Status != ledger.DeliveryDelivering {
		t.Fatalf("item %s while the agent holds the request, want delivering", q.Status)
	}
	close(release)
	settle(t, h.d)
	if q := h.item(t, "slow"); q.Status != ledger.DeliveryDelivered {
		t.Fatalf("item %s, want delivered", q.Status)
	}
}

// A store that cannot record the event is a 503, never a 2xx.
func TestQueuedStoreDownIs503(t *testing.T) {
	h := newHarness(t, queuedSource())
	h.store.down.Store(true)
	if st, _ := h.post(t, "lost"); st != http.StatusServiceUnavailable {
		t.Fatalf("status %d with the store down, want 503", st)
	}
	h.store.down.Store(false)
	if st, _ := h.post(t, "lost"); st != http.StatusAccepted {
		t.Fatalf("status %d once the store is back, want 202", st)
	}
	settle(t, h.d)
}

// The agent is down: the event waits, retries follow the schedule on the
// injected clock, and it is delivered once the agent is back.
func TestRetriesFollowTheSchedule(t *testing.T) {
	h := newHarness(t, queuedSource())
	down := true
	h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		if down {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	h.post(t, "r-1")
	settle(t, h.d)
	for i, delay := range dispatch.DefaultSchedule[1:4] {
		q := h.item(t, "r-1")
		if q.Status != ledger.DeliveryQueued || q.Failures != i+1 {
			t.Fatalf("after attempt %d: %+v", i+1, q)
		}
		wait := q.NextAt.Sub(h.clock.Now())
		if wait != delay { // jitter fixed at its middle
			t.Fatalf("retry %d scheduled in %s, want %s", i+1, wait, delay)
		}
		h.clock.Advance(wait - time.Millisecond)
		h.sweep(t)
		if n := len(h.agent.requests("r-1")); n != i+1 {
			t.Fatalf("retried early: %d requests before retry %d was due", n, i+1)
		}
		h.clock.Advance(time.Millisecond)
		if i == 2 {
			down = false
		}
		h.sweep(t)
	}
	reqs := h.agent.requests("r-1")
	if len(reqs) != 4 || h.item(t, "r-1").Status != ledger.DeliveryDelivered {
		t.Fatalf("%d requests, item %+v; want delivered on the 4th", len(reqs), h.item(t, "r-1"))
	}
	for i, g := range reqs {
		wantHeader(t, g, forward.HeaderDelivery, strconv.Itoa(i+1))
		wantHeader(t, g, forward.HeaderRunID, "github:r-1")
	}
	recs, err := h.ledger.Queue().AttemptsOf(context.Background(), h.item(t, "r-1"))
	if err != nil || len(recs) != 4 || recs[0].AgentStatus != 502 || recs[3].AgentStatus != 200 {
		t.Fatalf("attempt records %+v, %v", recs, err)
	}
}

// The agent's Retry-After on 429 and 503 replaces the schedule's delay,
// within [1 s, 6 h]; "0" is advice too (retry after the least wait).
func TestRetryAfterHonoured(t *testing.T) {
	for _, c := range []struct {
		status int
		header string
		want   time.Duration
	}{
		{http.StatusTooManyRequests, "120", 120 * time.Second},
		{http.StatusServiceUnavailable, "86400", dispatch.MaxRetryAfter},
		{http.StatusServiceUnavailable, "", dispatch.DefaultSchedule[1]},  // no advice: the schedule
		{http.StatusServiceUnavailable, "0", dispatch.MinRetryAfter},      // "now", within the bounds
		{http.StatusTooManyRequests, "soon", dispatch.DefaultSchedule[1]}, // unreadable: no advice
	} {
		t.Run(strconv.Itoa(c.status)+"_"+c.header, func(t *testing.T) {
			h := newHarness(t, queuedSource())
			h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
				if c.header != "" {
					w.Header().Set("Retry-After", c.header)
				}
				w.WriteHeader(c.status)
			})
			h.post(t, "ra")
			settle(t, h.d)
			q := h.item(t, "ra")
			if got := q.NextAt.Sub(h.clock.Now()); got != c.want {
				t.Fatalf("next attempt in %s, want %s", got, c.want)
			}
		})
	}
	h := newHarness(t, queuedSource())
	at := h.clock.Now().Add(10 * time.Minute).UTC().Format(http.TimeFormat)
	h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		w.Header().Set("Retry-After", at)
		w.WriteHeader(http.StatusServiceUnavailable)
	})
	h.post(t, "date")
	settle(t, h.d)
	if got := h.item(t, "date").NextAt.Sub(h.clock.Now()); got < 9*time.Minute || got > 10*time.Minute {
		t.Fatalf("HTTP-date Retry-After: next attempt in %s, want about 10m", got)
	}
}

// A schedule spent means dead letter: kept, never retried by itself; a
// replay delivers it as a new delivery of the same run.
func TestDeadLetterAndReplay(t *testing.T) {
	h := newHarness(t, queuedSource(func(c *ingress.SourceConfig) {
		c.Forward.Queue.Retry.Backoff.Schedule = []time.Duration{0, time.Second, 2 * time.Second}
	}))
	h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		if n <= 3 {
			w.WriteHeader(http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	h.post(t, "dl")
	settle(t, h.d)
	for range 2 {
		h.clock.Advance(3 * time.Second)
		h.sweep(t)
	}
	q := h.item(t, "dl")
	if q.Status != ledger.DeliveryDead || len(h.agent.requests("dl")) != 3 {
		t.Fatalf("after the schedule: %+v, %d requests; want dead after 3", q, len(h.agent.requests("dl")))
	}
	h.clock.Advance(48 * time.Hour)
	h.sweep(t)
	if n := len(h.agent.requests("dl")); n != 3 {
		t.Fatalf("a dead event was retried by itself: %d requests", n)
	}
	if st, a := h.post(t, "dl"); st != http.StatusOK || a["status"] != "duplicate" {
		t.Fatalf("copy of a dead event: %d %v, want 200 duplicate", st, a)
	}
	if _, err := h.ledger.Queue().ReplayDelivery(context.Background(), q.Scope, q.EntryID); err != nil {
		t.Fatal(err)
	}
	h.sweep(t)
	reqs := h.agent.requests("dl")
	if len(reqs) != 4 || h.item(t, "dl").Status != ledger.DeliveryDelivered {
		t.Fatalf("replay: %d requests, item %+v", len(reqs), h.item(t, "dl"))
	}
	wantHeader(t, reqs[3], forward.HeaderDelivery, "4")
	wantHeader(t, reqs[3], forward.HeaderRunID, "github:dl")
	t3, _ := strconv.ParseUint(reqs[2].Header.Get(forward.HeaderFencingToken), 10, 64)
	t4, _ := strconv.ParseUint(reqs[3].Header.Get(forward.HeaderFencingToken), 10, 64)
	if t4 <= t3 {
		t.Fatalf("replay's fencing token %d is not newer than %d", t4, t3)
	}
}

// max_age ends retrying before the schedule does.
func TestMaxAge(t *testing.T) {
	h := newHarness(t, queuedSource(func(c *ingress.SourceConfig) {
		c.Forward.Queue.Retry.Backoff = dispatch.Backoff{Schedule: []time.Duration{0, 5 * time.Second, 5 * time.Minute}, MaxAge: time.Minute}
	}))
	h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) { w.WriteHeader(http.StatusInternalServerError) })
	h.post(t, "old")
	settle(t, h.d)
	h.clock.Advance(5 * time.Second)
	h.sweep(t) // the next delay (5m) would start past the minute
	if q := h.item(t, "old"); q.Status != ledger.DeliveryDead || len(h.agent.requests("old")) != 2 {
		t.Fatalf("%+v after max_age, %d requests", q, len(h.agent.requests("old")))
	}
}

// Only statuses that say the event is bad are final; configuration faults
// are retried.
func TestRejectionsAndFaults(t *testing.T) {
	for _, c := range []struct {
		status int
		want   ledger.DeliveryStatus
	}{
		{http.StatusUnprocessableEntity, ledger.DeliveryRejected},
		{http.StatusBadRequest, ledger.DeliveryRejected},
		{http.StatusUnauthorized, ledger.DeliveryQueued},
		{http.StatusNotFound, ledger.DeliveryQueued},
		{http.StatusGone, ledger.DeliveryQueued},
		{http.StatusPaymentRequired, ledger.DeliveryRejected}, // listed in forward.reject below
		{http.StatusFound, ledger.DeliveryQueued},             // a redirect is a failure
	} {
		t.Run(strconv.Itoa(c.status), func(t *testing.T) {
			h := newHarness(t, queuedSource(func(sc *ingress.SourceConfig) { sc.Forward.Queue.Retry.Reject = []int{402} }))
			h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
				w.Header().Set("Location", "http://elsewhere.invalid/")
				w.WriteHeader(c.status)
			})
			h.post(t, "x")
			settle(t, h.d)
			if q := h.item(t, "x"); q.Status != c.want || q.LastStatus != c.status {
				t.Fatalf("agent %d: item %s (last %d), want %s", c.status, q.Status, q.LastStatus, c.want)
			}
		})
	}
}

// A dispatcher that crashed mid-delivery: once its claim runs out another
// process's dispatcher takes the delivery over under a newer token.
func TestCrashedHolderIsTakenOver(t *testing.T) {
	h := newHarness(t, queuedSource())
	// No free slot here: the event waits in the store.
	for _, sl := range fillHolds(t, h.d, "github") {
		defer sl.Release()
	}
	h.post(t, "crash")
	q := h.item(t, "crash")
	crashed, err := h.ledger.Queue().TakeDelivery(context.Background(), q.Scope, q.EntryID, h.source.Queued().Lease())
	if err != nil || !crashed.OK {
		t.Fatalf("take: %+v %v", crashed, err)
	}
	other := h.newDispatcher(t, forward.New(nil, h.clock.Now), nil)
	if _, err := other.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, other)
	if n := len(h.agent.requests("crash")); n != 0 {
		t.Fatalf("taken over while the claim was live: %d requests", n)
	}
	h.clock.Advance(h.source.Queued().Lease())
	if _, err := other.Sweep(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, other)
	h.wantDeliveredOnceAsSecond(t, "crash")
}

// The loop finds due work on its own, backs off while the store is down,
// and resumes: nothing is lost.
func TestRunSweepsAndSurvivesStoreOutage(t *testing.T) {
	h := newHarness(t, queuedSource())
	for _, sl := range fillHolds(t, h.d, "github") {
		defer sl.Release()
	}
	for i := range 5 {
		h.post(t, "o-"+strconv.Itoa(i)) // all wait in the store
	}
	other := h.newDispatcher(t, forward.New(nil, h.clock.Now), nil)
	h.store.down.Store(true)
	run(t, other)
	time.Sleep(100 * time.Millisecond) // a few failed sweeps
	h.store.down.Store(false)
	for i := range 5 {
		id := "o-" + strconv.Itoa(i)
		testkit.Eventually(t, id+" is delivered", func() bool { return h.item(t, id).Status == ledger.DeliveryDelivered })
		if n := len(h.agent.requests(id)); n != 1 {
			t.Errorf("%s forwarded %d times, want once", id, n)
		}
	}
}

// Shutdown lets a forward in flight finish within the grace period.
func TestShutdownWaitsForInFlight(t *testing.T) {
	h := newHarness(t, queuedSource())
	release := make(chan struct{})
	h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		<-release
		w.WriteHeader(http.StatusOK)
	})
	h.post(t, "sd")
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- h.d.Shutdown(ctx)
	}()
	// Once shutdown has begun no slot is handed out.
	testkit.Eventually(t, "shutdown has begun and no slot is handed out", func() bool {
		sl, ok := h.d.Reserve(context.Background(), "github")
		if ok {
			sl.Release()
		}
		return !ok
	})
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if q := h.item(t, "sd"); q.Status != ledger.DeliveryDelivered {
		t.Fatalf("item %s after a graceful shutdown, want delivered", q.Status)
	}
}

// A forward still running when the grace period ends is cut and left due.
func TestShutdownCutsAfterGrace(t *testing.T) {
	h := newHarness(t, queuedSource())
	h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		<-r.Context().Done()
	})
	h.post(t, "cut")
	testkit.Eventually(t, "cut is delivering and reached the agent", func() bool {
		return h.item(t, "cut").Status == ledger.DeliveryDelivering && len(h.agent.requests("cut")) > 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := h.d.Shutdown(ctx); err == nil {
		t.Fatal("shutdown reported no cut forward")
	}
	q := h.item(t, "cut")
	if q.Status != ledger.DeliveryQueued || q.Failures != 0 || !q.Due(h.clock.Now()) {
		t.Fatalf("cut delivery: %+v, want queued, due now, no failure counted", q)
	}
}

// A paused source keeps accepting and storing, and dispatches nothing
// until it is resumed (by any process sharing the store).
func TestPauseKeepsEventsAndResumeDelivers(t *testing.T) {
	h := newHarness(t, queuedSource())
	ctx := context.Background()
	if err := h.ledger.Sources().SetSourcePaused(ctx, "github", true); err != nil {
		t.Fatal(err)
	}
	h.sweep(t) // this process learns of the pause
	for i := range 3 {
		if st, _ := h.post(t, "p-"+strconv.Itoa(i)); st != http.StatusAccepted {
			t.Fatalf("paused source answered %d, want 202", st)
		}
	}
	h.sweep(t)
	for i := range 3 {
		id := "p-" + strconv.Itoa(i)
		if n := len(h.agent.requests(id)); n != 0 || h.item(t, id).Status != ledger.DeliveryQueued {
			t.Fatalf("%s dispatched while paused: %d requests, %s", id, n, h.item(t, id).Status)
		}
	}
	if err := h.ledger.Sources().SetSourcePaused(ctx, "github", false); err != nil {
		t.Fatal(err)
	}
	h.sweep(t)
	for i := range 3 {
		id := "p-" + strconv.Itoa(i)
		if n := len(h.agent.requests(id)); n != 1 || h.item(t, id).Status != ledger.DeliveryDelivered {
			t.Fatalf("%s after resume: %d requests, %s", id, n, h.item(t, id).Status)
		}
	}
}

// A provider that never retries (GitHub) posts 500 events once each while
// the agent is down. Each is stored at once; the retries follow the
// schedule on the injected clock; all are delivered when the agent is back.
func TestNeverRetryingProviderAgentDown(t *testing.T) {
	h := newHarness(t, queuedSource())
	var up atomic.Bool
	h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		if !up.Load() {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	const events = 500
	for i := range events {
		if st, _ := h.post(t, "gh-"+strconv.Itoa(i)); st != http.StatusAccepted {
			t.Fatalf("event %d: %d, want 202", i, st)
		}
	}
	drain := func() {
		for {
			settle(t, h.d) // deliveries handed over at accept finish first
			due, err := h.ledger.Queue().Due(context.Background(), ledger.DueQuery{Limit: 1000})
			if err != nil {
				t.Fatal(err)
			}
			if len(due) == 0 {
				return
			}
			h.sweep(t)
		}
	}
	drain() // first attempts, all failing
	elapsed := time.Duration(0)
	for k := 1; k <= 3; k++ { // 5 s, 5 min, 30 min: still down
		step := dispatch.DefaultSchedule[k]
		h.clock.Advance(step - time.Millisecond)
		drain()
		for i := range events {
			if n := len(h.agent.requests("gh-" + strconv.Itoa(i))); n != k {
				t.Fatalf("after %s: event %d had %d attempts, want %d (the schedule, not sooner)", elapsed+step-time.Millisecond, i, n, k)
			}
		}
		h.clock.Advance(time.Millisecond)
		elapsed += step
		drain()
	}
	up.Store(true)
	h.clock.Advance(dispatch.DefaultSchedule[4]) // the 2 h retry
	drain()
	for i := range events {
		id := "gh-" + strconv.Itoa(i)
		reqs := h.agent.requests(id)
		if len(reqs) != 5 || h.item(t, id).Status != ledger.DeliveryDelivered {
			t.Fatalf("%s: %d requests, %s; want delivered on attempt 5", id, len(reqs), h.item(t, id).Status)
		}
		wantHeader(t, reqs[4], forward.HeaderDelivery, "5")
	}
}

// A slow agent behind a Slack-style budget: every provider answer comes
// while the agent is still working on earlier events, and the provider's
// retries of an event are duplicates that never reach the agent again.
func TestSlowAgentBehindShortBudget(t *testing.T) {
	h := newHarness(t, queuedSource(func(c *ingress.SourceConfig) { c.Forward.Timeout = time.Minute }))
	release := make(chan struct{})
	h.agent.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		<-release // the agent takes as long as the test says
		w.WriteHeader(http.StatusOK)
	})
	const events = 40
	for i := range events {
		for copy := range 3 { // the first delivery and two provider retries
			st, a := h.post(t, "slack-"+strconv.Itoa(i))
			want := http.StatusAccepted
			if copy > 0 {
				want = http.StatusOK
			}
			if st != want {
				t.Fatalf("event %d copy %d: %d %v, want %d while the agent is busy", i, copy, st, a, want)
			}
		}
	}
	close(release)
	for {
		due, err := h.ledger.Queue().Due(context.Background(), ledger.DueQuery{Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if len(due) == 0 {
			break
		}
		h.sweep(t)
	}
	settle(t, h.d)
	for i := range events {
		id := "slack-" + strconv.Itoa(i)
		if n := len(h.agent.requests(id)); n != 1 {
			t.Errorf("%s reached the agent %d times, want once", id, n)
		}
	}
}

// A store outage while the loop runs is one warning, however many
// sweeps back off during it, and one line when the store answers again.
func TestStoreOutageIsOneIncidentInTheLog(t *testing.T) {
	h := newHarness(t, queuedSource())
	h.store.down.Store(true)
	run(t, h.d)
	testkit.Eventually(t, "four failed sweeps", func() bool {
		mfs, err := h.dreg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "replyonce_dispatch_sweep_errors_total" {
				return mf.GetMetric()[0].GetCounter().GetValue() >= 4
			}
		}
		return false
	})
	h.store.down.Store(false)
	testkit.Eventually(t, "the recovery line", func() bool {
		return h.logs.FilterMessage("dispatch: reading due deliveries again").Len() == 1
	})
	if n := h.logs.FilterMessageSnippet("reading due deliveries failed").Len() + h.logs.FilterMessageSnippet("still failing").Len(); n != 1 {
		t.Fatalf("%d warnings for one store outage, want 1", n)
	}
}

// In the steady state of queued delivery every event goes to a free place
// at accept and the due index is empty. A freed place then reads the index
// again only when work may have become due since (an event accepted
// without a place), not for every event; a poll always reads it, and finds
// what became due some other way (here: another process's event).
func TestFreedPlaceReadsAnEmptyDueIndexOnlyWhenWorkMayBeDue(t *testing.T) {
	h := newHarness(t, queuedSource())
	if st, _ := h.post(t, "first"); st != http.StatusAccepted {
		t.Fatalf("status %d", st)
	}
	settle(t, h.d)
	h.sweep(t) // a poll: the index is empty
	src := h.source
	scope := "github:other"
	_, err := h.ledger.Queue().Enqueue(context.Background(), ledger.EnqueueRequest{
		Event: ledger.QueuedEvent{Source: src.Name, EventID: "other", Scope: scope, ContentType: "application/json", Body: githubBody("other")},
		Run:   ledger.RunOptions{RunID: "run-other"},
		Claim: ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: ingress.IntentDeliver, Payload: map[string]string{"source": src.Name, "eventId": "other"}},
			PendingTTL: src.Queued().Lease()},
		MaxAge: src.Queued().KeepFor(),
	})
	if err != nil {
		t.Fatal(err)
	}
	reads := h.store.reads.Load()
	if _, err := h.d.SweepFreed(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, h.d)
	if n := h.store.reads.Load() - reads; n != 0 {
		t.Fatalf("a freed place read the store %d times after an empty due index", n)
	}
	if n := len(h.agent.requests("other")); n != 0 {
		t.Fatalf("%d forwards of the other process's event before a poll", n)
	}
	// An event accepted without a place says work may be due.
	h.d.Notify()
	if _, err := h.d.SweepFreed(context.Background()); err != nil {
		t.Fatal(err)
	}
	settle(t, h.d)
	if n := len(h.agent.requests("other")); n != 1 {
		t.Fatalf("%d forwards after a notice, want 1", n)
	}
	// And a poll reads an empty index whatever happened.
	reads = h.store.reads.Load()
	h.sweep(t)
	if h.store.reads.Load() == reads {
		t.Fatal("a poll did not read the due index")
	}
}
