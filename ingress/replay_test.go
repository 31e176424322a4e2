package ingress_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/signatures"
	"github.com/replyonce/gateway/stores/storetest/backends"
)

// replayGateway is one gateway process on a shared store.
type replayGateway struct {
	srv     *httptest.Server
	metrics *prometheus.Registry
}

func newReplayGateway(t *testing.T, store ledger.Store, clock *testClock, sinkURL string, mode dispatch.Mode, refuse *bool) *replayGateway {
	t.Helper()
	src, err := ingress.NewSource(githubSource("github", func(c *ingress.SourceConfig) {
		c.Forward.URL = sinkURL + "/events"
		c.Forward.Queue.Mode = mode
		c.RefuseReplays = refuse
	}))
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	fclient := forward.NewClient(forward.ClientOptions{})
	t.Cleanup(fclient.CloseIdleConnections)
	gw, err := ingress.New(ingress.Options{Sources: []*ingress.Source{src}, Ledger: ledger.New(store, ledger.Options{Clock: clock.Now}),
		Forwarder: forward.New(fclient, time.Now), Clock: clock.Now, Metrics: ingress.NewMetrics(reg)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(gw)
	t.Cleanup(func() {
		srv.Close()
		gw.Wait()
	})
	return &replayGateway{srv: srv, metrics: reg}
}

// postCopy posts one signed GitHub body with the given X-GitHub-Delivery:
// the signature covers the body only, so a copy verifies whatever the id.
func postCopy(t *testing.T, url string, body []byte, sig, id string) reply {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/hooks/github", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header = githubHeader(id)
	req.Header.Set("X-Hub-Signature-256", sig)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b bytes.Buffer
	_, _ = b.ReadFrom(resp.Body)
	return reply{Status: resp.StatusCode, Header: resp.Header, Body: b.Bytes()}
}

// One signed GitHub body, captured and resent with fresh X-GitHub-Delivery
// values, reaches the agent once: every copy is answered 200 duplicate
// (outcome replay) and counted, inline and queued, on every store, whether
// the copies go to the same gateway or to another sharing the store. The
// provider's own redelivery (same id, same body) is an ordinary duplicate,
// and refuse_replays: false turns the check off.
func TestReplayedContentIsADuplicate(t *testing.T) {
	for _, b := range backends.All(t) {
		for _, mode := range []dispatch.Mode{dispatch.ModeInline, dispatch.ModeQueued} {
			t.Run(b.Name+"/"+string(mode), func(t *testing.T) {
				store, another := b.Open(t)
				clock := &testClock{}
				sink := newSink(t)
				g1 := newReplayGateway(t, store, clock, sink.URL, mode, nil)
				g2 := newReplayGateway(t, another(), clock, sink.URL, mode, nil)
				hdr := githubHeader("d-original")
				body := sign(t, "github", signatures.Config{Secrets: []string{githubSecret}}, clock.Now(), http.MethodPost, "", hdr, githubBody("original"))
				sig := hdr.Get("X-Hub-Signature-256")

				first := postCopy(t, g1.srv.URL, body, sig, "d-original")
				want := "delivered"
				if mode == dispatch.ModeQueued {
					want = "queued"
				}
				if first.Status >= 300 || first.answer(t).Status != want {
					t.Fatalf("original: %s", first)
				}
				for i, gw := range []*replayGateway{g1, g2, g1} {
					id := "d-copy-" + string(rune('a'+i))
					r := postCopy(t, gw.srv.URL, body, sig, id)
					if a := r.answer(t); r.Status != http.StatusOK || a.Status != "duplicate" || a.Outcome != "replay" || a.EventID != id {
						t.Fatalf("copy %s: %s, want 200 duplicate (replay)", id, r)
					}
				}
				// The provider's own redelivery of the original.
				if r := postCopy(t, g2.srv.URL, body, sig, "d-original"); r.Status != http.StatusOK || r.answer(t).Status != "duplicate" || r.answer(t).Outcome == "replay" {
					t.Fatalf("redelivery: %s, want an ordinary duplicate", r)
				}
				if n := replaysCounted(t, g1.metrics) + replaysCounted(t, g2.metrics); n != 3 {
					t.Errorf("replays counted: %v, want 3", n)
				}
				if mode == dispatch.ModeInline {
					if n := sink.totalCount(); n != 1 {
						t.Fatalf("the agent got %d requests, want 1", n)
					}
				}
				// Switched off for the source: the copies are new events again.
				off := false
				g3 := newReplayGateway(t, another(), clock, sink.URL, mode, &off)
				if r := postCopy(t, g3.srv.URL, body, sig, "d-copy-off"); r.Status >= 300 || r.answer(t).Status != want {
					t.Fatalf("copy with refuse_replays off: %s", r)
				}
			})
		}
	}
}

// replaysCounted reads replyonce_replays_refused_total from reg.
func replaysCounted(t *testing.T, reg *prometheus.Registry) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0.0
	for _, mf := range mfs {
		if mf.GetName() == "replyonce_replays_refused_total" {
			for _, m := range mf.GetMetric() {
				n += m.GetCounter().GetValue()
			}
		}
	}
	return n
}

// Which sources refuse replayed content by default follows from the
// registry: an event id read from a header the signature does not cover.
func TestReplayRefusalDefaults(t *testing.T) {
	for _, c := range []struct {
		provider string
		ids      []string
		want     bool
	}{
		{"github", nil, true},             // X-GitHub-Delivery, body-only signature
		{"shopify", nil, true},            // X-Shopify-Webhook-Id
		{"stripe", nil, false},            // {json:id}: signed
		{"standard-webhooks", nil, false}, // webhook-id is signed
		{"github", []string{"{json:hook_id}"}, false},
		{"stripe", []string{"{header:X-Request-Id}"}, true},
		{"stripe", []string{"{query:id}"}, true},
	} {
		secret := "s"
		if c.provider == "standard-webhooks" {
			secret = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
		}
		src, err := ingress.NewSource(ingress.SourceConfig{Name: "s", Provider: c.provider, EventID: c.ids,
			Signature: signatures.Config{Secrets: []string{secret}}, Forward: ingress.ForwardConfig{Target: forward.Target{URL: "http://127.0.0.1:9/"}}})
		if err != nil {
			t.Fatal(err)
		}
		if got := src.RefusesReplays(); got != c.want {
			t.Errorf("%s %v: refuses replays %v, want %v", c.provider, c.ids, got, c.want)
		}
	}
	// The providers a security review found replayable, by the registry's
	// own data: each refuses replays by default.
	for _, p := range []string{"github", "shopify", "twilio", "gitlab", "sentry", "linear"} {
		src, err := ingress.NewSource(ingress.SourceConfig{Name: "s", Provider: p,
			Signature: signatures.Config{Secrets: []string{"s"}, URL: "https://hooks.example.com/hooks/s"}, Forward: ingress.ForwardConfig{Target: forward.Target{URL: "http://127.0.0.1:9/"}}})
		if err != nil {
			t.Fatal(err)
		}
		if !src.RefusesReplays() {
			t.Errorf("%s does not refuse replays by default", p)
		}
	}
}
