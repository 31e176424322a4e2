package dispatch

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress/field"
)

// RetryPolicy is a queued source's retry policy, all of it: which answers
// end a delivery and which are retried, when a failed attempt is tried
// again (the schedule, its jitter, the agent's Retry-After within bounds),
// and when retrying stops (dead letter). The dispatcher asks it after
// every attempt; change the schedule here and nowhere else.
//
// What an agent's status means (delivered, rejected, a configuration
// fault, try again) is forward's classification (see package forward),
// with Reject added to the statuses it takes for final.
type RetryPolicy struct {
	Backoff Backoff `yaml:"retry"`
	// Reject lists agent statuses that reject an event for good, besides
	// 400, 413, 415 and 422 (forward.reject).
	Reject []int `yaml:"reject"`
	// Jitter returns a number in [0, 1) that spreads each delay over
	// ±20 %; nil: math/rand. The dispatcher gives its own
	// (Options.Jitter).
	Jitter func() float64 `yaml:"-"`
}

// Backoff is forward.retry: the delays between attempts and how long
// after receipt they may go on.
type Backoff struct {
	// Schedule lists the delay before each attempt: Schedule[0] before the
	// first (normally 0), Schedule[k] after the k-th failure. An event that
	// fails its last scheduled attempt goes to dead letter. Default
	// DefaultSchedule.
	Schedule []time.Duration `yaml:"schedule"`
	// MaxAge ends retrying earlier: an attempt that would start later than
	// MaxAge after receipt is not made (dead letter). Zero: the schedule
	// alone decides.
	MaxAge time.Duration `yaml:"max_age"`
}

// DefaultSchedule is the Standard Webhooks retry schedule: the first
// attempt at once, then these delays after each failure (about 3 days in
// all).
var DefaultSchedule = []time.Duration{0, 5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
	5 * time.Hour, 10 * time.Hour, 14 * time.Hour, 20 * time.Hour, 24 * time.Hour}

// MinRetryAfter and MaxRetryAfter clamp an agent's Retry-After: sooner
// than a second is a busy loop, and later than six hours is better left to
// the schedule and an operator.
const (
	MinRetryAfter = time.Second
	MaxRetryAfter = 6 * time.Hour
)

// Ends reports whether an attempt's outcome ends the delivery: the agent
// took the event (2xx) or rejected it for good. Every other answer is
// retried: 5xx, timeouts and refused connections, redirects, the "not
// now" statuses 408, 409, 425 and 429, and the configuration faults 401,
// 403, 404, 405 and 410 (a wrong secret or path must not lose events).
func (p RetryPolicy) Ends(out forward.Outcome) bool {
	return out.Kind == forward.Delivered || out.Kind == forward.Rejected
}

// Next is when a delivery whose attempt just failed with out is tried
// again, or dead when it is not: its schedule is spent, or the next
// attempt would start later than Backoff.MaxAge after the event was
// received. failures counts the failed attempts, this one included. The
// delay is the schedule's next one with ±20 % jitter, or the agent's
// Retry-After (on a 429 or 503) clamped to [MinRetryAfter, MaxRetryAfter].
func (p RetryPolicy) Next(failures int, out forward.Outcome, received, now time.Time) (at time.Time, dead bool) {
	s := p.Backoff.Schedule
	if failures >= len(s) {
		return time.Time{}, true
	}
	delay := jittered(s[failures], p.jitter())
	if out.RetryAfterGiven {
		delay = min(max(out.RetryAfter, MinRetryAfter), MaxRetryAfter)
	}
	at = now.Add(delay)
	if p.Backoff.MaxAge > 0 && at.After(received.Add(p.Backoff.MaxAge)) {
		return time.Time{}, true
	}
	return at, false
}

// Lifetime is the longest a delivery can go on being retried, when each
// attempt may hold its claim for lease: Backoff.MaxAge, or else the whole
// schedule at its longest jitter with a claim per attempt. An undelivered
// event is kept at least this long.
func (p RetryPolicy) Lifetime(lease time.Duration) time.Duration {
	if p.Backoff.MaxAge > 0 {
		return p.Backoff.MaxAge
	}
	var total time.Duration
	for _, d := range p.Backoff.Schedule {
		total += d*6/5 + lease // the delay at its longest jitter, +20 %
	}
	return total
}

// jittered spreads d over ±20 %; u is uniform in [0, 1).
func jittered(d time.Duration, u float64) time.Duration {
	return time.Duration(float64(d) * (0.8 + 0.4*u))
}

func (p RetryPolicy) jitter() float64 {
	if p.Jitter == nil {
		return rand.Float64()
	}
	return p.Jitter()
}

func (p RetryPolicy) withDefaults() RetryPolicy {
	if len(p.Backoff.Schedule) == 0 {
		p.Backoff.Schedule = DefaultSchedule
	}
	return p
}

func (p RetryPolicy) validate(path string) error {
	for i, d := range p.Backoff.Schedule {
		if d < 0 {
			return field.Errorf(fmt.Sprintf("%s.retry.schedule[%d]", path, i), "must not be negative")
		}
	}
	if p.Backoff.MaxAge < 0 {
		return field.Errorf(path+".retry.max_age", "must not be negative")
	}
	return nil
}

func (p RetryPolicy) validateReject(path string) error {
	for i, st := range p.Reject {
		if st < 400 || st > 499 {
			return field.Errorf(fmt.Sprintf("%s.reject[%d]", path, i), "%d is not a 4xx status", st)
		}
		if slices.Contains([]int{401, 403, 404, 405, 410, 408, 409, 425, 429}, st) {
			return field.Errorf(fmt.Sprintf("%s.reject[%d]", path, i), "%d says the setup or the moment is wrong, never the event", st)
		}
	}
	return nil
}
