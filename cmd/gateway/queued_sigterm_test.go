//go:build !windows

// Windows cannot send another process SIGTERM (os.Process.Signal supports
// only Kill there); a console's Ctrl+C, close or shutdown event, which Go
// delivers as SIGINT or SIGTERM, is what stops the gateway on Windows.

package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/bolt"
)

// A real SIGTERM to a `gateway serve` process while senders keep posting
// to a queued source and deliveries are in flight: the process exits by
// itself, every acknowledged event is stored, none is left held by a
// delivery that will never finish (each is delivered or due), and the
// restarted gateway delivers every one of them.
func TestQueuedSIGTERMUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and signals gateway processes")
	}
	const maxPosts = 2000
	agent := newSink(t)
	agent.setAnswer(func(n int, r *http.Request) (int, time.Duration) { return 200, 200 * time.Millisecond })
	dbPath := filepath.Join(t.TempDir(), "ledger.db")
	cfg := writeConfig(t, "{kind: bolt, path: "+dbPath+"}", "      mode: queued\n      concurrency: 4\n", agent.srv.URL)
	child := startChild(t, cfg)
	client := newClient(t)
	var (
		mu    sync.Mutex
		acked []string
		next  atomic.Int64
		wg    sync.WaitGroup
		stop  atomic.Bool
	)
	for range 8 {
		wg.Go(func() {
			// A bounded number of posts, so that what the restarted
			// gateway must deliver stays bounded however fast this
			// machine acknowledges.
			for !stop.Load() && next.Load() < maxPosts {
				id := fmt.Sprintf("evt_sigterm_%d", next.Add(1))
				body, header := stripeEvent(t, id, nil)
				req, _ := http.NewRequest(http.MethodPost, child.hook(), strings.NewReader(string(body)))
				req.Header = header
				resp, err := client.Do(req)
				if err != nil {
					continue // refused once the listener closed: not acknowledged
				}
				if resp.StatusCode == http.StatusAccepted {
					mu.Lock()
					acked = append(acked, id)
					mu.Unlock()
				}
				resp.Body.Close()
			}
		})
	}
	time.Sleep(time.Second)
	if err := child.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-child.done:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not exit after SIGTERM")
	}
	stop.Store(true)
	wg.Wait()
	if !child.cmd.ProcessState.Success() {
		t.Errorf("serve exited %v after SIGTERM", child.cmd.ProcessState)
	}
	if len(acked) < 10 {
		t.Fatalf("only %d events acknowledged under load", len(acked))
	}
	s, err := bolt.Open(dbPath, bolt.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l := ledger.New(s, ledger.Options{})
	waiting := 0
	for _, id := range acked {
		items, err := l.Queue().QueueItems(context.Background(), "stripe:"+id)
		if err != nil || len(items) != 1 {
			t.Fatalf("acknowledged %s: %+v %v", id, items, err)
		}
		switch items[0].Status {
		case ledger.DeliveryDelivered:
		case ledger.DeliveryQueued:
			waiting++
		default:
			t.Errorf("%s left %s after SIGTERM", id, items[0].Status)
		}
	}
	_ = s.Close()
	// The slow agent was there to have deliveries in flight at SIGTERM;
	// after the restart it answers at once, so the backlog drains at the
	// store's pace rather than 20 events a second.
	agent.setAnswer(func(n int, r *http.Request) (int, time.Duration) { return 200, 0 })
	startChild(t, cfg)
	waitFor(t, "every acknowledged event delivered after the restart", func() bool {
		seen := map[string]bool{}
		for i := range agent.count() {
			seen[agent.request(i).Header.Get("Replyonce-Event-Id")] = true
		}
		for _, id := range acked {
			if !seen[id] {
				return false
			}
		}
		return true
	})
	t.Logf("%d events acknowledged under load, %d still waiting at SIGTERM, all delivered after the restart", len(acked), waiting)
}
