package main

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Three instances on Postgres and on Redis: events sent 0, 50 and 200 ms
// after `gateway sources pause` returns, to every instance, are delivered
// by none of them; `resume` delivers each once. The pause answers only
// once every instance's dispatcher has stopped the source, and says so.
func TestPauseStopsEveryInstance(t *testing.T) {
	stores := sharedStoreConfigs(t)
	for _, name := range []string{"postgres", "redis", "redis-cluster"} {
		store, ok := stores[name]
		if !ok {
			t.Logf("%s: skipped, REPLYONCE_TEST_%s is not set", name, strings.ToUpper(strings.ReplaceAll(name, "-", "_")))
			continue
		}
		t.Run(name, func(t *testing.T) {
			agent := newRestartableAgent(t)
			agent.start(t)
			cfg := writeConfig(t, store, "      mode: queued\n      concurrency: 8\n", "http://"+agent.addr)
			instances := []*gateway{startGateway(t, cfg), startGateway(t, cfg), startGateway(t, cfg)}
			client := newClient(t)
			prefix := fmt.Sprintf("evt_pause3_%s_%d_", name, time.Now().UnixNano())

			// Every instance delivers before the pause: each one's
			// dispatcher is running and hands events over.
			for i, g := range instances {
				id := prefix + "before_" + fmt.Sprint(i)
				body, header := stripeEvent(t, id, nil)
				if r := post(t, client, g.hook("stripe"), body, header); r.status != 202 {
					t.Fatalf("accept %s: %d %v", id, r.status, r.body)
				}
				waitFor(t, id+" delivered", func() bool { return agent.counts()[id] == 1 })
			}

			asked := time.Now()
			out := runCLI(t, instances[0], "sources", "pause", "stripe")
			returned := time.Now()
			t.Logf("%s: the pause answered after %v (a measure, not asserted):\n%s", name, returned.Sub(asked).Round(time.Millisecond), out)
			if !strings.Contains(out, "paused on 3 instances") {
				t.Fatalf("pause did not wait for the three instances:\n%s", out)
			}
			var sent []string
			for _, after := range []time.Duration{0, 50 * time.Millisecond, 200 * time.Millisecond} {
				time.Sleep(time.Until(returned.Add(after)))
				for i, g := range instances {
					id := fmt.Sprintf("%safter_%dms_%d", prefix, after.Milliseconds(), i)
					body, header := stripeEvent(t, id, nil)
					if r := post(t, client, g.hook("stripe"), body, header); r.status != 202 || r.body["status"] != "queued" {
						t.Fatalf("accept %s: %d %v", id, r.status, r.body)
					}
					sent = append(sent, id)
				}
			}
			// Several sweeps (1 s each) for any instance to deliver what
			// it should not; then nothing may have reached the agent.
			time.Sleep(3 * time.Second)
			counts := agent.counts()
			for _, id := range sent {
				if n := counts[id]; n != 0 {
					t.Errorf("%s: sent after pause returned, delivered %d times while paused", id, n)
				}
				if st := deliveryStatus(t, instances[0], id); st != "queued" {
					t.Errorf("%s: %s while paused, want queued", id, st)
				}
			}
			if t.Failed() {
				t.FailNow()
			}

			runCLI(t, instances[1], "sources", "resume", "stripe")
			for _, id := range sent {
				waitFor(t, id+" delivered after resume", func() bool { return deliveryStatus(t, instances[2], id) == "delivered" })
			}
			counts = agent.counts()
			for _, id := range sent {
				if n := counts[id]; n != 1 {
					t.Errorf("%s: delivered %d times after resume, want 1", id, n)
				}
			}
		})
	}
}
