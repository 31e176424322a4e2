package ingress_test

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
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

// BenchmarkEmbeddedSignatureHandler measures whole requests, not the verifier alone, for the
// two providers whose signature travels inside the body (Adyen's notification items,
// Braintree's form fields): read the body, verify, extract the event id, claim on a memory
// ledger, forward to an in-process agent, settle. Each request is a new event, signed before
// the timer starts; run it with -benchtime=Nx to bound the memory the signed requests take.
func BenchmarkEmbeddedSignatureHandler(b *testing.B) {
	for _, p := range []string{"adyen", "braintree"} {
		for _, size := range []int{1 << 10, 64 << 10} {
			b.Run(fmt.Sprintf("%s/%dKiB", p, size>>10), func(b *testing.B) { benchEmbedded(b, p, size) })
		}
	}
}

func benchEmbedded(b *testing.B, provider string, size int) {
	secret := map[string]string{"adyen": "44782DEF547AAA06C910C43932B1EB0C71FC68D9D0C057550C48EC2ACF6BA056",
		"braintree": "bench_public:bench_private"}[provider]
	cfg := signatures.Config{Secrets: []string{secret}}
	sc := ingress.SourceConfig{Name: provider, Provider: provider, Signature: cfg}
	sc.Forward.URL = "http://agent.invalid/events"
	sc.Forward.Queue.Mode = dispatch.ModeInline // the request waits for the forward and the settle
	src, err := ingress.NewSource(sc)
	if err != nil {
		b.Fatal(err)
	}
	gw, err := ingress.New(ingress.Options{Sources: []*ingress.Source{src}, Ledger: ledger.New(memory.New(nil), ledger.Options{}),
		Forwarder: forward.New(&http.Client{Transport: agentOK{}}, time.Now)})
	if err != nil {
		b.Fatal(err)
	}
	signer, err := signatures.NewSigner(provider, cfg)
	if err != nil {
		b.Fatal(err)
	}
	type signed struct {
		body []byte
		hdr  http.Header
	}
	reqs := make([]signed, b.N)
	for i := range reqs {
		hdr := http.Header{"Content-Type": {"application/json"}}
		r := &signatures.Request{Method: http.MethodPost, Header: hdr, Body: embeddedBody(provider, i, size)}
		if err := signer.Sign(r, time.Now()); err != nil {
			b.Fatal(err)
		}
		reqs[i] = signed{r.Body, r.Header}
	}
	b.SetBytes(int64(len(reqs[0].body)))
	b.ReportAllocs()
	cpu0, cpuMeasured := cputime.Self()
	b.ResetTimer()
	for _, s := range reqs {
		req := httptest.NewRequest(http.MethodPost, "/hooks/"+provider, bytes.NewReader(s.body))
		req.Header = s.hdr
		rec := httptest.NewRecorder()
		gw.ServeHTTP(rec, req)
		if rec.Code != http.StatusOK {
			b.Fatalf("status %d: %s", rec.Code, rec.Body)
		}
	}
	b.StopTimer()
	if cpu1, _ := cputime.Self(); cpuMeasured {
		b.ReportMetric(float64((cpu1-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
	gw.Wait()
}

// embeddedBody is event i of about size bytes: an Adyen notification whose item carries a long
// reason, or the Braintree notification XML with a long subject (the signer wraps it in the form).
func embeddedBody(provider string, i, size int) []byte {
	pad := strings.Repeat("x", max(size-420, 0))
	if provider == "adyen" {
		return fmt.Appendf(nil, `{"live":"false","notificationItems":[{"NotificationRequestItem":{"additionalData":{"authCode":"58747"},`+
			`"amount":{"currency":"EUR","value":1130},"eventCode":"AUTHORISATION","eventDate":"2026-03-14T15:09:26+01:00",`+
			`"merchantAccountCode":"BenchMerchant","merchantReference":"order-%d","pspReference":"PSP%016d",`+
			`"reason":"%s","success":"true"}}]}`, i, i, pad)
	}
	// The signer base64-encodes the XML, a third larger.
	pad = pad[:len(pad)*3/4]
	return fmt.Appendf(nil, `<notification><kind>subscription_charged_successfully</kind><timestamp type="datetime">2026-03-14T15:09:26Z</timestamp>`+
		`<subject><subscription><id>sub-%d</id><description>%s</description></subscription></subject></notification>`, i, pad)
}
