package main

import (
	"context"
	"net/http"
	"testing"
	"time"
)

func TestRunServesUntilCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	getenv := func(k string) string {
		if k == "FORWARD_SIGNING_SECRET" {
			return forwardSecret
		}
		return ""
	}
	addr := make(chan string, 1)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"--listen", "127.0.0.1:0"}, getenv, func(a string) { addr <- a })
	}()
	var a string
	select {
	case a = <-addr:
	case err := <-done:
		t.Fatalf("run stopped: %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("agent did not start")
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr}).Get("http://" + a + "/events")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: %d", resp.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run returned %v", err)
	}
}

func TestRunNeedsASigningSecret(t *testing.T) {
	err := run(context.Background(), []string{"--listen", "127.0.0.1:0"}, func(string) string { return "" }, nil)
	if err == nil {
		t.Fatal("started without a signing secret")
	}
}
