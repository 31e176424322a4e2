package forward_test

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/replyonce/gateway/forward"
)

// A failed forward says in plain words what to check, and keeps its
// cause for errors.Is.
func TestErrorsSayWhatToCheck(t *testing.T) {
	status := func(code int) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(code) }
	}
	cases := []struct {
		name    string
		handler http.HandlerFunc
		want    string
		is      error
	}{
		{"401", status(401), "the agent refused the gateway's credentials (401 Unauthorized): check forward.signing_secret and forward.headers", forward.ErrAgentStatus},
		{"403", status(403), "the agent refused the gateway's credentials (403 Forbidden): check forward.signing_secret and forward.headers", forward.ErrAgentStatus},
		{"404", status(404), "(404 Not Found): check forward.url", forward.ErrAgentStatus},
		{"500", status(500), "the agent failed (500 Internal Server Error)", forward.ErrAgentStatus},
		{"302", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Location", "https://elsewhere.example/hook")
			w.WriteHeader(302)
		}, `a redirect to "https://elsewhere.example/hook", which is never followed: set forward.url`, forward.ErrRedirect},
		{"timeout", func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.Copy(io.Discard, r.Body)
			<-r.Context().Done()
		}, "the agent did not answer within forward.timeout (50ms)", context.DeadlineExceeded},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(tc.handler)
			defer srv.Close()
			req := baseRequest(srv.URL)
			req.Timeout = 50 * time.Millisecond
			if tc.name != "timeout" {
				req.Timeout = 5 * time.Second
			}
			out := newForwarder(t, time.Now).Forward(context.Background(), req)
			var ae *forward.AgentError
			if !errors.As(out.Err, &ae) {
				t.Fatalf("err %v (%T) is not an *AgentError", out.Err, out.Err)
			}
			if !strings.Contains(out.Err.Error(), tc.want) {
				t.Fatalf("err = %q, want it to contain %q", out.Err, tc.want)
			}
			if !errors.Is(out.Err, tc.is) {
				t.Fatalf("err %v does not wrap %v", out.Err, tc.is)
			}
		})
	}
}

// Connection refused names the URL, without its password.
func TestConnectionRefusedNamesTheURL(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	url := "http://agent:hunter2@" + addr + "/hook"
	out := newForwarder(t, time.Now).Forward(context.Background(), baseRequest(url))
	want := "nothing is listening at http://agent:xxxxx@" + addr + "/hook (connection refused): check that the agent is running and forward.url"
	if out.Err == nil || out.Err.Error() != want {
		t.Fatalf("err = %v, want %q", out.Err, want)
	}
	if strings.Contains(out.Err.Error(), "hunter2") {
		t.Fatalf("the password is in the error: %v", out.Err)
	}
}

// A caller's cancellation is not reported as the agent's timeout.
func TestCallerCancelIsNotATimeout(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		cancel() // the caller gives up while the agent is at work
		<-r.Context().Done()
	}))
	defer srv.Close()
	out := newForwarder(t, time.Now).Forward(ctx, baseRequest(srv.URL))
	if out.Err == nil || strings.Contains(out.Err.Error(), "forward.timeout") {
		t.Fatalf("err = %v, want a cancellation, not a forward.timeout", out.Err)
	}
}
