package ingress_test

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"
	"time"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/internal/cputime"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/signatures"
	"github.com/replyonce/gateway/stores/memory"
)

// agentOK is an agent inside the process that answers 200 to everything:
// a loopback server would add the scheduler's noise on a shared machine
// to what the benchmark measures.
type agentOK struct{}

func (agentOK) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body != nil {
		_, _ = io.Copy(io.Discard, r.Body)
		_ = r.Body.Close()
	}
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
}

// benchWebhooks measures the whole handler for delivered GitHub events:
// verify, claim on a memory ledger, forward to an in-process agent,
// settle. The source delivers inline (queued delivery, the default, would
// answer before the forward). mod changes the gateway's options (tracing,
// in trace_bench_test).
func benchWebhooks(b *testing.B, mod func(*ingress.Options)) { benchWebhooksWith(b, nil, mod) }

// benchSource is benchWebhooks with the source's config changed by cfg.
func benchSource(b *testing.B, cfg func(*ingress.SourceConfig)) { benchWebhooksWith(b, cfg, nil) }

func benchWebhooksWith(b *testing.B, cfg func(*ingress.SourceConfig), mod func(*ingress.Options)) {
	src, err := ingress.NewSource(githubSource("gh", func(c *ingress.SourceConfig) {
		c.Forward.URL = "http://agent.invalid/events"
		c.Forward.Queue.Mode = dispatch.ModeInline
		if cfg != nil {
			cfg(c)
		}
	}))
	if err != nil {
		b.Fatal(err)
	}
	opts := ingress.Options{Sources: []*ingress.Source{src}, Ledger: ledger.New(memory.New(nil), ledger.Options{}),
		Forwarder: forward.New(&http.Client{Transport: agentOK{}}, time.Now)}
	if mod != nil {
		mod(&opts)
	}
	gw, err := ingress.New(opts)
	if err != nil {
		b.Fatal(err)
	}
	signer, err := signatures.NewSigner("github", signatures.Config{Secrets: []string{githubSecret}})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	cpu0, cpuMeasured := cputime.Self()
	b.ResetTimer()
	for i := range b.N {
		id := "bench-" + strconv.Itoa(i)
		hdr := githubHeader(id)
		hdr.Set("Traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
		r := &signatures.Request{Method: http.MethodPost, Header: hdr, Body: githubBody(id)}
		if err := signer.Sign(r, time.Now()); err != nil {
			b.Fatal(err)
		}
		req := httptest.NewRequest(http.MethodPost, "/hooks/gh", bytes.NewReader(r.Body))
		req.Header = hdr
		rec := httptest.NewRecorder()
		gw.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
	b.StopTimer()
	// CPU time of the whole process (span batching included) per webhook:
	// on a loaded machine it varies far less than wall time.
	if cpu1, _ := cputime.Self(); cpuMeasured {
		b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
	gw.Wait()
}

// BenchmarkWebhookUntraced is the handler with no tracer provider: the
// baseline that tracing off must not slow down.
func BenchmarkWebhookUntraced(b *testing.B) { benchWebhooks(b, nil) }
