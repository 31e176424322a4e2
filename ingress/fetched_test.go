package ingress_test

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"math/big"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
	if n := h.store.writes.Load(); n != 0 {
		t.Errorf("the challenge wrote %d ledger documents, want none", n)
	}
}

// fakeAWS answers pinned URLs in process: the signing certificate, and SubscribeURL GETs.
type fakeAWS struct {
	certURL string
	cert    []byte
	mu      sync.Mutex
	gets    []string
}

func (f *fakeAWS) RoundTrip(r *http.Request) (*http.Response, error) {
	f.mu.Lock()
	f.gets = append(f.gets, r.URL.String())
	f.mu.Unlock()
	body := "<ConfirmSubscriptionResponse/>"
	if r.URL.String() == f.certURL {
		body = string(f.cert)
	}
	return &http.Response{StatusCode: http.StatusOK, Body: io.NopCloser(strings.NewReader(body)), Header: http.Header{}, Request: r}, nil
}

// The SubscriptionConfirmation is verified, confirmed by a GET of its SubscribeURL, answered
// 200, and never reaches the ledger or the agent.
func TestSNSSubscriptionAtTheEdge(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "sns.amazonaws.com"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	aws := &fakeAWS{certURL: "https://sns.eu-west-1.amazonaws.com/SimpleNotificationService-x.pem",
		cert: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
	f := signatures.NewFetcher(signatures.FetcherOptions{Client: &http.Client{Transport: aws}, Roots: roots})
	const topic = "arn:aws:sns:eu-west-1:123456789012:orders"
	h := newHarness(t, ingress.SourceConfig{Name: "sns", Provider: "sns", Signature: signatures.Config{Secrets: []string{topic}, Fetcher: f}})

	sub := "https://sns.eu-west-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn=" + topic + "&Token=abc"
	fields := [][2]string{{"Message", "You have chosen to subscribe."}, {"MessageId", "m-sub"}, {"SubscribeURL", sub},
		{"Timestamp", "2026-03-14T15:09:26.000Z"}, {"Token", "abc"}, {"TopicArn", topic}, {"Type", "SubscriptionConfirmation"}}
	var signed strings.Builder
	doc := map[string]string{"SignatureVersion": "2", "SigningCertURL": aws.certURL}
	for _, kv := range fields {
		signed.WriteString(kv[0] + "\n" + kv[1] + "\n")
		doc[kv[0]] = kv[1]
	}
	sum := sha256.Sum256([]byte(signed.String()))
	sig, _ := rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, sum[:])
	doc["Signature"] = base64.StdEncoding.EncodeToString(sig)
	body, _ := json.Marshal(doc)
	hdr := http.Header{"Content-Type": {"text/plain; charset=UTF-8"}, "X-Amz-Sns-Message-Type": {"SubscriptionConfirmation"}}

	r := h.do(t, h.newRequest(t, http.MethodPost, "/hooks/sns", hdr, body))
	wantStatus(t, r, http.StatusOK)
	aws.mu.Lock()
	gets := append([]string(nil), aws.gets...)
	aws.mu.Unlock()
	if len(gets) != 2 || gets[0] != aws.certURL || gets[1] != sub {
		t.Fatalf("requests to AWS: %v", gets)
	}
	if h.sink.totalCount() != 0 {
		t.Errorf("the agent received %d requests", h.sink.totalCount())
	}
	if n := h.store.writes.Load(); n != 0 {
		t.Errorf("the confirmation wrote %d ledger documents, want none", n)
	}
	h.assertNothingRecorded(t, "sns:m-sub")

	// Signed by someone else: 401, and the SubscribeURL is not visited.
	forged := strings.Replace(string(body), doc["Signature"][:8], "AAAAAAAA", 1)
	wantStatus(t, h.do(t, h.newRequest(t, http.MethodPost, "/hooks/sns", hdr, []byte(forged))), http.StatusUnauthorized)
	aws.mu.Lock()
	defer aws.mu.Unlock()
	if len(aws.gets) != 2 {
		t.Fatalf("a forged confirmation was followed: %v", aws.gets)
	}
}

// monday.com's challenge POST is echoed as the same JSON at the edge and writes nothing.
func TestMondayChallengeAtTheEdge(t *testing.T) {
	h := newHarness(t, ingress.SourceConfig{Name: "monday", Provider: "monday",
		Signature: signatures.Config{Secrets: []string{"monday-signing-secret"}, URL: "https://hooks.example.com/hooks/monday"}})
	const body = `{"challenge":"3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P"}`
	r := h.do(t, h.newRequest(t, http.MethodPost, "/hooks/monday", http.Header{"Content-Type": {"application/json"}}, []byte(body)))
	wantStatus(t, r, http.StatusOK)
	if string(r.Body) != body || r.mediaType(t) != "application/json" {
		t.Fatalf("answer %q (%s)", r.Body, r.Header.Get("Content-Type"))
	}
	if n := h.store.writes.Load(); n != 0 {
		t.Errorf("the challenge wrote %d ledger documents, want none", n)
	}
	// An event without a valid JWT is refused.
	ev := `{"event":{"type":"create_pulse","triggerUuid":"t-1"}}`
	r = h.do(t, h.newRequest(t, http.MethodPost, "/hooks/monday", http.Header{"Content-Type": {"application/json"}}, []byte(ev)))
	wantStatus(t, r, http.StatusUnauthorized)
	if h.sink.totalCount() != 0 {
		t.Errorf("the agent received %d requests", h.sink.totalCount())
	}
	h.assertNothingRecorded(t, "monday:t-1")
}
