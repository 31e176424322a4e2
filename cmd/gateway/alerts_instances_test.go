package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// Three instances on Postgres and on Redis, each sending to one Slack
// receiver, each seeing the agent fail: one failing alert for the
// incident, not three; and once the agent is back, one recovery alert.
func TestAlertsOnceAcrossInstances(t *testing.T) {
	stores := storeConfigs(t)
	for _, name := range []string{"postgres", "redis"} {
		store, ok := stores[name]
		if !ok {
			t.Fatalf("%s: REPLYONCE_TEST_%s is not set", name, strings.ToUpper(name))
		}
		t.Run(name, func(t *testing.T) {
			agent := newRestartableAgent(t)
			receiver := newSlackReceiver(t)
			alerted := receiver.count
			cfg := writeConfig(t, store+"\nalerts: {after_failures: 3, targets: [{slack: '"+receiver.srv.URL+"/services/x'}]}",
				"      mode: queued\n      retry: {schedule: [0s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s, 1s]}\n", "http://"+agent.addr)
			instances := []*gateway{startGateway(t, cfg), startGateway(t, cfg), startGateway(t, cfg)}
			client := newClient(t)
			prefix := fmt.Sprintf("evt_alert3_%s_%d_", name, time.Now().UnixNano())
			var ids []string
			for i := range 9 {
				id := prefix + fmt.Sprint(i)
				ids = append(ids, id)
				body, header := stripeEvent(t, id, nil)
				if r := post(t, client, instances[i%3].hook("stripe"), body, header); r.status != http.StatusAccepted {
					t.Fatalf("accept %s: %d %v", id, r.status, r.body)
				}
			}
			waitFor(t, "a failing alert", func() bool { return alerted("Source stripe is failing") >= 1 })
			// Every instance keeps failing attempts for a few more seconds:
			// none may send the incident's alert again.
			time.Sleep(3 * time.Second)
			if n := alerted("Source stripe is failing"); n != 1 {
				t.Fatalf("%d failing alerts from three instances, want 1", n)
			}
			agent.start(t)
			waitFor(t, "every event delivered", func() bool { return len(agent.counts()) == len(ids) })
			waitFor(t, "a recovery alert", func() bool { return alerted("Source stripe recovered") >= 1 })
			time.Sleep(3 * time.Second)
			if n := alerted("Source stripe recovered"); n != 1 {
				t.Fatalf("%d recovery alerts from three instances, want 1: %q", n, receiver.texts())
			}
			for _, id := range ids {
				if n := agent.counts()[id]; n != 1 {
					t.Errorf("%s delivered %d times, want 1", id, n)
				}
			}
		})
	}
}

// slackReceiver is a Slack incoming webhook for the alerts: it keeps the
// text of every message it gets.
type slackReceiver struct {
	srv  *httptest.Server
	mu   sync.Mutex
	msgs []string
}

func newSlackReceiver(t *testing.T) *slackReceiver {
	r := &slackReceiver{}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var msg struct {
			Text string `json:"text"`
		}
		_ = json.NewDecoder(req.Body).Decode(&msg)
		r.mu.Lock()
		r.msgs = append(r.msgs, msg.Text)
		r.mu.Unlock()
	}))
	t.Cleanup(r.srv.Close)
	return r
}

// texts are the messages' texts so far.
func (r *slackReceiver) texts() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.msgs...)
}

// count is how many messages so far contain part.
func (r *slackReceiver) count(part string) int {
	n := 0
	for _, s := range r.texts() {
		if strings.Contains(s, part) {
			n++
		}
	}
	return n
}
