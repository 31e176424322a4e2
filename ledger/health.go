package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// controlHealth names the control record of the sources whose agent is
// failing: a small JSON object (source name to AgentHealth), written by
// every dispatcher that sees an attempt fail or an incident end, so that
// every process, the admin API and the console read the same health.
const controlHealth = "source-health"

// AgentHealth is what the store knows of one source's agent: whether its
// last attempts failed, since when, how many in a row, and the last
// error in plain words (forward.AgentError).
type AgentHealth struct {
	Failing bool      `json:"failing,omitempty"`
	Since   time.Time `json:"since,omitzero"` // failing: the first failed attempt; otherwise the recovery
	// Failures counts the failed attempts in a row, across processes.
	Failures  int       `json:"failures,omitempty"`
	LastError string    `json:"lastError,omitempty"`
	LastAt    time.Time `json:"lastAt,omitzero"` // the last change
	// Faults counts the configuration-fault answers (forward.pause_after)
	// since the agent last answered.
	Faults int `json:"faults,omitempty"`
}

// RecordAgentFault counts one configuration-fault answer of source's
// agent (401, 403, 404, 410) and returns the count since it last
// answered: the breaker (forward.pause_after N) trips on the transact
// that brings it to a multiple of N, which is one across instances.
func (sr Sources) RecordAgentFault(ctx context.Context, source, lastErr string) (int, error) {
	l := sr.l
	if source == "" {
		return 0, fmt.Errorf("%w: source is empty", ErrInvalid)
	}
	now := l.now()
	var faults int
	err := l.store.TransactControl(ctx, controlHealth, func(cur []byte) ([]byte, error) {
		set := parseHealth(cur)
		h := set[source]
		if !h.Failing {
			h = AgentHealth{Failing: true, Since: now}
		}
		h.Faults++
		h.LastError, h.LastAt = lastErr, now
		set[source], faults = h, h.Faults
		return json.Marshal(set)
	})
	return faults, err
}

// RecordAgentFailures adds failures failed attempts of source's agent,
// the last with error lastErr, at now: the first of an incident sets
// Since. It returns the record as written.
//
// started is when the earliest of those attempts started. Attempts that
// started before the agent last answered (the incident ended since: Since
// is the recovery) are stragglers of that incident, sent while the agent
// was down and failing only after it came back, on any instance: they open
// no new incident, and the record comes back as it is, not failing.
func (sr Sources) RecordAgentFailures(ctx context.Context, source string, failures int, lastErr string, started time.Time) (AgentHealth, error) {
	l := sr.l
	if source == "" {
		return AgentHealth{}, fmt.Errorf("%w: source is empty", ErrInvalid)
	}
	now := l.now()
	var out AgentHealth
	err := l.store.TransactControl(ctx, controlHealth, func(cur []byte) ([]byte, error) {
		set := parseHealth(cur)
		h := set[source]
		if !h.Failing && !h.Since.IsZero() && started.Before(h.Since) {
			out = h
			return nil, nil // stragglers: nothing to write
		}
		if !h.Failing {
			h = AgentHealth{Failing: true, Since: now}
		}
		h.Failures += failures
		h.LastError, h.LastAt = lastErr, now
		set[source], out = h, h
		return json.Marshal(set)
	})
	return out, err
}

// RecordAgentAnswered ends source's incident, if it has one: the agent
// answered. ended says there was one, and how long it lasted.
func (sr Sources) RecordAgentAnswered(ctx context.Context, source string) (ended bool, lasted time.Duration, err error) {
	l := sr.l
	was, ended, err := sr.EndAgentIncident(ctx, source)
	if ended {
		lasted = l.now().Sub(was.Since)
	}
	return ended, lasted, err
}

// EndAgentIncident is RecordAgentAnswered returning the record of the
// incident it ended (its Since names the incident, for alerts). ended is
// true on one process across instances.
func (sr Sources) EndAgentIncident(ctx context.Context, source string) (was AgentHealth, ended bool, err error) {
	l := sr.l
	now := l.now()
	err = l.store.TransactControl(ctx, controlHealth, func(cur []byte) ([]byte, error) {
		set := parseHealth(cur)
		h, ok := set[source]
		if !ok || !h.Failing {
			ended = false
			return nil, nil // nothing to write
		}
		ended, was = true, h
		set[source] = AgentHealth{Since: now, LastError: h.LastError, LastAt: now}
		return json.Marshal(set)
	})
	return was, ended, err
}

// AgentHealths returns the health record of every source that ever
// failed. A record that cannot be read counts as none (every source
// healthy), with an error wrapping ErrCorruptControl; the next failure
// writes a fresh one.
func (sr Sources) AgentHealths(ctx context.Context) (map[string]AgentHealth, error) {
	l := sr.l
	raw, err := l.store.ReadControl(ctx, controlHealth)
	if err != nil {
		return nil, err
	}
	set := map[string]AgentHealth{}
	if raw == nil {
		return set, nil
	}
	if err := json.Unmarshal(raw, &set); err != nil {
		return map[string]AgentHealth{}, errors.Join(ErrCorruptControl, err)
	}
	return set, nil
}

func parseHealth(raw []byte) map[string]AgentHealth {
	set := map[string]AgentHealth{}
	if raw != nil && json.Unmarshal(raw, &set) != nil {
		set = map[string]AgentHealth{} // corrupt: written afresh
	}
	return set
}

// DueNow makes source's waiting deliveries that failed before and are due
// later due now, on up to limit scopes, and returns how many: its agent
// has just answered again, so they need not wait for their scheduled
// times. Parked deliveries (a paused source) stay parked; a delivery keeps
// its place in the retry schedule and its attempt count, and is taken as
// any due one is (one claim at a time), so none is delivered twice
// because of it. Beyond limit scopes the rest keep their schedule.
func (qu Queue) DueNow(ctx context.Context, source string, limit int) (int, error) {
	l := qu.l
	if source == "" {
		return 0, fmt.Errorf("%w: source is empty", ErrInvalid)
	}
	if limit <= 0 {
		limit = 100
	}
	now := l.now()
	scopes, err := l.store.ScopesDueBetween(ctx, now, parkBase.Add(-time.Millisecond), limit)
	if err != nil {
		return 0, err
	}
	total := 0
	for _, scope := range scopes {
		n := 0
		err := l.transact(ctx, scope, func(d *document, now time.Time) (bool, error) {
			n = 0
			for _, q := range d.Queue {
				if q.Source == source && q.Status == DeliveryQueued && !q.Parked && q.Failures > 0 && q.NextAt.After(now) {
					q.NextAt = now
					n++
				}
			}
			return n > 0, nil
		})
		if err != nil {
			return total, err
		}
		total += n
	}
	return total, nil
}
