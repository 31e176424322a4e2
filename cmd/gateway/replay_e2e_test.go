package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// droppingAgent answers every warm-up event 200, once all of them are in
// (so that each had a connection of its own, which the gateway's pool then
// keeps), and reads every delivery of the dropped event and closes the
// connection without answering, until its third delivery, which it
// answers 200.
type droppingAgent struct {
	srv    *httptest.Server
	warm   sync.WaitGroup
	mu     sync.Mutex
	seen   []string // the dropped event's requests: "delivery/token"
	warmed int
}

const warmEvents = 8

func newDroppingAgent(t *testing.T) *droppingAgent {
	a := &droppingAgent{}
	a.warm.Add(warmEvents)
	a.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		id := r.Header.Get("Replyonce-Event-Id")
		if strings.HasPrefix(id, "evt_warm_") {
			a.mu.Lock()
			a.warmed++
			first := a.warmed <= warmEvents
			a.mu.Unlock()
			if first {
				a.warm.Done()
				a.warm.Wait()
			}
			w.WriteHeader(http.StatusOK)
			return
		}
		delivery := r.Header.Get("Replyonce-Delivery")
		a.mu.Lock()
		a.seen = append(a.seen, delivery+"/"+r.Header.Get("Replyonce-Fencing-Token"))
		a.mu.Unlock()
		if delivery == "3" {
			w.WriteHeader(http.StatusOK)
			return
		}
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			t.Errorf("hijack: %v", err)
			return
		}
		_ = conn.Close()
	}))
	t.Cleanup(a.srv.Close)
	return a
}

func (a *droppingAgent) requests() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return slices.Clone(a.seen)
}

// An agent that reads a forward and closes the connection without
// answering receives each attempt once, on every store and in both
// modes: the gateway's HTTP client never sends a forward again by itself
// (Idempotency-Key would let net/http replay it on every pooled
// connection). The lost answer is a failed attempt, and the next one is a
// new delivery with a newer token: the provider's retry inline, the retry
// schedule queued.
func TestClosedWithoutAnswerIsOneRequestPerAttempt(t *testing.T) {
	for name, store := range storeConfigs(t) {
		for _, mode := range []string{"inline", "queued"} {
			t.Run(name+"/"+mode, func(t *testing.T) {
				agent := newDroppingAgent(t)
				extra := "      mode: " + mode + "\n"
				if mode == "queued" {
					extra += "      concurrency: 8\n      retry: {schedule: [0s, 200ms, 200ms, 200ms]}\n"
				}
				g := startGateway(t, writeConfig(t, store, extra, agent.srv.URL))
				client := newClient(t)
				want := map[string]int{"inline": http.StatusOK, "queued": http.StatusAccepted}[mode]
				stamp := strconv.FormatInt(time.Now().UnixNano(), 36)

				var wg sync.WaitGroup
				for i := range warmEvents {
					wg.Go(func() {
						body, header := stripeEvent(t, fmt.Sprintf("evt_warm_%s_%d", stamp, i), nil)
						if r := post(t, client, g.hook("stripe"), body, header); r.status != want {
							t.Errorf("warm-up event %d: %d %v", i, r.status, r.body)
						}
					})
				}
				wg.Wait()

				id := "evt_dropped_" + stamp
				body, header := stripeEvent(t, id, nil)
				if mode == "inline" {
					// The provider retries each 503 until the agent answers.
					for try := 1; try <= 3; try++ {
						r := post(t, client, g.hook("stripe"), body, header)
						if wantStatus := map[bool]int{true: 200, false: 503}[try == 3]; r.status != wantStatus {
							t.Fatalf("try %d: %d %v, want %d", try, r.status, r.body, wantStatus)
						}
					}
				} else {
					if r := post(t, client, g.hook("stripe"), body, header); r.status != http.StatusAccepted {
						t.Fatalf("accept: %d %v", r.status, r.body)
					}
					waitFor(t, "the third delivery to be delivered", func() bool { return deliveryStatus(t, g, id) == "delivered" })
				}

				seen := agent.requests()
				if len(seen) != 3 {
					t.Fatalf("the agent received %d requests for 3 attempts: %v", len(seen), seen)
				}
				var last uint64
				for i, s := range seen {
					delivery, token, _ := strings.Cut(s, "/")
					tok, err := strconv.ParseUint(token, 10, 64)
					if delivery != strconv.Itoa(i+1) || err != nil || tok <= last {
						t.Fatalf("requests %v: want deliveries 1, 2, 3 with rising tokens", seen)
					}
					last = tok
				}
			})
		}
	}
}
