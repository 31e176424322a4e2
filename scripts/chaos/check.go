//go:build unix

package main

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
)

// Event is one event the provider sent: its id, the source it went to,
// its scope and its place in that scope's sequence (0, 1, ...: the order
// the provider sent it in, each only after the one before was
// acknowledged).
type Event struct {
	ID, Source, Scope string
	Seq               int
	Acked             bool // the gateway answered 2xx
}

// Forward is one request the agent received, in the order received.
type Forward struct {
	EventID, Source, Scope string
	RunID                  string
	Delivery, Token        string
	// Covers is Replyonce-Covers parsed (nil when absent): the events this
	// forward stands for, oldest first, itself last; CoverCount its count.
	Covers     []string
	CoverCount int
	// Final: the agent gave an answer that ends the event for the gateway
	// (2xx, or a 4xx the gateway takes as a rejection for good).
	Final bool
}

// Rules are the source's delivery rules the checker holds it to.
type Rules struct {
	Ordered   bool // forward.order: scope
	Debounced bool // forward.debounce: Replyonce-Covers must be exact
}

// Result is what one run's record shows.
type Result struct {
	Sent, Acked, Delivered, Lost, Duplicates int
	// Violations says what broke, one line each; empty when every
	// invariant held.
	Violations []string
}

// maxListed bounds the violations listed per kind, so a broken run
// prints a readable summary.
const maxListed = 5

// Check holds a run's record to the invariants:
//
//   - nothing acknowledged is lost: every acknowledged event reached the
//     agent and got a final answer, itself or through a delivery that
//     covers it;
//   - no attempt twice: no two forwards carry the same run, delivery
//     number and fencing token (one attempt is one request on the wire);
//   - no stale attempt: once a run's delivery n has reached the agent, no
//     earlier delivery of that run does (a claim that ran out is given
//     back, never forwarded late);
//   - order per scope, for an ordered source: once the agent has seen an
//     event of a scope, it is never sent an earlier one of that scope;
//   - Replyonce-Covers exact, for a debounced source: the count is the
//     number of ids listed, the ids are distinct events of the forward's
//     own scope that were sent, oldest first and the forward's own event
//     last, and no event is stood for by two different events.
//
// rules maps a source name to its rules; sources not in it have none.
func Check(events []Event, forwards []Forward, rules map[string]Rules) Result {
	var r Result
	byID := make(map[string]Event, len(events))
	for _, e := range events {
		byID[e.ID] = e
		r.Sent++
		if e.Acked {
			r.Acked++
		}
	}
	var lost, dups, stale, order, covers []string
	note := func(list *[]string, format string, args ...any) {
		*list = append(*list, fmt.Sprintf(format, args...))
	}

	// Who stands for each event: the forwards' own event ids (for a
	// covering forward, the event it was delivered as).
	carriers := map[string]map[string]bool{}
	carry := func(id, by string) {
		if carriers[id] == nil {
			carriers[id] = map[string]bool{}
		}
		carriers[id][by] = true
	}
	done := map[string]bool{} // events whose forward got a final answer
	attempts := map[string]int{}
	highest := map[string]int{} // scope → highest seq the agent has seen
	newest := map[string]int{}  // run → newest delivery the agent has seen
	for i, f := range forwards {
		key := f.RunID + "|" + f.Delivery + "|" + f.Token
		attempts[key]++
		if attempts[key] == 2 {
			note(&dups, "run %s delivery %s token %s reached the agent more than once", f.RunID, f.Delivery, f.Token)
		}
		if d, err := strconv.Atoi(f.Delivery); err == nil {
			if n, seen := newest[f.RunID]; seen && d < n {
				note(&stale, "run %s delivery %d reached the agent after delivery %d", f.RunID, d, n)
			} else {
				newest[f.RunID] = d
			}
		}
		stands := []string{f.EventID}
		if f.Covers != nil {
			stands = f.Covers
		}
		for _, id := range stands {
			carry(id, f.EventID)
			if f.Final {
				done[id] = true
			}
		}
		rule := rules[f.Source]
		e, known := byID[f.EventID]
		if !known {
			note(&covers, "forward %d: event %q was never sent", i, f.EventID)
			continue
		}
		if rule.Ordered {
			key := f.Source + "|" + f.Scope
			if h, seen := highest[key]; seen && e.Seq < h {
				note(&order, "scope %s: event %s (#%d) was forwarded after #%d", f.Scope, f.EventID, e.Seq, h)
			} else if !seen || e.Seq > h {
				highest[key] = e.Seq
			}
		}
		if rule.Debounced {
			if msg := checkCovers(f, byID); msg != "" {
				note(&covers, "forward %d (%s): %s", i, f.EventID, msg)
			}
		}
	}
	ids := make([]string, 0, len(events))
	for _, e := range events {
		ids = append(ids, e.ID)
	}
	sort.Strings(ids)
	for _, id := range ids {
		e := byID[id]
		if done[id] {
			r.Delivered++
		} else if e.Acked {
			note(&lost, "event %s (%s, scope %s) was acknowledged and never delivered", id, e.Source, e.Scope)
		}
		if rules[e.Source].Debounced && len(carriers[id]) > 1 {
			by := make([]string, 0, len(carriers[id]))
			for c := range carriers[id] {
				by = append(by, c)
			}
			sort.Strings(by)
			note(&covers, "event %s was stood for by %v", id, by)
		}
	}
	r.Lost, r.Duplicates = len(lost), len(dups)
	for _, kind := range []struct {
		name string
		list []string
	}{{"lost", lost}, {"duplicate", dups}, {"stale", stale}, {"order", order}, {"covers", covers}} {
		for i, v := range kind.list {
			if i == maxListed {
				r.Violations = append(r.Violations, fmt.Sprintf("%s: ... and %d more", kind.name, len(kind.list)-maxListed))
				break
			}
			r.Violations = append(r.Violations, kind.name+": "+v)
		}
	}
	return r
}

// checkCovers says what is wrong with a debounced forward's covers, or "".
func checkCovers(f Forward, byID map[string]Event) string {
	if f.Covers == nil {
		return "no Replyonce-Covers on a debounced source"
	}
	if f.CoverCount < len(f.Covers) || (f.CoverCount > len(f.Covers) && len(f.Covers) < 100) {
		return fmt.Sprintf("count %d but %d ids", f.CoverCount, len(f.Covers))
	}
	if f.Covers[len(f.Covers)-1] != f.EventID {
		return fmt.Sprintf("the last id is %q, not the forward's own event", f.Covers[len(f.Covers)-1])
	}
	prev := -1
	for i, id := range f.Covers {
		if slices.Contains(f.Covers[:i], id) {
			return fmt.Sprintf("id %q listed twice", id)
		}
		e, ok := byID[id]
		switch {
		case !ok:
			return fmt.Sprintf("id %q was never sent", id)
		case e.Source != f.Source || e.Scope != f.Scope:
			return fmt.Sprintf("id %q is of scope %s, not %s", id, e.Scope, f.Scope)
		case e.Seq <= prev:
			return fmt.Sprintf("ids are not oldest first (%q)", id)
		}
		prev = e.Seq
	}
	return ""
}
