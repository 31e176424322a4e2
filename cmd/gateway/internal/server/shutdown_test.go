package server

import (
	"context"
	"errors"
	"net"
	"net/http"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
	"github.com/replyonce/gateway/stores/memory"
)

// Stop shuts down in its documented order, as a user of each part sees
// it: while the dispatcher drains, webhooks are refused but the admin
// listener still answers (agents settle through it) with /readyz 503; the
// process's goroutines end once the admin listener is down; the store
// closes after that, and tracing stops last, at the end of the grace.
func TestStopShutsDownInOrder(t *testing.T) {
	s, err := New(Options{Store: memory.New(nil), Admin: config.Admin{Listen: "127.0.0.1:0", Token: token}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	listen := func() net.Listener {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		return ln
	}
	publicLn, adminLn := listen(), listen()
	public := &http.Server{Handler: s.Gateway}
	admin := &http.Server{Handler: s.Admin}
	var serving sync.WaitGroup
	for _, p := range []struct {
		hs *http.Server
		ln net.Listener
	}{{public, publicLn}, {admin, adminLn}} {
		serving.Add(1)
		go func() {
			defer serving.Done()
			if err := p.hs.Serve(p.ln); !errors.Is(err, http.ErrServerClosed) {
				t.Errorf("serve: %v", err)
			}
		}()
	}
	ctx, stopRun := context.WithCancel(context.Background())
	runDone := make(chan struct{})
	go func() { defer close(runDone); s.Run(ctx) }()

	// A fresh connection per probe: a kept-alive one would outlive its
	// listener.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	// probe answers GET path on ln's address: its status, or 0 when the
	// listener refuses the connection.
	probe := func(ln net.Listener, path string) int {
		req, err := http.NewRequest(http.MethodGet, "http://"+ln.Addr().String()+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := client.Do(req)
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}
	if code := probe(adminLn, "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before Stop = %d, want 200", code)
	}

	var steps []string
	var tracedTo time.Time
	end := s.Stop(Process{Public: public, Admin: []*http.Server{admin}, Grace: 5 * time.Second, StoreTimeout: time.Second,
		StopRun: func() {
			steps = append(steps, "dispatcher")
			if code := probe(publicLn, "/hooks/s"); code != 0 {
				t.Errorf("the public listener answered %d while the dispatcher drained; intake must stop first", code)
			}
			if code := probe(adminLn, "/readyz"); code != http.StatusServiceUnavailable {
				t.Errorf("/readyz = %d while the dispatcher drained, want 503 from an admin listener still up", code)
			}
			stopRun()
			<-runDone
		},
		Background: func() {
			steps = append(steps, "background")
			if code := probe(adminLn, "/readyz"); code != 0 {
				t.Errorf("the admin listener answered %d when the process's goroutines were stopped", code)
			}
			serving.Wait()
		},
		CloseStore:  func() { steps = append(steps, "store") },
		StopTracing: func(graceEnd time.Time) { steps = append(steps, "tracing"); tracedTo = graceEnd },
	})
	if want := []string{"dispatcher", "background", "store", "tracing"}; !slices.Equal(steps, want) {
		t.Errorf("Stop's steps ran as %v, want %v", steps, want)
	}
	if !tracedTo.Equal(end) {
		t.Errorf("tracing flushed by %v, want the grace's end %v", tracedTo, end)
	}
}
