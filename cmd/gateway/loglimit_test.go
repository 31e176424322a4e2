package main

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
)

// Unauthenticated traffic writes little: 1,000 requests to made-up
// sources, each with a 60 KiB header and a long name, and 1,000 with a
// wrong method on a real source, add a bounded number of log bytes; a
// header past server.max_header_bytes is refused before any handler.
func TestUnauthenticatedTrafficLogsLittle(t *testing.T) {
	agent := newSink(t)
	g := startGateway(t, writeConfig(t, "{kind: memory}", "", agent.srv.URL))
	client := newClient(t)
	junk := strings.Repeat("j", 60<<10)
	longName := strings.Repeat("n", 2000)
	before := len(g.stderr.String())
	for i := range 1000 {
		req, _ := http.NewRequest(http.MethodPost, "http://"+g.public+"/hooks/"+longName+strconv.Itoa(i), strings.NewReader("{}"))
		req.Header.Set("X-Junk", junk)
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Fatalf("request %d: %d, want 404", i, resp.StatusCode)
		}
		req, _ = http.NewRequest("PURGE"+strconv.Itoa(i%7), "http://"+g.public+"/hooks/stripe", nil)
		req.Header.Set("X-Junk", junk)
		if resp, err = client.Do(req); err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusMethodNotAllowed {
			t.Fatalf("request %d: %d, want 405", i, resp.StatusCode)
		}
	}
	logged := g.stderr.String()[before:]
	// Ten lines a minute per kind, each a few hundred bytes at most.
	if n := len(logged); n > 16<<10 {
		t.Fatalf("2,000 unauthenticated requests logged %d bytes (%d lines), want at most 16 KiB", n, strings.Count(logged, "\n"))
	}
	if strings.Contains(logged, longName) {
		t.Fatal("a made-up source name was logged whole")
	}
	req, _ := http.NewRequest(http.MethodPost, "http://"+g.public+"/hooks/stripe", strings.NewReader("{}"))
	req.Header.Set("X-Junk", strings.Repeat("j", 100<<10))
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("100 KiB of headers: %d, want 431", resp.StatusCode)
	}
}
