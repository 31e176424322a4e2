package ingress_test

import (
	"errors"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/signatures"
)

type refusingTransport struct{ calls atomic.Int32 }

func (r *refusingTransport) RoundTrip(*http.Request) (*http.Response, error) {
	r.calls.Add(1)
	return nil, errors.New("network down")
}

// A certificate that cannot be fetched is a 503 (the provider retries); a certificate URL off
// the provider's hosts is a 401 and is never fetched. Neither reaches the ledger or the agent.
func TestFetchedCertificateAnswers(t *testing.T) {
	tr := &refusingTransport{}
	f := signatures.NewFetcher(signatures.FetcherOptions{Client: &http.Client{Transport: tr}})
	h := newHarness(t, ingress.SourceConfig{Name: "sns", Provider: "sns",
		Signature: signatures.Config{Secrets: []string{"arn:aws:sns:us-east-1:123456789012:orders"}, Fetcher: f}})
	body := func(certURL string) []byte {
		return []byte(`{"Type":"Notification","MessageId":"m-1","TopicArn":"arn:aws:sns:us-east-1:123456789012:orders",` +
			`"Message":"hi","Timestamp":"2026-03-14T15:09:26.000Z","SignatureVersion":"2","Signature":"AAAA",` +
			`"SigningCertURL":"` + certURL + `"}`)
	}
	hdr := http.Header{"Content-Type": {"text/plain; charset=UTF-8"}, "X-Amz-Sns-Message-Type": {"Notification"}}

	r := h.do(t, h.newRequest(t, http.MethodPost, "/hooks/sns", hdr, body("https://sns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem")))
	wantStatus(t, r, http.StatusServiceUnavailable)
	if r.retryAfter(t) <= 0 {
		t.Errorf("no Retry-After on %s", r)
	}
	if tr.calls.Load() != 1 {
		t.Errorf("%d fetch attempts, want 1", tr.calls.Load())
	}

	r = h.do(t, h.newRequest(t, http.MethodPost, "/hooks/sns", hdr, body("https://evil.example.com/SimpleNotificationService-1.pem")))
	wantStatus(t, r, http.StatusUnauthorized)
	if tr.calls.Load() != 1 {
		t.Errorf("a certificate off the SNS hosts was fetched")
	}
	if h.sink.totalCount() != 0 {
		t.Errorf("the agent received %d requests", h.sink.totalCount())
	}
	h.assertNothingRecorded(t, "sns:m-1")
}

// Braintree's bt_challenge arrives as a GET and is answered at the edge with the SDKs' published
// answer; it writes nothing.
func TestBraintreeChallengeAtTheEdge(t *testing.T) {
	h := newHarness(t, ingress.SourceConfig{Name: "bt", Provider: "braintree",
		Signature: signatures.Config{Secrets: []string{"integration_public_key:integration_private_key"}},
		EventID:   []string{"{form:bt_signature}"}})
	r := h.do(t, h.newRequest(t, http.MethodGet, "/hooks/bt?bt_challenge=20f9f8ed05f77439fe955c977e4c8a53", nil, nil))
	wantStatus(t, r, http.StatusOK)
	if string(r.Body) != "integration_public_key|d9b899556c966b3f06945ec21311865d35df3ce4" {
		t.Fatalf("body %q", r.Body)
	}
	r = h.do(t, h.newRequest(t, http.MethodGet, "/hooks/bt?bt_challenge=not-hex", nil, nil))
	wantStatus(t, r, http.StatusUnauthorized)
	if h.sink.totalCount() != 0 {
		t.Errorf("the agent received %d requests", h.sink.totalCount())
	}
}
