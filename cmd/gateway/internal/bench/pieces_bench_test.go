package bench

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/memory"
)

// The pieces of the request path are benchmarked where they live:
// signatures (BenchmarkVerify, BenchmarkVerifyVsBare), ingress/extract
// (BenchmarkResolveJSON, BenchmarkResolveComposite), ledger
// (BenchmarkDecideClaim, BenchmarkClaimRoundTrip), forward
// (BenchmarkForward) and the stores (BenchmarkOnce, BenchmarkClaimSettle).
// The benchmarks here measure what those leave out: the whole handler, in
// process, with each optional cost switched on and off, so a proposal for
// the hot path can say what it would save; the bare proxy for comparison;
// and the ledger calls exactly as the gateway makes them.

// benchEnv starts an env for a benchmark and stops it when the benchmark
// ends.
func benchEnv(b *testing.B, cfg Config) *env {
	b.Helper()
	cfg = cfg.withDefaults()
	e, err := startEnv(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(e.close)
	return e
}

// serveEvents sends each event once through h in process and fails on any
// answer but want.
func serveEvents(b *testing.B, h http.Handler, events []event, want int) {
	b.Helper()
	for i := range events {
		ev := &events[i]
		req := httptest.NewRequest(http.MethodPost, "/hooks/"+sourceName, bytes.NewReader(ev.body))
		req.Header = ev.header.Clone()
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != want {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
}

// BenchmarkHandler is one webhook through the gateway's handler, forward to
// a loopback sink included, on the memory store. The variants switch off
// one cost each: the request log line, the Standard Webhooks signature on
// the forward. "duplicate" is a redelivery answered from the ledger.
func BenchmarkHandler(b *testing.B) {
	for _, v := range []struct {
		name      string
		log       string
		sign, dup bool
	}{
		{"new", "devnull", true, false},
		{"new/no-log", "none", true, false},
		{"new/unsigned-forward", "devnull", false, false},
		{"new/no-log/unsigned-forward", "none", false, false},
		{"duplicate", "devnull", true, true},
	} {
		b.Run(v.name, func(b *testing.B) {
			e := benchEnv(b, Config{Log: v.log, SignForward: v.sign})
			events, err := e.makeEvents("h"+strconv.Itoa(b.N), b.N, DefaultBodySize)
			if err != nil {
				b.Fatal(err)
			}
			if v.dup {
				serveEvents(b, e.gateway, events, http.StatusOK)
			}
			b.ReportAllocs()
			b.ResetTimer()
			serveEvents(b, e.gateway, events, http.StatusOK)
		})
	}
}

// BenchmarkBaselineHandler is the same request through the bare echo
// reverse proxy, in process, for the per-request cost the gateway is
// compared with.
func BenchmarkBaselineHandler(b *testing.B) {
	e := benchEnv(b, Config{})
	target, err := parseURL(e.sinkSrv.url)
	if err != nil {
		b.Fatal(err)
	}
	h := newBaseline(target, e.transports[1])
	events, err := e.makeEvents("p"+strconv.Itoa(b.N), b.N, DefaultBodySize)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	serveEvents(b, h, events, http.StatusOK)
}

// BenchmarkBeginClaimSettle is the gateway's two ledger transactions for a
// new event, with the gateway's own request shape, on the memory store: the
// decision, the document's JSON decode and encode twice, and the key hash.
func BenchmarkBeginClaimSettle(b *testing.B) {
	l := ledger.New(memory.New(nil), ledger.Options{})
	ctx := context.Background()
	type value struct {
		Outcome     string `json:"outcome"`
		AgentStatus int    `json:"agentStatus"`
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		id := "evt_" + strconv.Itoa(i)
		runID := "bench:" + id
		_, c, err := l.BeginClaim(ctx, ledger.RunOptions{RunID: runID, Mode: ledger.ModeIndependent, ContextAt: time.Now()},
			ledger.ClaimRequest{Key: ledger.Key{Scope: runID, Intent: ingress.IntentDeliver, Payload: map[string]string{"source": "bench", "eventId": id}},
				Conflict: ledger.ConflictNone, PendingTTL: 15 * time.Second, Redeliverable: true, MaxAttempts: 1 << 30})
		if err != nil || c.Status != ledger.StatusClaimed {
			b.Fatal(c.Status, err)
		}
		if _, err := l.Settle(ctx, c.Ref(), ledger.OutcomeCommitted, value{"delivered", 200}, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMakeEvents is the generator's signing cost, which the passes
// keep out of their measurement by signing before they start.
func BenchmarkMakeEvents(b *testing.B) {
	for _, p := range []string{"stripe", "standard-webhooks"} {
		b.Run(p, func(b *testing.B) {
			e := &env{provider: p}
			var err error
			e.signer, err = newSigner(p)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if _, err := e.makeEvents("m", 1, DefaultBodySize); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkHandlerModes is one new webhook through the gateway's handler
// until the sink has it, inline and queued, on the memory store, from 32
// senders per core as `gateway bench` sends (issue #29): what a queued
// event costs in all, the dispatcher's forward and finish included,
// against an inline one. Allocations are counted across every goroutine,
// so -benchmem compares the two modes' whole work per event, and a CPU
// profile their whole CPU.
func BenchmarkHandlerModes(b *testing.B) {
	for _, mode := range []string{"inline", "queued"} {
		b.Run(mode, func(b *testing.B) {
			e := benchEnv(b, Config{Log: "devnull", SignForward: true, Mode: mode, AcceptWait: dispatch.DefaultAcceptWait})
			t := e.sink.reset()
			events, err := e.makeEvents(mode+strconv.Itoa(b.N), b.N, DefaultBodySize)
			if err != nil {
				b.Fatal(err)
			}
			want := http.StatusOK
			if mode == "queued" {
				want = http.StatusAccepted
			}
			b.ReportAllocs()
			b.ResetTimer()
			var next atomic.Int64
			b.SetParallelism(32)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					ev := &events[next.Add(1)-1]
					req := httptest.NewRequest(http.MethodPost, "/hooks/"+sourceName, bytes.NewReader(ev.body))
					req.Header = ev.header.Clone()
					rec := httptest.NewRecorder()
					e.gateway.ServeHTTP(rec, req)
					if rec.Code != want {
						b.Errorf("status %d: %s", rec.Code, rec.Body)
					}
				}
			})
			deadline := time.Now().Add(time.Minute)
			for i := range events {
				for t.count(events[i].id) == 0 {
					if time.Now().After(deadline) {
						b.Fatalf("event %s not delivered after a minute", events[i].id)
					}
					time.Sleep(100 * time.Microsecond)
				}
			}
		})
	}
}
