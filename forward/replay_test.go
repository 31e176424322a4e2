package forward_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/forward"
)

// An agent that reads a forward and closes the connection without
// answering (a crashing handler, a proxy that drops it) has received the
// request once: net/http must not send it again on the next pooled
// connection, whatever the request's headers (Idempotency-Key makes a POST
// "replayable" to it). The Outcome is a Retry, the caller's to schedule.
func TestClosedWithoutAnswerIsSentOnce(t *testing.T) {
	for _, tc := range []struct {
		name string
		body []byte
	}{{"body", []byte(`{"id":"evt_1"}`)}, {"empty body", nil}} {
		t.Run(tc.name, func(t *testing.T) {
			const pooled = 8
			var (
				drop     atomic.Bool
				received atomic.Int32
				warm     sync.WaitGroup
			)
			warm.Add(pooled)
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				if !drop.Load() {
					// Every warm-up request waits for the others, so that
					// each has a connection of its own, left in the pool.
					warm.Done()
					warm.Wait()
					w.WriteHeader(http.StatusOK)
					return
				}
				received.Add(1)
				conn, _, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Errorf("hijack: %v", err)
					return
				}
				_ = conn.Close()
			}))
			defer srv.Close()
			f := newForwarder(t, time.Now)

			var wg sync.WaitGroup
			for range pooled {
				wg.Go(func() {
					if out := f.Forward(context.Background(), baseRequest(srv.URL)); out.Kind != forward.Delivered {
						t.Errorf("warm-up: %+v", out)
					}
				})
			}
			wg.Wait()

			drop.Store(true)
			req := baseRequest(srv.URL)
			req.Body = tc.body
			out := f.Forward(context.Background(), req)
			if out.Kind != forward.Retry || out.Err == nil {
				t.Fatalf("outcome %+v, want Retry with an error", out)
			}
			if n := received.Load(); n != 1 {
				t.Fatalf("the agent received the forward %d times, want once", n)
			}
		})
	}
}
