//go:build unix

package main

import (
	"context"
	"time"
)

// scenario is one kind of trouble, run on each store it names.
type scenario struct {
	name      string
	stores    []string
	instances int  // gateway processes (bolt: always one)
	short     bool // in the -short set (CI)
	// lateCheck: the scenario paused or stalled something past a claim,
	// so a stale forward could come late; the record is read once more a
	// claim's time after everything went quiet.
	lateCheck bool
	// act breaks things while the provider sends, and returns when done.
	act func(ctx context.Context, e *env) error
}

var (
	allStores = []string{"bolt", "postgres", "redis"}
	shared    = []string{"postgres", "redis"} // stores several instances share
)

// rounds is n in the short set, long otherwise.
func (e *env) rounds(short, long int) int {
	if e.short {
		return short
	}
	return long
}

var scenarios = []scenario{
	{name: "kill-loop", stores: allStores, instances: 2, short: true,
		// SIGKILL during load (ordered scopes, debounce bursts, queued and
		// inline events), restarted at once, again and again.
		act: func(ctx context.Context, e *env) error {
			for i := range e.rounds(3, 10) {
				sleep(ctx, 1200*time.Millisecond)
				g := e.instances[i%len(e.instances)]
				g.Kill()
				if err := g.Start(ctx); err != nil {
					return err
				}
			}
			return nil
		}},
	{name: "agent-faults", stores: allStores, instances: 1, short: true,
		// The first delivery of one event in three gets a 500, a 429, a
		// hang past forward.timeout, a connection closed without an
		// answer, a 401 or a 404.
		act: func(ctx context.Context, e *env) error {
			e.agent.SetPlan(FirstDeliveryFaults(3, Fail500, Busy429, Hang, Close, Deny401, Gone404))
			sleep(ctx, time.Duration(e.rounds(4, 15))*time.Second)
			return nil
		}},
	{name: "three-instances", stores: shared, instances: 3, short: true,
		// One of three killed and left down a while, another paused for
		// less than a claim, under load.
		act: func(ctx context.Context, e *env) error {
			sleep(ctx, time.Second)
			e.instances[0].Kill()
			e.instances[1].Pause()
			sleep(ctx, 2*time.Second)
			e.instances[1].Resume()
			sleep(ctx, time.Second)
			if err := e.instances[0].Start(ctx); err != nil {
				return err
			}
			return nil
		}},
	{name: "store-outage", stores: shared, instances: 2, short: true,
		// Every connection to the store dropped and refused for 3 s.
		act: func(ctx context.Context, e *env) error {
			for range e.rounds(1, 4) {
				sleep(ctx, time.Second)
				e.store.Cut()
				sleep(ctx, 3*time.Second)
				e.store.Heal()
				sleep(ctx, time.Second) // load on the store that came back
			}
			return nil
		}},
	{name: "store-stall", stores: shared, instances: 2, short: true,
		// The store stops answering (connections open, bytes held) for
		// 2 s, well inside a claim.
		act: func(ctx context.Context, e *env) error {
			for range e.rounds(1, 4) {
				sleep(ctx, time.Second)
				e.store.Stall()
				sleep(ctx, 2*time.Second)
				e.store.Heal()
				sleep(ctx, time.Second) // load on the store that came back
			}
			return nil
		}},
	{name: "sigterm-hang", stores: allStores, instances: 1, short: true,
		// The agent hangs on every forward; the gateway is sent SIGTERM
		// mid-forward (shutdown_grace 3 s), then started again and the
		// agent recovers.
		act: func(ctx context.Context, e *env) error {
			sleep(ctx, time.Second)
			e.agent.HangAll(true)
			sleep(ctx, 500*time.Millisecond)
			e.instances[0].Term(15 * time.Second)
			e.agent.HangAll(false)
			if err := e.instances[0].Start(ctx); err != nil {
				return err
			}
			return nil
		}},
	{name: "redis-kill", stores: []string{"redis"}, instances: 2, short: true,
		// The Redis server (appendonly yes, appendfsync always) killed
		// with SIGKILL under load and started again on its files.
		act: func(ctx context.Context, e *env) error {
			srv := e.store.redis
			for range e.rounds(1, 3) {
				sleep(ctx, 1500*time.Millisecond)
				if err := srv.Kill(); err != nil {
					return err
				}
				sleep(ctx, time.Second)
				if err := srv.Restart(ctx); err != nil {
					return err
				}
			}
			return nil
		}},
	{name: "agent-close", stores: allStores, instances: 1, short: true,
		// The first delivery of one event in three is read and its
		// connection closed without an answer: one attempt must be one
		// request (issue #27: Go's client replayed it). agent-faults
		// mixes this fault with the others; here it is the only one, at a
		// higher rate.
		act: func(ctx context.Context, e *env) error {
			e.agent.SetPlan(FirstDeliveryFaults(3, Close))
			sleep(ctx, time.Duration(e.rounds(4, 10))*time.Second)
			return nil
		}},
	{name: "sigstop-past-claim", stores: allStores, instances: 2, lateCheck: true, short: true,
		// One instance stopped (SIGSTOP) for longer than a claim while it
		// holds deliveries, then continued: the other instance has taken
		// them over; the stopped one must not forward them when it wakes
		// (issue #27).
		act: func(ctx context.Context, e *env) error {
			for range e.rounds(1, 3) {
				sleep(ctx, time.Second)
				e.instances[0].Pause()
				sleep(ctx, claimTTL+2*time.Second)
				e.instances[0].Resume()
			}
			return nil
		}},
	{name: "stall-past-claim", stores: shared, instances: 2, lateCheck: true, short: true,
		// One instance's store connection stalled past a claim, the other
		// instance's healthy (issue #27: a take that outlives its claim).
		act: func(ctx context.Context, e *env) error {
			for range e.rounds(1, 3) {
				sleep(ctx, time.Second)
				e.store.relays[0].Stall()
				sleep(ctx, claimTTL+2*time.Second)
				e.store.relays[0].Heal()
			}
			return nil
		}},
}
