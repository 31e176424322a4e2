package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// A long-scope run (issue #34) asks what one more webhook costs in a
// conversation that already holds a long history or a long queue. Every
// event of the run carries a scope header that the bench source's scope
// rule reads, so each seeded length gets a conversation of its own on the
// same gateway and store, and the lengths are timed in the same run.
//
// Two kinds of history:
//   - settled: the scope is first filled with settled effects (Once calls
//     through the gateway's own ledger, as an agent's writes through the
//     ledger API land), then webhooks are sent into it one at a time;
//   - waiting: the source has order: scope and the scope's head delivery is
//     held by a dispatcher that never answers (a hung agent), so every
//     seeded item and every timed webhook waits behind it.
//
// The timed webhooks go one at a time, as one conversation's messages
// arrive, in rounds that take every scope in turn so that drift on a busy
// machine falls on every length alike.

// headerBenchScope carries the conversation an event belongs to; the bench
// source's scope rule reads it when a long-scope run is asked for.
const headerBenchScope = "Bench-Scope"

// longScopeRounds is how many turns each scope gets.
const longScopeRounds = 4

// LongScopeReport is what a long-scope run measured.
type LongScopeReport struct {
	Store      string          `json:"store"`
	StoreNotes string          `json:"store_notes,omitempty"`
	Mode       string          `json:"mode"`
	Kind       string          `json:"kind"` // settled | waiting
	Events     int             `json:"events_per_scope"`
	Rounds     int             `json:"rounds"`
	BodySize   int             `json:"body_bytes"`
	Started    time.Time       `json:"started"`
	Scopes     []LongScopeCase `json:"scopes"`
}

// LongScopeCase is one seeded length and what its webhooks cost.
type LongScopeCase struct {
	Length      int     `json:"length"` // settled effects or waiting items seeded
	SeedSeconds float64 `json:"seed_seconds"`
	Accepted    int     `json:"accepted"`
	// MeanMillis is the mean latency of the scope's timed webhooks, and
	// Ratio that mean over the shortest scope's, from the same run.
	MeanMillis float64 `json:"mean_ms"`
	Ratio      float64 `json:"ratio"`
	// DocBytes is the scope's document once the timed webhooks are in:
	// what every step of the scope reads and writes.
	DocBytes int `json:"doc_bytes"`
	// Items is how many deliveries the scope lists at the end, Waiting how
	// many of them wait behind the held head (kind waiting).
	Items   int `json:"items"`
	Waiting int `json:"waiting,omitempty"`
	// Forwards counts what reached the sink from this scope, Repeated the
	// events that reached it more than once.
	Forwards int `json:"forwards"`
	Repeated int `json:"repeated"`
}

// longScope is one scope of the run while it is being measured.
type longScope struct {
	name   string
	events []event
	sum    time.Duration
	sent   int
}

// RunLongScope seeds one scope per cfg.LongScope length, then sends
// cfg.Requests webhooks into each, one at a time, and reports their mean
// latency against the shortest scope's.
func RunLongScope(ctx context.Context, cfg Config) (*LongScopeReport, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	lengths := slices.Sorted(slices.Values(cfg.LongScope))
	kind := "settled"
	if cfg.LongScopeWaiting {
		kind = "waiting"
	}
	rep := &LongScopeReport{Store: cfg.Store, Mode: cfg.Mode, Kind: kind, Events: cfg.Requests, Rounds: longScopeRounds,
		BodySize: cfg.BodySize, Started: time.Now().UTC()}
	env, err := startEnv(ctx, cfg)
	if err != nil {
		return nil, err
	}
	defer env.close()
	rep.StoreNotes = env.store.notes
	tally := env.sink.reset()
	defer env.sink.current.Store(nil)

	tag := runID()
	scopes := make([]*longScope, len(lengths))
	for i, n := range lengths {
		s := &longScope{name: fmt.Sprintf("long-%s-%d", tag, n)}
		began := time.Now()
		if err := seedLongScope(ctx, env.ledger, s.name, n, cfg.LongScopeWaiting); err != nil {
			return nil, fmt.Errorf("bench: seed %s with %d %s: %w", s.name, n, kind, err)
		}
		rep.Scopes = append(rep.Scopes, LongScopeCase{Length: n, SeedSeconds: time.Since(began).Seconds()})
		progress(cfg, "seeded %s with %d %s in %.1f s", s.name, n, kind, time.Since(began).Seconds())
		if s.events, err = env.makeEvents(fmt.Sprintf("%s_%d", tag, n), cfg.Requests, cfg.BodySize); err != nil {
			return nil, err
		}
		for _, ev := range s.events {
			ev.header.Set(headerBenchScope, s.name)
		}
		scopes[i] = s
	}

	one := cfg
	one.Concurrency, one.Duplicates = 1, 0
	for round := range longScopeRounds {
		from, to := round*cfg.Requests/longScopeRounds, (round+1)*cfg.Requests/longScopeRounds
		for _, s := range scopes {
			l := newLoad("long", env.gwSrv.url+"/hooks/"+sourceName, s.events[from:to], to-from, one, 0)
			l.run(ctx, 0, to-from)
			l.close()
			if n := l.errors.Load(); n > 0 {
				return rep, fmt.Errorf("bench: long scope %s: %d errors (%s)", s.name, n, l.firstError)
			}
			for _, d := range l.latencies[:l.done] {
				s.sum += d
			}
			s.sent += l.done
		}
	}
	if err := ctx.Err(); err != nil {
		return rep, err
	}
	if env.queued && !cfg.LongScopeWaiting {
		waitDelivered(ctx, tally, scopes)
	}

	for i, s := range scopes {
		c := &rep.Scopes[i]
		c.Accepted = s.sent
		c.MeanMillis = float64(s.sum) / float64(max(s.sent, 1)) / float64(time.Millisecond)
		if rep.Scopes[0].MeanMillis > 0 {
			c.Ratio = c.MeanMillis / rep.Scopes[0].MeanMillis
		}
		raw, err := env.store.store.Read(ctx, s.name)
		if err != nil {
			return rep, fmt.Errorf("bench: read %s: %w", s.name, err)
		}
		c.DocBytes = len(raw)
		items, err := env.ledger.Queue().QueueItems(ctx, s.name)
		if err != nil {
			return rep, err
		}
		c.Items = len(items)
		for _, q := range items {
			if q.Status == ledger.DeliveryQueued {
				c.Waiting++
			}
		}
		for _, ev := range s.events {
			n := tally.count(ev.id)
			c.Forwards += n
			if n > 1 {
				c.Repeated++
			}
		}
	}
	return rep, nil
}

// seedLongScope fills scope with n settled effects, or with a held head
// delivery and n items waiting behind it.
func seedLongScope(ctx context.Context, l *ledger.Ledger, scope string, n int, waiting bool) error {
	if !waiting {
		for i := range n {
			if _, err := l.Once(ctx, ledger.Key{Scope: scope, Intent: "reply", Payload: i},
				func(context.Context, ledger.Call) (any, error) { return "sent", nil }); err != nil {
				return err
			}
		}
		return nil
	}
	enqueue := func(id string, hold bool) error {
		got, err := l.Queue().Enqueue(ctx, ledger.EnqueueRequest{
			Event: ledger.QueuedEvent{Source: sourceName, EventID: id, Scope: scope, ContentType: "application/json",
				ReceivedAt: time.Now(), ContextAt: time.Now(), Body: []byte(`{"id":"` + id + `"}`)},
			Run:   ledger.RunOptions{RunID: sourceName + ":" + id, Mode: ledger.ModeIndependent},
			Claim: ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "deliver", Payload: id}, PendingTTL: 24 * time.Hour},
			Hold:  hold, Order: ledger.OrderScope,
		})
		if err != nil {
			return err
		}
		if hold && got.Run == nil {
			return fmt.Errorf("the head %s was not handed over (%s)", id, got.Status)
		}
		return nil
	}
	// The head is held for a day and never answered: a hung agent.
	if err := enqueue(scope+"-head", true); err != nil {
		return err
	}
	for i := range n {
		if err := enqueue(fmt.Sprintf("%s-seed-%d", scope, i), false); err != nil {
			return err
		}
	}
	return nil
}

// waitDelivered waits, up to a minute, until the sink has seen every timed
// event of the scopes at least once.
func waitDelivered(ctx context.Context, t *tally, scopes []*longScope) {
	deadline := time.Now().Add(time.Minute)
	for ctx.Err() == nil && time.Now().Before(deadline) {
		missing := false
		for _, s := range scopes {
			for _, ev := range s.events {
				if t.count(ev.id) == 0 {
					missing = true
					break
				}
			}
		}
		if !missing {
			return
		}
		sleep(ctx, 50*time.Millisecond)
	}
}

func progress(cfg Config, format string, args ...any) {
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, format+"\n", args...)
	}
}

// WriteJSON prints the report as indented JSON.
func (r *LongScopeReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteTable prints the report for people.
func (r *LongScopeReport) WriteTable(w io.Writer) error {
	store := r.Store
	if r.StoreNotes != "" {
		store += " (" + r.StoreNotes + ")"
	}
	if _, err := fmt.Fprintf(w, "store %s, %s mode, scopes seeded with %s history\n%d webhooks per scope, one at a time, in %d rounds\n",
		store, r.Mode, r.Kind, r.Events, r.Rounds); err != nil {
		return err
	}
	if _, err := fmt.Fprintf(w, "%8s %9s %9s %9s %10s %7s %8s %9s %9s\n", "length", "seed s", "mean ms", "ratio", "doc bytes", "items", "waiting", "forwards", "repeated"); err != nil {
		return err
	}
	for _, c := range r.Scopes {
		if _, err := fmt.Fprintf(w, "%8d %9.1f %9.2f %8.2f× %10d %7d %8d %9d %9d\n",
			c.Length, c.SeedSeconds, c.MeanMillis, c.Ratio, c.DocBytes, c.Items, c.Waiting, c.Forwards, c.Repeated); err != nil {
			return err
		}
	}
	return nil
}
