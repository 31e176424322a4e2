package main

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// A web page that rebinds its own name to the admin listener's address
// sends that name as Host: on a token-less loopback listener (the
// quickstart's), every console page and API call with Host: evil.example
// is refused and changes nothing; the listener's own names still work.
func TestAdminRefusesForeignHost(t *testing.T) {
	agent := newSink(t)
	g := startGateway(t, writeConfig(t, "{kind: memory}", "", agent.srv.URL))
	hc := newClient(t)
	do := func(method, path, host string) (int, string) {
		t.Helper()
		var body io.Reader
		if method == http.MethodPost {
			body = strings.NewReader(`{"source":"stripe"}`)
		}
		req, err := http.NewRequest(method, "http://"+g.admin+path, body)
		if err != nil {
			t.Fatal(err)
		}
		if body != nil {
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Origin", "http://"+host)
		}
		req.Host = host
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	_, port, _ := strings.Cut(g.admin, ":")
	for _, host := range []string{"evil.example", "evil.example:" + port, "EVIL.example.:" + port, "127.0.0.1.evil.example", "localhost.evil.example:" + port} {
		for _, c := range []struct{ method, path string }{
			{"GET", "/"}, {"GET", "/login"}, {"GET", "/events"}, {"GET", "/v1/sources/paused"}, {"GET", "/v1/deliveries"},
			{"GET", "/metrics"}, {"POST", "/v1/sources/pause"},
		} {
			status, body := do(c.method, c.path, host)
			if status != http.StatusForbidden || !strings.Contains(body, "host_not_allowed") {
				t.Errorf("%s %s with Host %s: %d %q, want 403 host_not_allowed", c.method, c.path, host, status, body)
			}
		}
	}
	api, err := ledgerapi.NewClient("http://"+g.admin, "", hc)
	if err != nil {
		t.Fatal(err)
	}
	if paused, err := api.PausedSources(context.Background()); err != nil || len(paused) != 0 {
		t.Fatalf("a refused pause paused: %v, %v", paused, err)
	}
	for _, host := range []string{g.admin, "localhost:" + port, "localhost", "[::1]:" + port, "127.0.0.2"} {
		if status, body := do("GET", "/v1/sources/paused", host); status != http.StatusOK {
			t.Errorf("Host %s: %d %q, want 200", host, status, body)
		}
	}
}

// admin.allowed_hosts adds names (a compose service, a proxy's name);
// the guard judges by name, address and listen address as documented.
func TestHostGuardAllows(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	for _, c := range []struct {
		listen  string
		allowed []string
		host    string
		want    bool
	}{
		{"127.0.0.1:8081", nil, "127.0.0.1:8081", true},
		{"127.0.0.1:8081", nil, "localhost:8081", true},
		{"127.0.0.1:8081", nil, "10.0.0.5:8081", false},
		{"127.0.0.1:8081", nil, "gateway:8081", false},
		{"127.0.0.1:8081", []string{"gateway"}, "Gateway:8081", true},
		{"0.0.0.0:8081", nil, "10.0.0.5:8081", true},
		{"0.0.0.0:8081", nil, "localhost", true},
		{"0.0.0.0:8081", nil, "gateway:8081", false},
		{":8081", []string{"gateway"}, "gateway", true},
		{"[::]:8081", nil, "[fe80::1]:8081", true},
		{"10.0.0.5:8081", nil, "10.0.0.5:8081", true},
		{"10.0.0.5:8081", nil, "localhost:8081", false},
		{"10.0.0.5:8081", nil, "10.0.0.6:8081", false},
		{"admin.internal:8081", nil, "admin.internal:8081", true},
		{"admin.internal:8081", nil, "evil.example:8081", false},
		{"127.0.0.1:8081", nil, "", false},
	} {
		g := newHostGuard(c.listen, c.allowed, nil, ok).(*hostGuard)
		if got := g.allows(c.host); got != c.want {
			t.Errorf("listen %s allowed %v, Host %q: %v, want %v", c.listen, c.allowed, c.host, got, c.want)
		}
	}
}
