package ledger

import (
	"encoding/json"
	"fmt"
	"testing"
	"time"
)

// BenchmarkDecideClaim measures the decision code alone: a claim on a
// decoded document with n settled entries (no store, no JSON).
func BenchmarkDecideClaim(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			o := Options{}.withDefaults()
			base := newDocument("scope", now)
			run, _ := decideBegin(base, beginInput{runID: "r", mode: ModeSupersede}, now, o)
			for i := range n {
				k, _ := resolveKey(Key{Scope: "scope", Intent: "reply", Payload: i})
				e := claimEntry(base, claimInput{key: k}, nil, now, o)
				e.State, e.SettledAt = StateCommitted, now
				base.land(e, now)
			}
			run.SeenSeq = base.Seq
			k, _ := resolveKey(Key{Scope: "scope", Intent: "reply", Payload: "new"})
			in := claimInput{key: k, runID: "r", token: run.Token, conflict: ConflictAny}
			b.ReportAllocs()
			for b.Loop() {
				delete(base.Entries, k.id)
				dec, err := decideClaim(base, in, now, o)
				if err != nil || dec.result.Status != StatusClaimed {
					b.Fatalf("%v %v", dec.result.Status, err)
				}
			}
		})
	}
}

// BenchmarkClaimRoundTrip adds what a store transaction costs the ledger on
// top of the decision: decoding and encoding the document.
func BenchmarkClaimRoundTrip(b *testing.B) {
	for _, n := range []int{10, 1000} {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
			o := Options{}.withDefaults()
			d := newDocument("scope", now)
			for i := range n {
				k, _ := resolveKey(Key{Scope: "scope", Intent: "reply", Payload: i})
				e := claimEntry(d, claimInput{key: k}, nil, now, o)
				e.State, e.SettledAt = StateCommitted, now
				d.land(e, now)
			}
			raw, _ := json.Marshal(d)
			k, _ := resolveKey(Key{Scope: "scope", Intent: "reply", Payload: "new"})
			b.ReportAllocs()
			for b.Loop() {
				doc, err := decodeDocument("scope", raw, now)
				if err != nil {
					b.Fatal(err)
				}
				dec, _ := decideClaim(doc, claimInput{key: k, conflict: ConflictAny}, now, o)
				if _, err := doc.finish(now, o.Retention, nil); err != nil || !dec.changed {
					b.Fatal(err)
				}
			}
		})
	}
}
