package dispatch

import (
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
	// PauseAfter is forward.pause_after, the breaker for broken agents:
	// after this many configuration-fault answers (401, 403, 404, 410)
	// with no answer between them, across instances, the source pauses
	// itself (queued mode only). 0: off.
	PauseAfter int `yaml:"pause_after"`
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
	if p.PauseAfter < 0 {
		return field.Errorf(path+".pause_after", "must be 0 (off) or positive")
	}
	if p.PauseAfter > 0 && p.Mode != ModeQueued {
		return field.Errorf(path+".pause_after", "needs forward.mode queued: pause applies to queued delivery")
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
