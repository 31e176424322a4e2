package ingress_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/signatures"
)

const twilioPublicURL = "https://gw.example.com/hooks/twilio"

func twilioForm(sid string) []byte {
	return []byte(url.Values{"MessageSid": {sid}, "MessageStatus": {"delivered"}, "Body": {"hello"}}.Encode())
}

// Twilio's SharedKey webhooks (HMAC-SHA256, named by X-Twilio-Webhooks-Signature-Settings) are
// delivered; one naming an algorithm the gateway lacks is refused with its own reason, in the
// log and in the answer, so the operator is not sent looking for a mangled header.
func TestTwilioSHA256DeliveredAndUnsupportedAlgorithmSaysSo(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	h := newLoggedHarness(t, zap.New(core), ingress.SourceConfig{Name: "twilio", Provider: "twilio",
		Signature: signatures.Config{Secrets: []string{"auth-token", "shared-key-secret"}, URL: twilioPublicURL}})
	now := h.clock.Now()

	hdr := http.Header{"Content-Type": {"application/x-www-form-urlencoded"},
		"X-Twilio-Webhooks-Signature-Settings": {"key=webhooks_sharedkey_1,algorithm=HMAC_SHA256"}}
	body := sign(t, "twilio", signatures.Config{Secrets: []string{"shared-key-secret"}, URL: twilioPublicURL}, now, http.MethodPost, "", hdr, twilioForm("SM256"))
	if r := h.do(t, h.newRequest(t, http.MethodPost, "/hooks/twilio", hdr, body)); r.Status != http.StatusOK || h.sink.count("SM256:delivered") != 1 {
		t.Fatalf("HMAC_SHA256 webhook: %s, %d forwards", r, h.sink.count("SM256:delivered"))
	}

	hdr.Set("X-Twilio-Webhooks-Signature-Settings", "key=webhooks_sharedkey_1,algorithm=HMAC_SHA512")
	r := h.do(t, h.newRequest(t, http.MethodPost, "/hooks/twilio", hdr, body))
	wantStatus(t, r, http.StatusUnauthorized)
	var answer struct{ Error, Reason string }
	if err := json.Unmarshal(r.Body, &answer); err != nil || answer.Reason != "unsupported_algorithm" {
		t.Errorf("answer %s, want reason unsupported_algorithm", r.Body)
	}
	lines := logs.FilterField(zap.String("reason", "signature_unsupported_algorithm")).All()
	if len(lines) != 1 {
		t.Errorf("log lines with reason signature_unsupported_algorithm: %d\n%v", len(lines), logs.All())
	}
	h.assertNothingRecorded(t, "twilio:SM512")
}
