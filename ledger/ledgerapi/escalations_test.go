package ledgerapi_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	"github.com/replyonce/gateway/stores/memory"
)

// The loop breaker over the API: a fenced run's claim past the cap comes
// back refused rate_limited, the effect does not run, and the client lists
// the caps, the one escalation, and dismisses it.
func TestCapsAndEscalationsOverTheAPI(t *testing.T) {
	ctx := context.Background()
	now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	var escalations []ledger.Event
	caps := map[string]ledger.Cap{"reply": {Max: 3, Window: 5 * time.Minute}}
	l := ledger.New(memory.New(nil), ledger.Options{Caps: caps, Clock: func() time.Time { return now }, Observe: func(e ledger.Event) {
		if e.Type == "escalation" {
			mu.Lock()
			escalations = append(escalations, e)
			mu.Unlock()
		}
	}})
	srv := httptest.NewServer(ledgerapi.NewHandler(l, "tok", nil))
	defer srv.Close()
	c, err := ledgerapi.NewClient(srv.URL, "tok", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.Caps(ctx)
	if err != nil || !reflect.DeepEqual(got, caps) {
		t.Fatalf("caps %v, %v; want %v", got, err, caps)
	}
	sent := 0
	var statuses []string
	for i := 1; i <= 5; i++ {
		run, err := c.Begin(ctx, "conv-loop", ledger.RunOptions{RunID: "m" + string(rune('0'+i)), ContextAt: now})
		if err != nil {
			t.Fatal(err)
		}
		res, err := run.Once(ctx, "reply", map[string]int{"to": i}, func(context.Context, ledger.Call) (any, error) {
			sent++
			return "ok", nil
		}, ledger.OnceOptions{Summary: "thanks!"})
		if err != nil {
			t.Fatal(err)
		}
		statuses = append(statuses, string(res.Status)+"/"+string(res.Reason))
	}
	want := []string{"executed/", "executed/", "executed/", "refused/rate_limited", "refused/rate_limited"}
	if !reflect.DeepEqual(statuses, want) || sent != 3 {
		t.Fatalf("statuses %v with %d sent; want %v and 3", statuses, sent, want)
	}
	if len(escalations) != 1 {
		t.Fatalf("%d escalation events, want 1", len(escalations))
	}
	open, err := c.Escalations(ctx, 0)
	if err != nil || len(open) != 1 {
		t.Fatalf("escalations %+v, %v", open, err)
	}
	e := open[0]
	if e.Scope != "conv-loop" || e.Intent != "reply" || e.Reason != ledger.ReasonRateLimited || e.Refused != 2 || e.Max != 3 ||
		e.Window != 5*time.Minute || e.RunID != "m4" || e.Summary != "thanks!" || e.ID != escalations[0].EscalationID {
		t.Fatalf("escalation %+v", e)
	}
	d, err := c.DismissEscalation(ctx, "conv-loop", e.ID, "ana")
	if err != nil || d.DismissedBy != "ana" || d.DismissedAt.IsZero() {
		t.Fatalf("dismiss: %+v, %v", d, err)
	}
	if open, err := c.Escalations(ctx, 0); err != nil || len(open) != 0 {
		t.Fatalf("after dismissal: %+v, %v", open, err)
	}
	all, err := c.ScopeEscalations(ctx, "conv-loop")
	if err != nil || len(all) != 1 || all[0].DismissedBy != "ana" {
		t.Fatalf("scope escalations %+v, %v", all, err)
	}
	_, err = c.DismissEscalation(ctx, "conv-loop", "nope", "")
	var apiErr *ledgerapi.Error
	if !errors.As(err, &apiErr) || apiErr.Status != http.StatusNotFound || apiErr.Code != ledgerapi.CodeUnknownEscalation {
		t.Fatalf("dismissing an unknown escalation: %v, want 404 unknown_escalation", err)
	}
	if _, err := c.DismissEscalation(ctx, "", "x", ""); !errors.As(err, &apiErr) || apiErr.Code != ledgerapi.CodeInvalidRequest {
		t.Fatalf("dismiss without scope: %v, want invalid_request", err)
	}
}

// With no caps the API says so: an empty list, not null.
func TestNoCapsByDefault(t *testing.T) {
	srv := httptest.NewServer(ledgerapi.NewHandler(ledger.New(memory.New(nil), ledger.Options{}), "", nil))
	defer srv.Close()
	res, err := srv.Client().Get(srv.URL + "/v1/caps")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var b [64]byte
	n, _ := res.Body.Read(b[:])
	if res.StatusCode != 200 || string(b[:n]) != "{\"caps\":[]}\n" {
		t.Fatalf("GET /v1/caps: %d %q", res.StatusCode, b[:n])
	}
}
