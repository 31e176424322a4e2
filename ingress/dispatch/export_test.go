package dispatch

import (
	"context"
	"time"

	"github.com/replyonce/gateway/forward"
)

// What the external tests (package dispatch_test, which builds a real
// gateway with package ingress) need to see of the Dispatcher's insides.

// Tuning constants, for tests that step past them.
const (
	TakeAhead        = takeAhead
	TakeAheadLatency = takeAheadLatency
	GaugeEvery       = gaugeEvery
)

// Sweep runs one sweep, as Run does when woken.
func (d *Dispatcher) Sweep(ctx context.Context) (bool, error) { return d.sweep(ctx, true) }

// SweepFreed sweeps as a freed place does.
func (d *Dispatcher) SweepFreed(ctx context.Context) (bool, error) { return d.sweep(ctx, false) }

// InFlight lists, per source, the deliveries held.
func (d *Dispatcher) InFlight() map[string]int { return d.inFlight() }

// Held is how many of source's deliveries are held.
func (d *Dispatcher) Held(source string) int { return len(d.sources[source].holds) }

// Waiting is how many accepts wait in Reserve for one of source's places.
func (d *Dispatcher) Waiting(source string) int { return int(d.sources[source].waiting.Load()) }

// Concurrency is source's number of requests to the agent in flight.
func (d *Dispatcher) Concurrency(source string) int { return cap(d.sources[source].agent) }

// SetLatency sets source's moving average of the agent's answer time.
func (d *Dispatcher) SetLatency(source string, l time.Duration) {
	d.sources[source].latency.Store(int64(l))
}

// StopTaking makes d reserve and take nothing more, as Shutdown does,
// without waiting for anything.
func (d *Dispatcher) StopTaking() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
}

// AttemptEnded tells d's incident tracking that an attempt of source that
// started at started ended with out, as a delivery does when it ends.
func (d *Dispatcher) AttemptEnded(source string, out forward.Outcome, started time.Time) {
	s := d.sources[source]
	if out.Kind == forward.Delivered || out.Kind == forward.Rejected {
		d.answered(s, started)
		return
	}
	d.failed(s, out, nil, started)
}
