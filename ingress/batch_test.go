package ingress_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/signatures"
)

const gcSecret = "gocardless-endpoint-secret"

func gcBatch(from, to int) []byte {
	var evs []string
	for i := from; i < to; i++ {
		evs = append(evs, fmt.Sprintf(`{"id":"EV%04d","created_at":"2026-03-14T15:09:26.000Z","resource_type":"payments","action":"confirmed","links":{"payment":"PM%04d"}}`, i, i))
	}
	return []byte(`{"events":[` + strings.Join(evs, ",") + `],"meta":{"webhook_id":"WB0001"}}`)
}

func (h *harness) postGC(t *testing.T, body []byte) reply {
	t.Helper()
	hdr := http.Header{"Content-Type": {"application/json"}}
	sign(t, "gocardless", signatures.Config{Secrets: []string{gcSecret}}, h.clock.Now(), http.MethodPost, "", hdr, body)
	return h.do(t, h.newRequest(t, http.MethodPost, "/hooks/gc", hdr, body))
}

func batchStatuses(t *testing.T, r reply) map[string]string {
	t.Helper()
	var a struct {
		Status string `json:"status"`
		Events []struct {
			Status  string `json:"status"`
			EventID string `json:"event_id"`
		} `json:"events"`
	}
	if err := json.Unmarshal(r.Body, &a); err != nil || a.Status != "batch" {
		t.Fatalf("batch answer %q: %v", r.Body, err)
	}
	out := map[string]string{}
	for _, e := range a.Events {
		out[e.EventID] = e.Status
	}
	return out
}

// A batched body of 50 events, 10 of them already seen: 40 new deliveries, each once, each
// forwarded as its own event; the provider gets 200 only when all 50 are recorded.
func TestBatchSplit(t *testing.T) {
	h := newHarness(t, ingress.SourceConfig{Name: "gc", Provider: "gocardless", Split: "default",
		Signature: signatures.Config{Secrets: []string{gcSecret}}})

	r := h.postGC(t, gcBatch(0, 10))
	wantStatus(t, r, http.StatusOK)
	r = h.postGC(t, gcBatch(0, 50))
	wantStatus(t, r, http.StatusOK)
	st := batchStatuses(t, r)
	dup, del := 0, 0
	for i := range 50 {
		id := fmt.Sprintf("EV%04d", i)
		if n := h.sink.count(id); n != 1 {
			t.Errorf("%s forwarded %d times, want once", id, n)
		}
		switch st[id] {
		case "duplicate":
			dup++
		case "delivered":
			del++
		}
	}
	if dup != 10 || del != 40 || h.sink.totalCount() != 50 {
		t.Fatalf("second batch: %d duplicates, %d delivered, %d forwards in all; want 10, 40, 50", dup, del, h.sink.totalCount())
	}
	// Each element reaches the agent alone, under its own id.
	req := h.sink.requests("EV0042")[0]
	if want := `{"id":"EV0042","created_at":"2026-03-14T15:09:26.000Z","resource_type":"payments","action":"confirmed","links":{"payment":"PM0042"}}`; string(req.Body) != want {
		t.Errorf("element body %s", req.Body)
	}
	if got := req.Header.Get("Replyonce-Run-Id"); got != "gc:EV0042" {
		t.Errorf("run id %q", got)
	}

	// The same 50 again: all duplicates, nothing forwarded.
	r = h.postGC(t, gcBatch(0, 50))
	wantStatus(t, r, http.StatusOK)
	if h.sink.totalCount() != 50 {
		t.Fatalf("replayed batch forwarded again: %d", h.sink.totalCount())
	}

	// One element the agent cannot take: the provider hears 503, the others are recorded;
	// the retry delivers only that one.
	h.sink.setAnswer(func(w http.ResponseWriter, r *http.Request, n int) {
		if r.Header.Get("Replyonce-Event-Id") == "EV0055" && n == 1 {
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusOK)
	})
	r = h.postGC(t, gcBatch(50, 60))
	wantStatus(t, r, http.StatusServiceUnavailable)
	r = h.postGC(t, gcBatch(50, 60))
	wantStatus(t, r, http.StatusOK)
	for i := 50; i < 60; i++ {
		id := fmt.Sprintf("EV%04d", i)
		want := 1
		if i == 55 {
			want = 2 // refused once, then delivered
		}
		if n := h.sink.count(id); n != want {
			t.Errorf("%s forwarded %d times, want %d", id, n, want)
		}
	}
}

// An element without an event id refuses the whole request before anything is recorded; a split
// path that is not an array is a 400 too; a bad signature is still 401.
func TestBatchSplitRefusals(t *testing.T) {
	h := newHarness(t, ingress.SourceConfig{Name: "gc", Provider: "gocardless", Split: "{json:events}",
		Signature: signatures.Config{Secrets: []string{gcSecret}}})
	before := h.store.writes.Load()
	wantStatus(t, h.postGC(t, []byte(`{"events":[{"id":"EV1"},{"action":"no id"}]}`)), http.StatusBadRequest)
	wantStatus(t, h.postGC(t, []byte(`{"events":{"id":"EV1"}}`)), http.StatusBadRequest)
	bad := h.newRequest(t, http.MethodPost, "/hooks/gc", http.Header{"Webhook-Signature": {"00"}}, gcBatch(0, 2))
	wantStatus(t, h.do(t, bad), http.StatusUnauthorized)
	if n := h.store.writes.Load() - before; n != 0 || h.sink.totalCount() != 0 {
		t.Fatalf("refused batches wrote %d documents and forwarded %d", n, h.sink.totalCount())
	}
	// An empty batch is recorded trivially.
	r := h.postGC(t, []byte(`{"events":[]}`))
	wantStatus(t, r, http.StatusOK)

	for _, c := range []ingress.SourceConfig{
		{Name: "x", Provider: "github", Split: "default", Signature: signatures.Config{Secrets: []string{"s"}}, Forward: ingress.ForwardConfig{Target: forward.Target{URL: "http://a"}}},
		{Name: "x", Provider: "gocardless", Split: "events", Signature: signatures.Config{Secrets: []string{"s"}}, Forward: ingress.ForwardConfig{Target: forward.Target{URL: "http://a"}}},
		{Name: "x", Provider: "hmac", Split: "{json:items}", Signature: signatures.Config{Secrets: []string{"s"}, HMAC: &signatures.HMACConfig{Header: "X-S"}}, Forward: ingress.ForwardConfig{Target: forward.Target{URL: "http://a"}}},
	} {
		if _, err := ingress.NewSource(c); err == nil || !strings.Contains(err.Error(), "sources.x.") {
			t.Errorf("%s split %q: %v", c.Provider, c.Split, err)
		}
	}
}

// HubSpot's body is the array itself.
func TestBatchSplitHubSpot(t *testing.T) {
	const url = "https://hooks.example.com/hooks/hs"
	cfg := signatures.Config{Secrets: []string{"hubspot-client-secret"}, URL: url}
	h := newHarness(t, ingress.SourceConfig{Name: "hs", Provider: "hubspot", Split: "default", Signature: cfg})
	body := []byte(`[{"eventId":101,"subscriptionType":"contact.creation","objectId":1},{"eventId":102,"subscriptionType":"contact.deletion","objectId":2}]`)
	hdr := http.Header{"Content-Type": {"application/json"}}
	sign(t, "hubspot", cfg, h.clock.Now(), http.MethodPost, url, hdr, body)
	r := h.do(t, h.newRequest(t, http.MethodPost, "/hooks/hs", hdr, body))
	wantStatus(t, r, http.StatusOK)
	if st := batchStatuses(t, r); st["101"] != "delivered" || st["102"] != "delivered" || h.sink.count("101") != 1 || h.sink.count("102") != 1 {
		t.Fatalf("hubspot batch: %v", st)
	}
}

// A queued source that splits records every element as its own queued
// event (one store step each) and answers for all of them at once.
func TestBatchSplitQueued(t *testing.T) {
	h := newHarness(t, ingress.SourceConfig{Name: "gc", Provider: "gocardless", Split: "default",
		Signature: signatures.Config{Secrets: []string{gcSecret}},
		Forward:   ingress.ForwardConfig{Queue: dispatch.Policy{Mode: dispatch.ModeQueued}}})
	r := h.postGC(t, gcBatch(0, 5))
	wantStatus(t, r, http.StatusAccepted) // as a single queued event
	for id, st := range batchStatuses(t, r) {
		if st != "queued" {
			t.Errorf("%s: %s, want queued", id, st)
		}
	}
	r = h.postGC(t, gcBatch(0, 5))
	wantStatus(t, r, http.StatusOK) // every element a duplicate, as a single copy
	for id, st := range batchStatuses(t, r) {
		if st != "duplicate" {
			t.Errorf("copy of %s: %s, want duplicate", id, st)
		}
	}
	for i := range 5 {
		id := fmt.Sprintf("EV%04d", i)
		items, err := h.ledger.Queue().QueueItems(context.Background(), "gc:"+id)
		if err != nil || len(items) != 1 || items[0].EventID != id {
			t.Fatalf("%s: queued %+v, %v", id, items, err)
		}
	}
	if n := h.sink.totalCount(); n != 0 {
		t.Fatalf("%d forwards with no dispatcher running, want 0", n)
	}
}
