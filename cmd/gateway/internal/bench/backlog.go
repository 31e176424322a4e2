package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"time"
)

// BacklogReport is what a backlog run measured: a queued source's events
// accepted while its dispatch is paused, then drained to the sink once it
// is resumed, and, for comparison, the same store's inline rate measured
// in the same run.
type BacklogReport struct {
	Store       string    `json:"store"`
	StoreNotes  string    `json:"store_notes,omitempty"`
	Events      int       `json:"events"`
	Concurrency int       `json:"concurrency"`
	Dispatch    int       `json:"dispatch_concurrency"`
	BodySize    int       `json:"body_bytes"`
	Started     time.Time `json:"started"`

	AcceptSeconds float64 `json:"accept_seconds"`
	AcceptRate    float64 `json:"accepted_eps"`
	// DeliveredEarly were delivered before the resume (handed over before
	// the pause reached the dispatcher); the drain counts the rest.
	DeliveredEarly int     `json:"delivered_before_resume"`
	DrainSeconds   float64 `json:"drain_seconds"`
	DrainRate      float64 `json:"drain_eps"`
	Forwards       int     `json:"forwards"`
	Missing        int     `json:"events_never_forwarded"`
	Repeated       int     `json:"events_forwarded_twice_or_more"`

	// StoreBytes is how much the store grew while the backlog was
	// accepted, measured as SizeHow says; BytesPerEvent divides it.
	StoreBytes    int64   `json:"store_bytes,omitempty"`
	BytesPerEvent float64 `json:"store_bytes_per_event,omitempty"`
	SizeHow       string  `json:"size_how,omitempty"`

	InlineEvents int     `json:"inline_events"`
	InlineRate   float64 `json:"inline_eps"`

	// ProxyRate is the bare proxy's rate on the backlog's environment,
	// the mean of a pass just before the accepts and one after the drain
	// (ProxyEvents each): AcceptRate against it is what the store and the
	// gateway allow accepts with no delivery beside them.
	ProxyEvents int     `json:"proxy_events"`
	ProxyRate   float64 `json:"proxy_eps"`
}

// RunBacklog enqueues cfg.Backlog events on a queued source whose dispatch
// is paused, then resumes it and times the drain to the sink. Then it
// sends cfg.Requests events through an inline source on a fresh store of
// the same kind: the inline rate to set the drain rate beside.
func RunBacklog(ctx context.Context, cfg Config) (*BacklogReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	cfg.Mode, cfg.Duplicates = "queued", 0
	rep := &BacklogReport{Store: cfg.Store, Events: cfg.Backlog, Concurrency: cfg.Concurrency, Dispatch: cfg.DispatchConcurrency,
		BodySize: cfg.BodySize, Started: time.Now().UTC()}
	if rep.Dispatch == 0 {
		rep.Dispatch = 16
	}
	if err := backlogPass(ctx, cfg, rep); err != nil {
		return rep, err
	}
	inline := cfg
	inline.Mode = "inline"
	env, err := startEnv(ctx, inline)
	if err != nil {
		return rep, err
	}
	defer env.close()
	if rep.InlineRate, err = timedPass(ctx, env, inline, "inline", env.gwSrv.url); err != nil {
		return rep, err
	}
	rep.InlineEvents = cfg.Requests
	return rep, nil
}

func backlogPass(ctx context.Context, cfg Config, rep *BacklogReport) error {
	env, err := startEnv(ctx, cfg)
	if err != nil {
		return err
	}
	defer env.close()
	rep.StoreNotes, rep.SizeHow = env.storeNotes, env.store.sizeHow
	if err := env.ledger.Sources().SetSourcePaused(ctx, sourceName, true); err != nil {
		return err
	}
	// As the admin API does once the pause is recorded: this process's
	// dispatcher stops the source at once and reads the record again at
	// its next sweep.
	env.srv.Dispatcher.PauseNow(sourceName, true)
	sleep(ctx, 500*time.Millisecond)
	proxyBefore, err := timedPass(ctx, env, cfg, "proxy_before", env.proxySrv.url)
	if err != nil {
		return err
	}
	events, err := env.makeEvents(runID()+"_backlog", cfg.Backlog, cfg.BodySize)
	if err != nil {
		return err
	}
	t := env.sink.reset()
	defer env.sink.current.Store(nil)
	l := newLoad("backlog", env.gwSrv.url+"/hooks/"+sourceName, events, len(events), cfg, 0)
	defer l.close()
	var size0 int64
	if env.store.size != nil {
		if size0, err = env.store.size(ctx); err != nil {
			return fmt.Errorf("bench: store size: %w", err)
		}
	}
	l.run(ctx, 0, len(events))
	if n := l.errors.Load(); n > 0 {
		return fmt.Errorf("bench: backlog pass: %d errors (%s)", n, l.firstError)
	}
	rep.AcceptSeconds = l.elapsed.Seconds()
	rep.AcceptRate = float64(len(events)) / rep.AcceptSeconds
	if env.store.size != nil {
		size1, err := env.store.size(ctx)
		if err != nil {
			return fmt.Errorf("bench: store size: %w", err)
		}
		rep.StoreBytes = size1 - size0
		rep.BytesPerEvent = float64(rep.StoreBytes) / float64(len(events))
	}
	l.tally = t
	rep.DeliveredEarly = l.deliveredCount()
	start := time.Now()
	if err := env.ledger.Sources().SetSourcePaused(ctx, sourceName, false); err != nil {
		return err
	}
	env.srv.Dispatcher.PauseNow(sourceName, false)
	if err := env.drain(ctx, t, l); err != nil {
		return err
	}
	rep.DrainSeconds = time.Since(start).Seconds()
	rep.DrainRate = float64(len(events)-rep.DeliveredEarly) / rep.DrainSeconds
	p := l.result(t, 0)
	rep.Forwards, rep.Missing, rep.Repeated = p.Forwards, p.Missing, p.Repeated
	if !p.exact() {
		return fmt.Errorf("%w: backlog: %d events, %d forwards, %d never forwarded, %d forwarded twice", ErrDuplicateForward,
			p.Unique, p.Forwards, p.Missing, p.Repeated)
	}
	proxyAfter, err := timedPass(ctx, env, cfg, "proxy_after", env.proxySrv.url)
	if err != nil {
		return err
	}
	rep.ProxyEvents, rep.ProxyRate = cfg.Requests, (proxyBefore+proxyAfter)/2
	return nil
}

// timedPass sends cfg.Requests new events to server (the gateway's inline
// source, or the bare proxy) at full speed and returns their rate. The
// sink counts them under a tally of their own.
func timedPass(ctx context.Context, env *env, cfg Config, name, server string) (float64, error) {
	events, err := env.makeEvents(runID()+"_"+name, cfg.Requests, cfg.BodySize)
	if err != nil {
		return 0, err
	}
	env.sink.reset()
	defer env.sink.current.Store(nil)
	l := newLoad(name, server+"/hooks/"+sourceName, events, len(events), cfg, 0)
	defer l.close()
	l.run(ctx, 0, len(events))
	if n := l.errors.Load(); n > 0 {
		return 0, fmt.Errorf("bench: %s pass: %d errors (%s)", name, n, l.firstError)
	}
	return float64(len(events)) / l.elapsed.Seconds(), nil
}

// WriteJSON prints the report as indented JSON.
func (r *BacklogReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable prints the report for people.
func (r *BacklogReport) WriteTable(w io.Writer) error {
	_, err := fmt.Fprintf(w, `store %s (%s)
backlog: %d events of %d bytes, %d senders, dispatch paused
  accepted in %.1f s: %.0f events/s (%.2f× the bare proxy's %.0f events/s, %d events before the accepts and %d after the drain)
  store grew %d bytes: %.0f bytes per queued event (%s)
  resumed: %d events drained to the sink in %.1f s: %.0f events/s (dispatch concurrency %d; %d delivered before the resume)
  forwards %d, never forwarded %d, forwarded twice %d
inline, same store kind, same run: %d events at %.0f events/s (drain / inline %.2f×)
`, r.Store, r.StoreNotes, r.Events, r.BodySize, r.Concurrency, r.AcceptSeconds, r.AcceptRate,
		ratio(r.AcceptRate, r.ProxyRate), r.ProxyRate, r.ProxyEvents, r.ProxyEvents,
		r.StoreBytes, r.BytesPerEvent, r.SizeHow, r.Events-r.DeliveredEarly, r.DrainSeconds, r.DrainRate, r.Dispatch, r.DeliveredEarly,
		r.Forwards, r.Missing, r.Repeated, r.InlineEvents, r.InlineRate, ratio(r.DrainRate, r.InlineRate))
	return err
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}
