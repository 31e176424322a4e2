//go:build unix

package main

import (
	"strings"
	"testing"
)

// record is a clean run: an ordered scope of three events, a debounced
// burst of three delivered as its last, and an event rejected for good.
func record() ([]Event, []Forward, map[string]Rules) {
	events := []Event{
		{ID: "o0", Source: "ordered", Scope: "c1", Seq: 0, Acked: true},
		{ID: "o1", Source: "ordered", Scope: "c1", Seq: 1, Acked: true},
		{ID: "o2", Source: "ordered", Scope: "c1", Seq: 2, Acked: true},
		{ID: "b0", Source: "burst", Scope: "c2", Seq: 0, Acked: true},
		{ID: "b1", Source: "burst", Scope: "c2", Seq: 1, Acked: true},
		{ID: "b2", Source: "burst", Scope: "c2", Seq: 2, Acked: true},
		{ID: "p0", Source: "plain", Scope: "p0", Acked: true},
		{ID: "p1", Source: "plain", Scope: "p1", Acked: false}, // never acknowledged: may be missing
	}
	fw := func(id, src, scope, delivery, token string, final bool) Forward {
		return Forward{EventID: id, Source: src, Scope: scope, RunID: src + ":" + id, Delivery: delivery, Token: token, Final: final}
	}
	forwards := []Forward{
		fw("o0", "ordered", "c1", "1", "1", false), // failed, retried
		fw("o0", "ordered", "c1", "2", "2", true),
		fw("o1", "ordered", "c1", "1", "3", true),
		fw("p0", "plain", "p0", "1", "1", true),
		fw("o2", "ordered", "c1", "1", "4", true),
	}
	b := fw("b2", "burst", "c2", "1", "1", true)
	b.Covers, b.CoverCount = []string{"b0", "b1", "b2"}, 3
	forwards = append(forwards, b)
	b.Delivery, b.Token = "2", "2" // redelivered after a crash: the same cover
	forwards = append(forwards, b)
	rules := map[string]Rules{"ordered": {Ordered: true}, "burst": {Debounced: true}}
	return events, forwards, rules
}

func TestCheckCleanRun(t *testing.T) {
	events, forwards, rules := record()
	r := Check(events, forwards, rules)
	if len(r.Violations) > 0 {
		t.Fatalf("violations on a clean run: %v", r.Violations)
	}
	if r.Sent != 8 || r.Acked != 7 || r.Delivered != 7 || r.Lost != 0 || r.Duplicates != 0 {
		t.Fatalf("counts %+v, want 8 sent, 7 acknowledged, 7 delivered", r)
	}
}

// wantViolation checks that r names a violation of kind containing what.
func wantViolation(t *testing.T, r Result, kind, what string) {
	t.Helper()
	for _, v := range r.Violations {
		if strings.HasPrefix(v, kind+": ") && strings.Contains(v, what) {
			return
		}
	}
	t.Fatalf("no %s violation about %q in %v", kind, what, r.Violations)
}

func TestCheckCatchesLoss(t *testing.T) {
	events, forwards, rules := record()
	// p0 reached the agent only without a final answer.
	for i := range forwards {
		if forwards[i].EventID == "p0" {
			forwards[i].Final = false
		}
	}
	r := Check(events, forwards, rules)
	if r.Lost != 1 {
		t.Fatalf("lost %d, want 1 (%v)", r.Lost, r.Violations)
	}
	wantViolation(t, r, "lost", "event p0")

	// An acknowledged event that never arrived at all.
	events, forwards, rules = record()
	forwards = forwards[:len(forwards)-2] // the burst's forwards
	r = Check(events, forwards, rules)
	if r.Lost != 3 {
		t.Fatalf("lost %d, want the burst's 3 (%v)", r.Lost, r.Violations)
	}
}

func TestCheckCatchesDuplicate(t *testing.T) {
	events, forwards, rules := record()
	forwards = append(forwards, forwards[1]) // o0 delivery 2 token 2 again
	r := Check(events, forwards, rules)
	if r.Duplicates != 1 {
		t.Fatalf("duplicates %d, want 1 (%v)", r.Duplicates, r.Violations)
	}
	wantViolation(t, r, "duplicate", "run ordered:o0 delivery 2 token 2")
}

func TestCheckCatchesOrderBreak(t *testing.T) {
	events, forwards, rules := record()
	// o0 is sent again after o1 reached the agent.
	late := forwards[1]
	late.Delivery, late.Token = "3", "5"
	forwards = append(forwards, late)
	r := Check(events, forwards, rules)
	wantViolation(t, r, "order", "event o0 (#0) was forwarded after #2")

	// The same on a source without order is no violation.
	delete(rules, "ordered")
	if r := Check(events, forwards, rules); len(r.Violations) > 0 {
		t.Fatalf("violations on an unordered source: %v", r.Violations)
	}
}

func TestCheckCatchesInexactCovers(t *testing.T) {
	for name, c := range map[string]struct {
		change func(f *Forward)
		what   string
	}{
		"count":    {func(f *Forward) { f.CoverCount = 2 }, "count 2 but 3 ids"},
		"not last": {func(f *Forward) { f.Covers = []string{"b0", "b2", "b1"} }, "the last id"},
		"twice":    {func(f *Forward) { f.Covers = []string{"b0", "b0", "b2"} }, "listed twice"},
		"order":    {func(f *Forward) { f.Covers = []string{"b1", "b0", "b2"} }, "oldest first"},
		"scope":    {func(f *Forward) { f.Covers = []string{"o0", "b1", "b2"} }, "of scope c1"},
		"unknown":  {func(f *Forward) { f.Covers = []string{"zz", "b1", "b2"} }, "never sent"},
		"missing":  {func(f *Forward) { f.Covers, f.CoverCount = nil, 0 }, "no Replyonce-Covers"},
	} {
		t.Run(name, func(t *testing.T) {
			events, forwards, rules := record()
			c.change(&forwards[len(forwards)-1])
			wantViolation(t, Check(events, forwards, rules), "covers", c.what)
		})
	}

	// b1 delivered on its own and also covered by b2: two carriers.
	events, forwards, rules := record()
	forwards = append(forwards, Forward{EventID: "b1", Source: "burst", Scope: "c2", RunID: "burst:b1",
		Delivery: "1", Token: "9", Covers: []string{"b1"}, CoverCount: 1, Final: true})
	wantViolation(t, Check(events, forwards, rules), "covers", "event b1 was stood for by [b1 b2]")
}

func TestCheckCatchesStaleAttempt(t *testing.T) {
	events, forwards, rules := record()
	// o0's delivery 1 (token 1) arrives again after delivery 2 took over.
	late := forwards[0]
	forwards = append(forwards[:2:2], append([]Forward{late}, forwards[2:]...)...)
	r := Check(events, forwards, rules)
	wantViolation(t, r, "stale", "run ordered:o0 delivery 1 reached the agent after delivery 2")
}
