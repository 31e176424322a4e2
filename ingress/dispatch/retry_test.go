package dispatch_test

import (
	"testing"
	"time"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress/dispatch"
)

// The retry policy alone, as the dispatcher asks it after each attempt.

var received = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func fixedJitter(u float64) func() float64 { return func() float64 { return u } }

// After the k-th failure the next attempt is the schedule's k-th delay
// away, spread over ±20 % by the jitter.
func TestNextFollowsTheScheduleWithJitter(t *testing.T) {
	now := received.Add(time.Minute)
	failed := forward.Outcome{Kind: forward.Retry, Status: 502}
	for _, c := range []struct {
		u    float64
		want float64 // of the delay
	}{{0, 0.8}, {0.5, 1}, {0.999999999, 1.2}} {
		p := dispatch.RetryPolicy{Backoff: dispatch.Backoff{Schedule: dispatch.DefaultSchedule}, Jitter: fixedJitter(c.u)}
		for k := 1; k < len(dispatch.DefaultSchedule); k++ {
			at, dead := p.Next(k, failed, received, now)
			want := time.Duration(float64(dispatch.DefaultSchedule[k]) * c.want)
			if dead || at.Sub(now).Round(time.Second) != want.Round(time.Second) {
				t.Fatalf("jitter %v, failure %d: next in %s (dead %v), want %s", c.u, k, at.Sub(now), dead, want)
			}
		}
	}
}

// The schedule spent, the delivery is dead.
func TestNextIsDeadOnceTheScheduleIsSpent(t *testing.T) {
	p := dispatch.RetryPolicy{Backoff: dispatch.Backoff{Schedule: []time.Duration{0, time.Second, time.Minute}}}
	if _, dead := p.Next(2, forward.Outcome{Kind: forward.Retry}, received, received); dead {
		t.Fatal("dead after the 2nd failure of 3 attempts")
	}
	if _, dead := p.Next(3, forward.Outcome{Kind: forward.Retry}, received, received); !dead {
		t.Fatal("not dead after the 3rd failure of 3 attempts")
	}
}

// An attempt that would start past max_age after receipt is not made.
func TestNextIsDeadPastMaxAge(t *testing.T) {
	p := dispatch.RetryPolicy{Backoff: dispatch.Backoff{Schedule: dispatch.DefaultSchedule, MaxAge: time.Hour}, Jitter: fixedJitter(0.5)}
	now := received.Add(20 * time.Minute)
	if at, dead := p.Next(3, forward.Outcome{Kind: forward.Retry}, received, now); dead || !at.Equal(now.Add(30*time.Minute)) {
		t.Fatalf("30m after 20m of a 1h max age: %v dead %v", at, dead)
	}
	if _, dead := p.Next(4, forward.Outcome{Kind: forward.Retry}, received, now); !dead {
		t.Fatal("a 2h delay 20m into a 1h max age is not dead")
	}
}

// The agent's Retry-After (read by forward on a 429 or 503) replaces the
// schedule's delay, clamped to [MinRetryAfter, MaxRetryAfter]; 0 is advice
// to retry now, so it gets the least wait.
func TestNextHonoursRetryAfterWithinBounds(t *testing.T) {
	p := dispatch.RetryPolicy{Backoff: dispatch.Backoff{Schedule: dispatch.DefaultSchedule}, Jitter: fixedJitter(0.5)}
	for _, c := range []struct {
		given bool
		after time.Duration
		want  time.Duration
	}{
		{true, 90 * time.Second, 90 * time.Second},
		{true, 0, dispatch.MinRetryAfter},
		{true, 100 * time.Millisecond, dispatch.MinRetryAfter},
		{true, 48 * time.Hour, dispatch.MaxRetryAfter},
		{false, 0, dispatch.DefaultSchedule[1]},
	} {
		out := forward.Outcome{Kind: forward.Retry, Status: 429, RetryAfter: c.after, RetryAfterGiven: c.given}
		at, dead := p.Next(1, out, received, received)
		if dead || at.Sub(received) != c.want {
			t.Errorf("Retry-After %s (given %v): next in %s, want %s", c.after, c.given, at.Sub(received), c.want)
		}
	}
}

// Only a delivery or a rejection ends a delivery; every other answer,
// configuration faults included, is retried.
func TestEndsOnlyOnDeliveredOrRejected(t *testing.T) {
	var p dispatch.RetryPolicy
	for kind, ends := range map[forward.Kind]bool{forward.Delivered: true, forward.Rejected: true, forward.Retry: false, forward.Fault: false} {
		if got := p.Ends(forward.Outcome{Kind: kind}); got != ends {
			t.Errorf("Ends(%s) = %v, want %v", kind, got, ends)
		}
	}
}

// An undelivered event is kept for max_age, or for the whole schedule at
// its longest jitter with a claim per attempt.
func TestLifetime(t *testing.T) {
	p := dispatch.RetryPolicy{Backoff: dispatch.Backoff{Schedule: []time.Duration{0, 10 * time.Second, time.Minute}}}
	if got, want := p.Lifetime(5*time.Second), 12*time.Second+72*time.Second+3*5*time.Second; got != want {
		t.Errorf("Lifetime = %s, want %s", got, want)
	}
	p.Backoff.MaxAge = time.Hour
	if got := p.Lifetime(5 * time.Second); got != time.Hour {
		t.Errorf("Lifetime with max_age 1h = %s", got)
	}
}
