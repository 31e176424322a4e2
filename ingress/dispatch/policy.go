package dispatch

import (
	"fmt"
	"slices"
	"time"

	"github.com/replyonce/gateway/ingress/field"
	"github.com/replyonce/gateway/ledger"
)

// Mode is how a source hands events to its agent.
type Mode string

// Delivery modes.
const (
	// ModeInline: the provider's request waits for the agent; an agent
	// failure is a 503 and the provider's retry is the queue. The
	// dispatcher leaves such a source alone.
	ModeInline Mode = "inline"
	// ModeQueued: the event is recorded with its run and claim in one store
	// step, the provider hears 202, and a dispatcher delivers it with
	// retries.
	ModeQueued Mode = "queued"
)

// Policy defaults.
const (
	// DefaultMode is the mode of a source that names none, from the
	// configuration file or from a program alike.
	DefaultMode        = ModeQueued
	DefaultConcurrency = 16
	// DefaultAcceptWait and MaxAcceptWait bound forward.accept_wait: well
	// inside every provider's answer budget.
	DefaultAcceptWait = 50 * time.Millisecond
	MaxAcceptWait     = time.Second
)

// Policy is a source's delivery mode and, in queued mode, how the
// dispatcher delivers its events. Its YAML keys are written in the
// source's forward section (forward.mode, forward.retry, ...). Zero fields
// take their defaults (withDefaults).
type Policy struct {
	Mode        Mode `yaml:"mode"`        // default DefaultMode
	Concurrency int  `yaml:"concurrency"` // requests to the agent in flight per process; default 16
	// AcceptWait is how long an accept may wait for the dispatcher to
	// take its event over when every place is taken and the agent is fast
	// (see Dispatcher.Reserve), at most MaxAcceptWait. Nil:
	// DefaultAcceptWait; zero: never wait (the event is stored and swept).
	AcceptWait *time.Duration `yaml:"accept_wait"`
	// Retry is forward.retry and forward.reject.
	Retry RetryPolicy `yaml:",inline"`
	// Conversation-aware delivery (queued mode only): Order scope keeps
	// one delivery per scope in flight, in contextAt order; Debounce holds
	// a burst and delivers its newest event for all; Cancel notify posts
	// a cancellation notice when a newer event supersedes the run in
	// flight (runs: supersede).
	Order    ledger.Order    `yaml:"order"`
	Debounce ledger.Debounce `yaml:"debounce"`
	Cancel   CancelMode      `yaml:"cancel"`
}

// AcceptWaitOf is a pointer to d, for Policy.AcceptWait.
func AcceptWaitOf(d time.Duration) *time.Duration { return &d }

// WithDefaults is the policy's one defaults function: every zero field
// that has a default gets it.
func (p Policy) WithDefaults() Policy {
	if p.Mode == "" {
		p.Mode = DefaultMode
	}
	if p.Concurrency == 0 {
		p.Concurrency = DefaultConcurrency
	}
	if p.AcceptWait == nil {
		p.AcceptWait = AcceptWaitOf(DefaultAcceptWait)
	}
	p.Retry = p.Retry.withDefaults()
	return p
}

// Validate checks a policy whose defaults are filled in (WithDefaults).
// path names the section its keys are in ("sources.NAME.forward"); the
// error is a *field.Error.
func (p Policy) Validate(path string) error {
	switch p.Mode {
	case ModeInline, ModeQueued:
	default:
		return field.Errorf(path+".mode", "%q is not one of queued, inline", p.Mode)
	}
	if p.Concurrency < 0 {
		return field.Errorf(path+".concurrency", "must be positive")
	}
	if w := p.AcceptWait; w != nil && (*w < 0 || *w > MaxAcceptWait) {
		return field.Errorf(path+".accept_wait", "%s is not between 0 and %s", *w, MaxAcceptWait)
	}
	if err := p.Retry.validate(path); err != nil {
		return err
	}
	if p.Order != ledger.OrderNone && p.Order != ledger.OrderScope {
		return field.Errorf(path+".order", "%q is not %q (or empty)", p.Order, ledger.OrderScope)
	}
	if p.Order != ledger.OrderNone && p.Mode != ModeQueued {
		return field.Errorf(path+".order", "needs forward.mode queued")
	}
	switch d := p.Debounce; {
	case d == ledger.Debounce{}:
	case p.Mode != ModeQueued:
		return field.Errorf(path+".debounce", "needs forward.mode queued")
	case d.Quiet <= 0:
		return field.Errorf(path+".debounce.quiet", "must be positive")
	case d.MaxWait == 0:
		return field.Errorf(path+".debounce.max_wait", "required: without it a scope that never goes quiet is never delivered")
	case d.MaxWait < d.Quiet:
		return field.Errorf(path+".debounce.max_wait", "%s is shorter than quiet %s", d.MaxWait, d.Quiet)
	}
	switch p.Cancel {
	case CancelNone:
	case CancelNotify:
		if p.Mode != ModeQueued {
			return field.Errorf(path+".cancel", "needs forward.mode queued")
		}
	default:
		return field.Errorf(path+".cancel", "%q is not %q (or empty)", p.Cancel, CancelNotify)
	}
	return p.Retry.validateReject(path)
}

// RetryPolicy is a queued source's retry policy: which answers end a
// delivery for good (Reject, besides the ones forward already takes for
// final), and when a failed one is tried again (Backoff).
type RetryPolicy struct {
	Backoff Backoff `yaml:"retry"`
	// Reject lists agent statuses that reject an event for good, besides
	// 400, 413, 415 and 422.
	Reject []int `yaml:"reject"`
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
// all). Each delay gets ±20 % jitter.
var DefaultSchedule = []time.Duration{0, 5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour,
	5 * time.Hour, 10 * time.Hour, 14 * time.Hour, 20 * time.Hour, 24 * time.Hour}

// MinRetryAfter and MaxRetryAfter clamp an agent's Retry-After in queued
// mode: sooner than a second is a busy loop, and later than six hours is
// better left to the schedule and an operator.
const (
	MinRetryAfter = time.Second
	MaxRetryAfter = 6 * time.Hour
)

func (r RetryPolicy) withDefaults() RetryPolicy {
	if len(r.Backoff.Schedule) == 0 {
		r.Backoff.Schedule = DefaultSchedule
	}
	return r
}

func (r RetryPolicy) validate(path string) error {
	for i, d := range r.Backoff.Schedule {
		if d < 0 {
			return field.Errorf(fmt.Sprintf("%s.retry.schedule[%d]", path, i), "must not be negative")
		}
	}
	if r.Backoff.MaxAge < 0 {
		return field.Errorf(path+".retry.max_age", "must not be negative")
	}
	return nil
}

func (r RetryPolicy) validateReject(path string) error {
	for i, st := range r.Reject {
		if st < 400 || st > 499 {
			return field.Errorf(fmt.Sprintf("%s.reject[%d]", path, i), "%d is not a 4xx status", st)
		}
		if slices.Contains([]int{401, 403, 404, 405, 410, 408, 409, 425, 429}, st) {
			return field.Errorf(fmt.Sprintf("%s.reject[%d]", path, i), "%d says the setup or the moment is wrong, never the event", st)
		}
	}
	return nil
}
