//go:build failover

package main

// The failover tests (go test -tags failover): a store server is killed,
// stopped or switched over while a provider keeps sending, and the tests
// count what a provider and an agent would notice. They start their own
// servers (package testservers) and take a minute or two each, so they
// are kept out of the plain test run; CI runs them in a step of their own
// and prints their counts.

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// failoverConfig is a queued source whose retries come quickly, so a
// delivery that failed during the failover is tried again within the
// test.
func failoverConfig(t *testing.T, store, agentURL string) string {
	return writeConfig(t, store, "      mode: queued\n      concurrency: 4\n      retry: {schedule: [0s, 500ms, 1s, 2s, 2s, 2s, 2s, 2s]}\n", agentURL)
}

// countingAgent counts forwards per event id.
type countingAgent struct {
	*sink
	mu    sync.Mutex
	seen  map[string]int
	last  atomic.Int64 // unix nanos of the latest forward
	delay time.Duration
}

func newCountingAgent(t *testing.T, delay time.Duration) *countingAgent {
	a := &countingAgent{sink: newSink(t), seen: map[string]int{}, delay: delay}
	a.setAnswer(func(_ int, r *http.Request) (int, time.Duration) {
		a.mu.Lock()
		a.seen[r.Header.Get("Replyonce-Event-Id")]++
		a.mu.Unlock()
		a.last.Store(time.Now().UnixNano())
		return http.StatusOK, a.delay
	})
	return a
}

func (a *countingAgent) forwards(id string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seen[id]
}

// provider sends events to the gateway as a provider does: each event
// until it is acknowledged (2xx), again after every 503 or failed
// connection, by several senders at once. It records what was
// acknowledged and how often the gateway said no.
type provider struct {
	t       *testing.T
	url     string
	client  *http.Client
	prefix  string
	next    atomic.Int64
	stop    atomic.Bool // no new events
	quit    atomic.Bool // no more retries either: the test is over
	wg      sync.WaitGroup
	mu      sync.Mutex
	acked   []string
	refused int // 503s and failed connections
	other   []string
	// answers records, per answer, when it was sent and received and
	// its status (0: no answer), for the tests that look at a window.
	answers []answer
}

type answer struct {
	sent, got time.Time
	status    int
}

func startProvider(t *testing.T, url, prefix string, senders int) *provider {
	p := &provider{t: t, url: url, client: newClient(t), prefix: prefix}
	for range senders {
		p.wg.Go(p.send)
	}
	t.Cleanup(func() {
		p.quit.Store(true)
		p.stop.Store(true)
		p.wg.Wait()
	})
	return p
}

func (p *provider) send() {
	for !p.stop.Load() {
		id := fmt.Sprintf("%s%d", p.prefix, p.next.Add(1))
		body, header := stripeEvent(p.t, id, nil)
		// An event once sent is sent until acknowledged, even after stop:
		// a provider retries for days. The bound is the test's.
		deadline := time.Now().Add(2 * time.Minute)
		for time.Now().Before(deadline) && !p.quit.Load() {
			sent := time.Now()
			req, _ := http.NewRequest(http.MethodPost, p.url, strings.NewReader(string(body)))
			req.Header = header.Clone()
			resp, err := p.client.Do(req)
			status := 0
			if err == nil {
				status = resp.StatusCode
				resp.Body.Close()
			}
			p.mu.Lock()
			p.answers = append(p.answers, answer{sent: sent, got: time.Now(), status: status})
			switch {
			case status == http.StatusAccepted || status == http.StatusOK:
				p.acked = append(p.acked, id)
			case status == 0 || status == http.StatusServiceUnavailable:
				p.refused++
			default:
				p.other = append(p.other, fmt.Sprintf("%s: %d", id, status))
			}
			p.mu.Unlock()
			if status/100 == 2 {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// downtime is how long after since the gateway kept refusing: from since
// to the last answer that was not a 2xx, for requests sent after since
// and before the first 2xx after until.
func (p *provider) downtime(since time.Time) time.Duration {
	p.mu.Lock()
	defer p.mu.Unlock()
	var last time.Time
	for _, a := range p.answers {
		if a.sent.After(since) && a.status/100 != 2 && a.got.After(last) {
			last = a.got
		}
	}
	if last.IsZero() {
		return 0
	}
	return last.Sub(since)
}

// finish stops sending new events and waits for every event sent to be
// acknowledged (or to run out of time).
func (p *provider) finish() {
	p.stop.Store(true)
	p.wg.Wait()
	if len(p.other) > 0 {
		p.t.Errorf("answers other than 2xx and 503: %v", p.other[:min(len(p.other), 10)])
		p.other = nil
	}
}

// ackedCount is how many distinct events were acknowledged so far.
func (p *provider) ackedCount() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.acked)
}

// waitAcked waits until n more events than now have been acknowledged.
func (p *provider) waitAcked(n int) {
	p.t.Helper()
	want := p.ackedCount() + n
	deadline := time.Now().Add(time.Minute)
	for p.ackedCount() < want {
		if time.Now().After(deadline) {
			p.t.Fatalf("the gateway acknowledged %d events in a minute, want %d", p.ackedCount(), want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// outcome is what the provider and the agent saw.
type outcome struct {
	sent, acked, refused, lost, twice int
	// stuck are lost events the store still holds: not lost by the store
	// but never delivered, which no failover excuses.
	stuck int
}

func (o outcome) String() string {
	return fmt.Sprintf("sent %d events, %d acknowledged, %d answers 503 or none, %d acknowledged but never delivered (lost; %d of them still in the store), %d delivered more than once",
		o.sent, o.acked, o.refused, o.lost, o.stuck, o.twice)
}

// settle waits for the agent to have every acknowledged event, or for
// forwards to stop for quiet (longer than a claim's lease and the retry
// schedule's steps: nothing more is coming), and counts. recorded, when
// set, says whether the store holds an event's scope.
func settle(t *testing.T, p *provider, a *countingAgent, quiet time.Duration, recorded func(id string) bool) outcome {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		missing := 0
		for _, id := range p.acked {
			if a.forwards(id) == 0 {
				missing++
			}
		}
		idle := time.Since(time.Unix(0, a.last.Load()))
		if missing == 0 || idle > quiet || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	o := outcome{sent: int(p.next.Load()), acked: len(p.acked), refused: p.refused}
	for _, id := range p.acked {
		if a.forwards(id) == 0 {
			o.lost++
			if recorded != nil && recorded(id) {
				o.stuck++
			}
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, n := range a.seen {
		if n > 1 {
			o.twice++
		}
	}
	return o
}
