package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"golang.org/x/sync/errgroup"

	"github.com/replyonce/gateway/cmd/gateway/internal/server"
	"github.com/replyonce/gateway/internal/cputime"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	"github.com/replyonce/gateway/stores/bolt"
	"github.com/replyonce/gateway/stores/memory"
)

// BenchmarkConsole measures the server time of the console's pages (the
// whole handler: session, in-process API call, ledger read, template) with
// 100,000 queued events in the store (half of them delivered), plus a
// conversation of 1,000 ledger entries on one scope. The events list walks
// the received index newest first and reads only the scopes one page
// needs (at most 1,000), however deep the cursor, so on bolt its cost does
// not grow with the number of events (the memory store scans its map for
// every index read). REPLYONCE_CONSOLE_BENCH_EVENTS changes the count.
//
//	go test -run '^$' -bench BenchmarkConsole -benchtime 50x ./cmd/gateway
func BenchmarkConsole(b *testing.B) {
	events := 100_000
	if v := os.Getenv("REPLYONCE_CONSOLE_BENCH_EVENTS"); v != "" {
		events, _ = strconv.Atoi(v)
	}
	for _, kind := range []string{"memory", "bolt"} {
		b.Run(kind, func(b *testing.B) {
			var store ledger.Store
			switch kind {
			case "memory":
				store = memory.New(time.Now)
			case "bolt":
				s, err := bolt.Open(filepath.Join(b.TempDir(), "bench.db"), bolt.Options{})
				if err != nil {
					b.Fatal(err)
				}
				b.Cleanup(func() { _ = s.Close() })
				store = s
			}
			l := ledger.New(store, ledger.Options{})
			fillConsoleBench(b, l, events)
			api := ledgerapi.NewHandler(l, consoleToken, nil)
			con, err := server.NewConsole(api, consoleToken, false, nil, nil, nil, time.Now, zap.NewNop())
			if err != nil {
				b.Fatal(err)
			}
			login := httptest.NewRequest(http.MethodPost, "/login", strings.NewReader("token="+consoleToken))
			login.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			rec := httptest.NewRecorder()
			con.ServeHTTP(rec, login)
			cookies := rec.Result().Cookies()
			if len(cookies) != 1 {
				b.Fatalf("sign in: %d", rec.Code)
			}
			get := func(b *testing.B, h http.Handler, path, want string) {
				// CPU time per page as well as wall time: on a shared
				// machine the wall time includes waiting for a core.
				cpu0, cpuMeasured := cputime.Self()
				defer func() {
					if cpu1, _ := cputime.Self(); cpuMeasured {
						b.ReportMetric(float64((cpu1-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
					}
				}()
				for b.Loop() {
					req := httptest.NewRequest(http.MethodGet, path, nil)
					req.AddCookie(cookies[0])
					req.Header.Set("Authorization", "Bearer "+consoleToken)
					w := httptest.NewRecorder()
					h.ServeHTTP(w, req)
					if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), want) {
						b.Fatalf("GET %s: %d %.300s", path, w.Code, w.Body.String())
					}
				}
			}
			b.Run("events-list", func(b *testing.B) { get(b, con, "/events", `data-event="`) })
			b.Run("events-list-source-queued", func(b *testing.B) { get(b, con, "/events?source=bench&status=queued", `data-event="`) })
			b.Run("events-list-api-json", func(b *testing.B) { get(b, api, "/v1/deliveries?page=50", `"event_id"`) })
			b.Run("events-list-delivered", func(b *testing.B) { get(b, con, "/events?status=delivered", `data-event="`) })
			b.Run("events-list-page-40", func(b *testing.B) { get(b, con, consoleBenchDeepPage(b, api, 40), `data-event="`) })
			b.Run("events-list-big-scope", func(b *testing.B) { get(b, con, "/events?scope=conv-big", `data-event="`) })
			b.Run("conversation-1000", func(b *testing.B) { get(b, con, "/scope?scope=conv-big", `class="moment"`) })
			b.Run("conversation-1000-all", func(b *testing.B) { get(b, con, "/scope?scope=conv-big&all=1", `class="moment"`) })
			b.Run("conversation-api-json", func(b *testing.B) { get(b, api, "/v1/scopes/conv-big/timeline", `"entries"`) })
			b.Run("event-detail", func(b *testing.B) {
				get(b, con, "/event?"+url.Values{"source": {"bench"}, "event_id": {"e-42"}}.Encode(), `id="attempts"`)
			})
		})
	}
}

// consoleBenchDeepPage follows the API's cursor n pages of 50 down the
// newest-first listing and returns the console's URL of the page after.
func consoleBenchDeepPage(b *testing.B, api http.Handler, n int) string {
	cursor := ""
	for range n {
		req := httptest.NewRequest(http.MethodGet, "/v1/deliveries?"+url.Values{"page": {"50"}, "cursor": {cursor}}.Encode(), nil)
		req.Header.Set("Authorization", "Bearer "+consoleToken)
		w := httptest.NewRecorder()
		api.ServeHTTP(w, req)
		var p ledgerapi.PageJSON
		if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil || p.Next == "" {
			b.Fatalf("page toward %d: %d %v %.200s", n, w.Code, err, w.Body.String())
		}
		cursor = p.Next
	}
	return "/events?cursor=" + url.QueryEscape(cursor)
}

// fillConsoleBench enqueues events on scopes of their own, and one scope
// with 500 queued events and 500 agent effects (1,000 entries).
func fillConsoleBench(b *testing.B, l *ledger.Ledger, events int) {
	b.Helper()
	ctx := context.Background()
	enqueue := func(source, id, scope string) error {
		_, err := l.Queue().Enqueue(ctx, ledger.EnqueueRequest{
			Event: ledger.QueuedEvent{Source: source, EventID: id, Scope: scope, ContentType: "application/json",
				Body: []byte(`{"id":"` + id + `","type":"bench.event","data":{"object":{"amount":1200}}}`)},
			Run:   ledger.RunOptions{RunID: source + ":" + id, Mode: ledger.ModeSupersede},
			Claim: ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "deliver", Payload: map[string]string{"source": source, "eventId": id}}, PendingTTL: time.Minute},
		})
		return err
	}
	start := time.Now()
	var g errgroup.Group
	g.SetLimit(64)
	for i := range events {
		g.Go(func() error {
			id := "e-" + strconv.Itoa(i)
			scope := "bench:" + id
			if err := enqueue("bench", id, scope); err != nil || i%2 == 1 {
				return err
			}
			// Every other event is delivered: only the received index
			// lists those without a scope.
			q, err := l.Queue().FindDelivery(ctx, scope, "bench", id)
			if err != nil {
				return err
			}
			tk, err := l.Queue().TakeDelivery(ctx, scope, q.EntryID, time.Minute)
			if err != nil {
				return err
			}
			_, err = l.Queue().FinishDelivery(ctx, ledger.Finish{Taken: tk, Status: ledger.DeliveryDelivered})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
	for i := range 500 {
		id := fmt.Sprintf("c-%d", i)
		if err := enqueue("bench", id, "conv-big"); err != nil {
			b.Fatal(err)
		}
		c, err := l.Claim(ctx, ledger.ClaimRequest{Key: ledger.Key{Scope: "conv-big", Intent: "reply", Payload: i}, Summary: "reply " + id,
			Conflict: ledger.ConflictNone})
		if err != nil || !c.Acquired() {
			b.Fatalf("claim: %+v %v", c, err)
		}
		if _, err := l.Settle(ctx, c.Ref(), ledger.OutcomeCommitted, "ok", nil); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("filled %d events and a 1,000-entry scope in %s", events, time.Since(start).Round(time.Millisecond))
}
