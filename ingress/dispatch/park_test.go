package dispatch_test

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/signatures"
	"github.com/replyonce/gateway/stores/memory"
	"github.com/replyonce/gateway/stores/storetest"
)

// A paused source with more than a page of due events in front of the
// index holds back no other source: its events are parked, the other
// source's are delivered, and operators still list the parked ones as
// queued. On resume every parked event is delivered once.
func TestPausedBacklogHoldsBackNoOtherSource(t *testing.T) {
	ctx := context.Background()
	clock := storetest.NewClock(time.Now())
	agent := newAgent(t)
	store := memory.New(nil)
	l := ledger.New(store, ledger.Options{Clock: clock.Now})
	var sources []*ingress.Source
	var queued []*dispatch.Source
	for _, name := range []string{"github", "held"} {
		src, err := ingress.NewSource(queuedSource(func(c *ingress.SourceConfig) {
			c.Name, c.Forward.URL = name, agent.URL+"/events"
		}))
		if err != nil {
			t.Fatal(err)
		}
		sources, queued = append(sources, src), append(queued, src.Queued())
	}
	client := forward.NewClient(forward.ClientOptions{})
	t.Cleanup(client.CloseIdleConnections)
	fwd := forward.New(client, clock.Now)
	const page = 4
	d, err := dispatch.New(dispatch.Options{Ledger: l, Forwarder: fwd, Sources: queued, Clock: clock.Now, Batch: page})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = d.Shutdown(ctx)
	})
	gw, err := ingress.New(ingress.Options{Sources: sources, Ledger: l, Forwarder: fwd, Clock: clock.Now, Handoff: d})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(srv.Close)
	signer, err := signatures.NewSigner("github", signatures.Config{Secrets: []string{githubSecret}})
	if err != nil {
		t.Fatal(err)
	}
	post := func(source, id string) {
		t.Helper()
		hdr := http.Header{"Content-Type": {"application/json"}, "X-Github-Event": {"issues"}, "X-Github-Delivery": {id}}
		r := &signatures.Request{Method: http.MethodPost, Header: hdr, Body: githubBody(id)}
		if err := signer.Sign(r, clock.Now()); err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/hooks/"+source, bytes.NewReader(r.Body))
		req.Header = hdr
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusAccepted {
			t.Fatalf("%s %s: %d, want 202", source, id, resp.StatusCode)
		}
	}
	sweepAll := func() {
		t.Helper()
		for range 100 {
			full, err := d.Sweep(ctx)
			if err != nil {
				t.Fatal(err)
			}
			settle(t, d)
			if !full {
				return
			}
		}
		t.Fatal("the sweep never ran out of work")
	}
	pause := func(source string, paused bool) {
		t.Helper()
		if err := l.Sources().SetSourcePaused(ctx, source, paused); err != nil {
			t.Fatal(err)
		}
	}

	// Both paused, so that nothing is handed over at accept: every event
	// goes through the due index, "held"'s three pages of them first.
	pause("github", true)
	pause("held", true)
	sweepAll()
	const held, other = 3*page + 1, 3
	for i := range held {
		post("held", "h-"+strconv.Itoa(i))
	}
	clock.Advance(time.Second)
	for i := range other {
		post("github", "g-"+strconv.Itoa(i))
	}
	sweepAll() // parks both sources' events
	pause("github", false)
	sweepAll()
	for i := range other {
		id := "g-" + strconv.Itoa(i)
		if n := len(agent.requests(id)); n != 1 {
			t.Errorf("%s: %d forwards while another source's backlog was paused, want 1", id, n)
		}
	}
	for i := range held {
		if n := len(agent.requests("h-" + strconv.Itoa(i))); n != 0 {
			t.Fatalf("h-%d forwarded while its source was paused", i)
		}
	}
	listed, err := l.Queue().ListDeliveries(ctx, ledger.DeliveryFilter{Source: "held", Status: ledger.DeliveryQueued})
	if err != nil {
		t.Fatal(err)
	}
	if len(listed) != held {
		t.Errorf("operators see %d of the paused source's %d queued events", len(listed), held)
	}

	pause("held", false)
	sweepAll()
	for i := range held {
		id := "h-" + strconv.Itoa(i)
		reqs := agent.requests(id)
		if len(reqs) != 1 {
			t.Fatalf("%s after resume: %d forwards, want 1", id, len(reqs))
		}
		if got := reqs[0].Header.Get("Replyonce-Delivery"); got != "1" {
			t.Errorf("%s: Replyonce-Delivery %s, want 1 (parking is not an attempt)", id, got)
		}
	}
}
