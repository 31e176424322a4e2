package ingress_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/memory"
)

// writeCounter counts every call that could change the store.
type writeCounter struct {
	ledger.Store
	writes atomic.Int64
}

func (s *writeCounter) Transact(ctx context.Context, scope string, fn func([]byte) (*ledger.Write, error)) error {
	s.writes.Add(1)
	return s.Store.Transact(ctx, scope, fn)
}

func (s *writeCounter) TransactControl(ctx context.Context, name string, fn func([]byte) ([]byte, error)) error {
	s.writes.Add(1)
	return s.Store.TransactControl(ctx, name, fn)
}

// 1,000 forged requests to one source: the newest 100 are kept in memory,
// their signature values redacted, and the store is never written.
func TestRejectedRequestsStayInMemory(t *testing.T) {
	store := &writeCounter{Store: memory.New(nil)}
	src, err := ingress.NewSource(githubSource("gh", func(c *ingress.SourceConfig) { c.Forward.URL = "http://agent.invalid/events" }))
	if err != nil {
		t.Fatal(err)
	}
	other, err := ingress.NewSource(githubSource("other", func(c *ingress.SourceConfig) { c.Forward.URL = "http://agent.invalid/events" }))
	if err != nil {
		t.Fatal(err)
	}
	gw, err := ingress.New(ingress.Options{Sources: []*ingress.Source{src, other}, Ledger: ledger.New(store, ledger.Options{}),
		Forwarder: forward.New(&http.Client{Transport: agentOK{}}, time.Now)})
	if err != nil {
		t.Fatal(err)
	}
	const forged = 1000
	for i := range forged {
		id := fmt.Sprintf("forged-%04d", i)
		hdr := githubHeader(id)
		hdr.Set("X-Hub-Signature-256", "sha256="+strings.Repeat("ab", 32))
		hdr.Set("Authorization", "Bearer super-secret-token")
		req := httptest.NewRequest(http.MethodPost, "/hooks/gh", bytes.NewReader(githubBody(id)))
		req.Header, req.RemoteAddr = hdr, fmt.Sprintf("203.0.113.%d:4000", i%250)
		rec := httptest.NewRecorder()
		gw.ServeHTTP(rec, req)
		if rec.Code != http.StatusUnauthorized {
			t.Fatalf("forged %d: %d", i, rec.Code)
		}
	}
	// A request too large and one with no event id are kept too.
	big := httptest.NewRequest(http.MethodPut, "/hooks/other", strings.NewReader("x"))
	gw.ServeHTTP(httptest.NewRecorder(), big)
	gw.Wait()
	if n := store.writes.Load(); n != 0 {
		t.Fatalf("refused requests wrote to the store %d times", n)
	}
	got := gw.RejectedRequests("gh")
	if len(got) != ingress.RejectedKept {
		t.Fatalf("kept %d, want %d", len(got), ingress.RejectedKept)
	}
	for i, r := range got {
		want := fmt.Sprintf("forged-%04d", forged-1-i)
		if r.Header.Get("X-Github-Delivery") != want || !bytes.Contains(r.Body, []byte(want)) {
			t.Fatalf("kept[%d] is %s, want %s (newest first)", i, r.Header.Get("X-Github-Delivery"), want)
		}
		if r.Status != http.StatusUnauthorized || r.Reason != "signature_no_match" || !strings.HasPrefix(r.Remote, "203.0.113.") || r.Method != http.MethodPost {
			t.Fatalf("kept[%d]: %+v", i, r)
		}
		if v := r.Header.Get("X-Hub-Signature-256"); v != ingress.Redacted {
			t.Fatalf("signature kept as %q", v)
		}
		if v := r.Header.Get("Authorization"); v != ingress.Redacted {
			t.Fatalf("credential kept as %q", v)
		}
	}
	o := gw.RejectedRequests("other")
	if len(o) != 1 || o[0].Status != http.StatusMethodNotAllowed || o[0].Reason != "method" {
		t.Fatalf("other source: %+v", o)
	}
	if n := len(gw.RejectedRequests("nope")); n != 0 {
		t.Fatalf("an unknown source has %d", n)
	}
}
