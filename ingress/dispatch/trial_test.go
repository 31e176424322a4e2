package dispatch_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/signatures"
)

// A trial sends a delivered event once to another URL, signed as a
// delivery is, but with no live run (a trial run id, fencing token 0); the
// event's attempts list it with where it went, and nothing else about the
// event changes: it stays delivered and the agent hears nothing more.
func TestTrialGoesToAnotherURLAndChangesNothingElse(t *testing.T) {
	h := newHarness(t, queuedSource())
	if st, _ := h.post(t, "trial-1"); st != http.StatusAccepted {
		t.Fatalf("post: %d", st)
	}
	settle(t, h.d)
	before := h.item(t, "trial-1")
	if before.Status != ledger.DeliveryDelivered {
		t.Fatalf("item %+v, want delivered", before)
	}
	var mu sync.Mutex
	var got []*http.Request
	var bodies [][]byte
	staging := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		got, bodies = append(got, r), append(bodies, b)
		mu.Unlock()
		w.WriteHeader(http.StatusInternalServerError)
	}))
	t.Cleanup(staging.Close)

	rec, err := h.d.SendTrial(context.Background(), before, staging.URL+"/events")
	if err != nil {
		t.Fatal(err)
	}
	if rec.To != staging.URL+"/events" || rec.AgentStatus != http.StatusInternalServerError || rec.N != 1 || rec.Error == "" {
		t.Fatalf("trial record %+v", rec)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("%d requests reached the staging agent, want 1", len(got))
	}
	r := got[0]
	if rid := r.Header.Get(forward.HeaderRunID); !strings.HasPrefix(rid, "trial:") || r.Header.Get(forward.HeaderFencingToken) != "0" {
		t.Fatalf("trial run %q token %q, want a trial run id and token 0", rid, r.Header.Get(forward.HeaderFencingToken))
	}
	sig, err := signatures.New("standard-webhooks", signatures.Config{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := sig.Verify(&signatures.Request{Method: r.Method, Header: r.Header, Body: bodies[0]}, h.clock.Now()); err != nil {
		t.Fatalf("the trial is not signed as a delivery is: %v", err)
	}
	delivered := h.agent.requests("trial-1")
	if string(bodies[0]) != string(delivered[0].Body) {
		t.Fatal("the trial's body is not the event's")
	}
	after := h.item(t, "trial-1")
	if after.Status != before.Status || after.Attempts != before.Attempts || after.Failures != before.Failures || after.Trials != 1 {
		t.Fatalf("the trial changed the event: before %+v, after %+v", before, after)
	}
	if n := len(h.agent.requests("trial-1")); n != 1 {
		t.Fatalf("the source's agent got %d requests, want the one delivery", n)
	}
	atts, err := h.ledger.Queue().AttemptsOf(context.Background(), after)
	if err != nil {
		t.Fatal(err)
	}
	if len(atts) != 2 || atts[1].To != staging.URL+"/events" || atts[0].To != "" {
		t.Fatalf("attempts %+v, want the delivery then the trial", atts)
	}
	if _, err := h.d.SendTrial(context.Background(), after, "file:///etc/passwd"); !errors.Is(err, ledger.ErrInvalid) {
		t.Fatalf("a trial to file:///etc/passwd: %v, want invalid", err)
	}
}
