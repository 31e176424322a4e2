package forward

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// A debounced delivery says what it stands for; the agent reads it back
// whatever the event ids hold.
func TestCoversHeader(t *testing.T) {
	ids := []string{"m1", "evt,2", "a b", "m4", "m5"}
	v := FormatCovers(5, ids)
	if v != "5; ids=m1,evt%2C2,a+b,m4,m5" {
		t.Fatalf("FormatCovers = %q", v)
	}
	n, got, err := ParseCovers(v)
	if err != nil || n != 5 || !slices.Equal(got, ids) {
		t.Fatalf("ParseCovers(%q) = %d %q %v", v, n, got, err)
	}
	// The ledger keeps the newest ids only: the count stays exact.
	if n, got, err := ParseCovers(FormatCovers(150, ids[3:])); err != nil || n != 150 || len(got) != 2 {
		t.Fatalf("capped: %d %q %v", n, got, err)
	}
	for _, bad := range []string{"", "x; ids=a", "0", "3; names=a"} {
		if _, _, err := ParseCovers(bad); err == nil {
			t.Errorf("ParseCovers(%q) accepted", bad)
		}
	}

	var seen http.Header
	agent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { seen = r.Header.Clone() }))
	defer agent.Close()
	f := New(agent.Client(), nil)
	if out := f.Forward(context.Background(), Request{URL: agent.URL, RunID: "r", CoverCount: 2, Covers: []string{"a", "b"},
		Header: http.Header{HeaderCovers: {"99; ids=forged"}}}); out.Kind != Delivered {
		t.Fatalf("forward: %+v", out)
	}
	if got := seen.Values(HeaderCovers); len(got) != 1 || got[0] != "2; ids=a,b" {
		t.Fatalf("%s on the wire: %q", HeaderCovers, got)
	}
	if _ = f.Forward(context.Background(), Request{URL: agent.URL, RunID: "r"}); seen.Get(HeaderCovers) != "" {
		t.Fatalf("%s sent for a delivery that covers nothing: %q", HeaderCovers, seen.Get(HeaderCovers))
	}
}
