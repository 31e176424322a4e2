package signatures

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// The fetched-certificate and fetched-key schemes are tested against a local TLS server with a
// CA built here. Production code has no test hook: the host pins are compiled in. The test
// client's dialer sends every connection to the local server, and its TLS config trusts the test
// CA, which issued the server a certificate for the pinned names. So a URL passes the pin exactly
// as it would in production, and a URL on any other host is refused before the dialer is reached
// (the counting transport proves no request was made).

// testCA is a certificate authority for the tests.
type testCA struct {
	cert *x509.Certificate
	key  *rsa.PrivateKey
	pool *x509.CertPool
}

var (
	rsaKeysOnce sync.Once
	rsaKeys     []*rsa.PrivateKey
)

// testRSAKey hands out one of a few keys generated once: RSA generation is slow under -race.
func testRSAKey(t testing.TB, i int) *rsa.PrivateKey {
	t.Helper()
	rsaKeysOnce.Do(func() {
		for range 6 {
			k, err := rsa.GenerateKey(rand.Reader, 2048)
			if err != nil {
				panic(err)
			}
			rsaKeys = append(rsaKeys, k)
		}
	})
	return rsaKeys[i]
}

func newTestCA(t testing.TB, name string, key *rsa.PrivateKey) *testCA {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name},
		NotBefore: t0.Add(-24 * time.Hour), NotAfter: t0.Add(365 * 24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(c)
	return &testCA{cert: c, key: key, pool: pool}
}

// issue makes a leaf for key, valid from notBefore to notAfter, with the given DNS names.
func (ca *testCA) issue(t testing.TB, key crypto.PublicKey, cn string, dns []string, notBefore, notAfter time.Time) *x509.Certificate {
	t.Helper()
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, DNSNames: dns,
		NotBefore: notBefore, NotAfter: notAfter, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	c, _ := x509.ParseCertificate(der)
	return c
}

func pemOf(certs ...*x509.Certificate) []byte {
	var b []byte
	for _, c := range certs {
		b = append(b, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})...)
	}
	return b
}

// countingTransport records every request that reached the network layer.
type countingTransport struct {
	base *http.Transport
	mu   sync.Mutex
	urls []string
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	c.urls = append(c.urls, r.Method+" "+r.URL.String())
	c.mu.Unlock()
	return c.base.RoundTrip(r)
}

func (c *countingTransport) seen() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]string(nil), c.urls...)
}

// pkiEnv is a local TLS server answering for the pinned hosts, and a client that reaches it.
type pkiEnv struct {
	ca     *testCA // signs the server and the signing certificates
	srv    *httptest.Server
	tr     *countingTransport
	client *http.Client

	mu     sync.Mutex
	routes map[string]func(w http.ResponseWriter, r *http.Request) // host+path
}

var pinnedTestHosts = []string{"sns.us-east-1.amazonaws.com", "sns.cn-north-1.amazonaws.com.cn", "sns.us-gov-west-1.amazonaws.com",
	"api.paypal.com", "api-m.sandbox.paypal.com", "production.plaid.com", "sandbox.plaid.com",
	"evil.example.com", "sns.us-east-1.amazonaws.com.evil.com"}

func newPKIEnv(t testing.TB) *pkiEnv {
	t.Helper()
	e := &pkiEnv{ca: newTestCA(t, "Test Root CA", testRSAKey(t, 0)), routes: map[string]func(http.ResponseWriter, *http.Request){}}
	srvCert := e.ca.issue(t, &testRSAKey(t, 1).PublicKey, "test server", append([]string{"localhost"}, pinnedTestHosts...),
		time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
	e.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		e.mu.Lock()
		h := e.routes[r.Host+r.URL.Path]
		e.mu.Unlock()
		if h == nil {
			http.NotFound(w, r)
			return
		}
		h(w, r)
	}))
	e.srv.TLS = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{srvCert.Raw}, PrivateKey: testRSAKey(t, 1)}}}
	e.srv.StartTLS()
	addr := e.srv.Listener.Addr().String()
	base := &http.Transport{
		DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, network, addr)
		},
		TLSClientConfig: &tls.Config{RootCAs: e.ca.pool},
	}
	e.tr = &countingTransport{base: base}
	e.client = &http.Client{Transport: e.tr}
	t.Cleanup(func() {
		base.CloseIdleConnections()
		e.srv.Close()
	})
	return e
}

func (e *pkiEnv) route(hostPath string, h func(w http.ResponseWriter, r *http.Request)) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.routes[hostPath] = h
}

func (e *pkiEnv) serve(hostPath string, body []byte) {
	e.route(hostPath, func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(body) })
}

// fetcher is a Fetcher on the test client that trusts the test CA for signing certificates.
func (e *pkiEnv) fetcher(o FetcherOptions) *Fetcher {
	o.Client = e.client
	if o.Roots == nil {
		o.Roots = e.ca.pool
	}
	return NewFetcher(o)
}

// signingCert issues a signing certificate for key and serves it at https://hostPath.
func (e *pkiEnv) signingCert(t testing.TB, hostPath string, key *rsa.PrivateKey) string {
	t.Helper()
	cn := "sns.amazonaws.com"
	if strings.Contains(hostPath, "paypal.com/") {
		cn = "messageverificationcerts.paypal.com" // paypal checks the subject, as PayPal's SDKs do
	}
	c := e.ca.issue(t, &key.PublicKey, cn, nil, t0.Add(-time.Hour), t0.Add(30*24*time.Hour))
	e.serve(hostPath, pemOf(c))
	return "https://" + hostPath
}

// snsMessage is a test-side SNS message, signed independently of the verifier's code.
func snsSign(t testing.TB, key *rsa.PrivateKey, version string, fields map[string]string) []byte {
	t.Helper()
	var order []string
	switch fields["Type"] {
	case "Notification":
		order = []string{"Message", "MessageId", "Subject", "Timestamp", "TopicArn", "Type"}
	default:
		order = []string{"Message", "MessageId", "SubscribeURL", "Timestamp", "Token", "TopicArn", "Type"}
	}
	var b strings.Builder
	for _, k := range order {
		if v, ok := fields[k]; ok {
			b.WriteString(k + "\n" + v + "\n")
		}
	}
	var sig []byte
	var err error
	if version == "1" {
		h := sha1.Sum([]byte(b.String()))
		sig, err = rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA1, h[:])
	} else {
		h := sha256.Sum256([]byte(b.String()))
		sig, err = rsa.SignPKCS1v15(rand.Reader, key, crypto.SHA256, h[:])
	}
	if err != nil {
		t.Fatal(err)
	}
	doc := map[string]string{"SignatureVersion": version, "Signature": base64.StdEncoding.EncodeToString(sig)}
	for k, v := range fields {
		doc[k] = v
	}
	out, _ := json.Marshal(doc)
	return out
}

const snsTopic = "arn:aws:sns:us-east-1:123456789012:orders"

func snsNotification(certURL string) map[string]string {
	return map[string]string{"Type": "Notification", "MessageId": "22b80b92-fdea-4c2c-8f9d-bdfb0c7bf324",
		"TopicArn": snsTopic, "Subject": "Order shipped", "Message": "{\"order\":\"o-1\",\"note\":\"line\\nbreak é \\\"q\\\"\"}",
		"Timestamp": "2026-03-14T15:09:26.000Z", "SigningCertURL": certURL,
		"UnsubscribeURL": "https://sns.us-east-1.amazonaws.com/?Action=Unsubscribe&SubscriptionArn=" + snsTopic + ":x"}
}

func snsVerifier(t testing.TB, f *Fetcher, topics ...string) Scheme {
	t.Helper()
	if len(topics) == 0 {
		topics = []string{snsTopic}
	}
	s, err := New("sns", Config{Secrets: topics, Fetcher: f})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSNSSignVerify(t *testing.T) {
	e := newPKIEnv(t)
	key := testRSAKey(t, 2)
	certURL := e.signingCert(t, "sns.us-east-1.amazonaws.com/SimpleNotificationService-0123abcd.pem", key)
	v := snsVerifier(t, e.fetcher(FetcherOptions{}))
	for _, version := range []string{"1", "2"} {
		for _, subject := range []bool{true, false} {
			f := snsNotification(certURL)
			if !subject {
				delete(f, "Subject")
			}
			body := snsSign(t, key, version, f)
			r := &Request{Header: http.Header{"X-Amz-Sns-Message-Type": {"Notification"}}, Body: body}
			if err := v.Verify(r, t0); err != nil {
				t.Fatalf("v%s subject=%v: %v", version, subject, err)
			}
			// Flip a byte of each signed value: refused.
			for _, field := range [][2]string{{"o-1", "o-2"}, {"fdea", "fdeb"}, {"2026-03-14", "2026-03-15"}, {":orders", ":orderz"}, {"Order shipped", "Order shipper"}} {
				if !subject && field[0] == "Order shipped" {
					continue
				}
				c := strings.Replace(string(body), field[0], field[1], 1)
				if c == string(body) {
					t.Fatalf("%s not in body", field[0])
				}
				if err := v.Verify(&Request{Body: []byte(c)}, t0); err == nil {
					t.Fatalf("v%s: changed %s accepted", version, field)
				}
			}
		}
	}
	// Only one fetch for all of that: the certificate is cached by URL.
	if n := len(e.tr.seen()); n != 1 {
		t.Fatalf("%d fetches, want 1: %v", n, e.tr.seen())
	}
	// A null Subject is not signed, like an absent one.
	nullSubject := snsNotification(certURL)
	delete(nullSubject, "Subject")
	nb := snsSign(t, key, "2", nullSubject)
	nb = []byte(strings.Replace(string(nb), `{`, `{"Subject":null,`, 1))
	if err := v.Verify(&Request{Body: nb}, t0); err != nil {
		t.Fatalf("null Subject: %v", err)
	}
	// A v1 signature presented as v2 does not verify.
	body := snsSign(t, key, "1", snsNotification(certURL))
	body = []byte(strings.Replace(string(body), `"SignatureVersion":"1"`, `"SignatureVersion":"2"`, 1))
	if err := v.Verify(&Request{Body: body}, t0); !errors.Is(err, ErrNoMatch) {
		t.Fatalf("version swapped: %v", err)
	}
}

func TestSNSRefusals(t *testing.T) {
	e := newPKIEnv(t)
	key, other := testRSAKey(t, 2), testRSAKey(t, 3)
	certURL := e.signingCert(t, "sns.us-east-1.amazonaws.com/SimpleNotificationService-0123abcd.pem", key)
	v := snsVerifier(t, e.fetcher(FetcherOptions{}))
	good := snsNotification(certURL)

	t.Run("missing fields", func(t *testing.T) {
		for _, k := range []string{"Signature", "SigningCertURL", "Type", "SignatureVersion", "MessageId", "Timestamp", "TopicArn", "Message"} {
			var doc map[string]any
			_ = json.Unmarshal(snsSign(t, key, "2", good), &doc)
			delete(doc, k)
			b, _ := json.Marshal(doc)
			if err := v.Verify(&Request{Body: b}, t0); !errors.Is(err, ErrMissingHeader) {
				t.Errorf("without %s: %v", k, err)
			}
		}
		if err := v.Verify(&Request{}, t0); !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrMissingHeader) {
			t.Errorf("empty request: %v", err)
		}
	})
	t.Run("wrong key", func(t *testing.T) {
		if err := v.Verify(&Request{Body: snsSign(t, other, "2", good)}, t0); !errors.Is(err, ErrNoMatch) {
			t.Fatalf("signed by another key: %v", err)
		}
	})
	t.Run("malformed", func(t *testing.T) {
		for name, mut := range map[string]func(map[string]string){
			"version 3":     func(m map[string]string) { m["SignatureVersion"] = "3" },
			"unknown type":  func(m map[string]string) { m["Type"] = "Other" },
			"bad signature": func(m map[string]string) { m["Signature"] = "!!" },
		} {
			var m map[string]string
			_ = json.Unmarshal(snsSign(t, key, "2", good), &m)
			mut(m)
			b, _ := json.Marshal(m)
			if err := v.Verify(&Request{Body: b}, t0); !errors.Is(err, ErrMalformed) {
				t.Errorf("%s: %v", name, err)
			}
		}
		r := &Request{Header: http.Header{"X-Amz-Sns-Message-Type": {"SubscriptionConfirmation"}}, Body: snsSign(t, key, "2", good)}
		if err := v.Verify(r, t0); !errors.Is(err, ErrMalformed) {
			t.Errorf("type header disagrees: %v", err)
		}
	})
	t.Run("topic", func(t *testing.T) {
		f := snsNotification(certURL)
		f["TopicArn"] = "arn:aws:sns:us-east-1:999999999999:orders"
		before := len(e.tr.seen())
		if err := v.Verify(&Request{Body: snsSign(t, key, "2", f)}, t0); !errors.Is(err, ErrNoMatch) {
			t.Fatalf("other topic: %v", err)
		}
		if len(e.tr.seen()) != before {
			t.Fatal("a message for another topic caused a fetch")
		}
		for _, allowed := range [][]string{{"arn:aws:sns:us-east-1:1:x", snsTopic}, {"123456789012"}, {"*"}} {
			if err := snsVerifier(t, e.fetcher(FetcherOptions{}), allowed...).Verify(&Request{Body: snsSign(t, key, "2", good)}, t0); err != nil {
				t.Errorf("topics %v: %v", allowed, err)
			}
		}
		if _, err := New("sns", Config{Secrets: []string{"orders"}}); !errors.Is(err, ErrConfig) {
			t.Errorf("bare topic name: %v", err)
		}
	})
	t.Run("timestamp opt-in", func(t *testing.T) {
		late := t0.Add(time.Hour)
		if err := v.Verify(&Request{Body: snsSign(t, key, "2", good)}, late); err != nil {
			t.Fatalf("no tolerance set: %v", err)
		}
		s, _ := New("sns", Config{Secrets: []string{snsTopic}, Fetcher: e.fetcher(FetcherOptions{}), Tolerance: 5 * time.Minute})
		for _, now := range []time.Time{late, t0.Add(-time.Hour)} {
			if err := s.Verify(&Request{Body: snsSign(t, key, "2", good)}, now); !errors.Is(err, ErrStale) {
				t.Errorf("now %s: %v", now, err)
			}
		}
	})
}

// TestSNSCertificateHostPin: a certificate URL off the SNS hosts is refused without a request.
func TestSNSCertificateHostPin(t *testing.T) {
	e := newPKIEnv(t)
	key := testRSAKey(t, 2)
	e.signingCert(t, "evil.example.com/SimpleNotificationService-1.pem", key) // reachable, yet never asked
	v := snsVerifier(t, e.fetcher(FetcherOptions{}))
	for _, u := range []string{
		"https://evil.example.com/SimpleNotificationService-1.pem",
		"http://sns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem",
		"https://sns.us-east-1.amazonaws.com.evil.com/SimpleNotificationService-1.pem",
		"https://sns.us-east-1.amazonaws.com@evil.example.com/SimpleNotificationService-1.pem",
		"https://user@sns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem",
		"https://sns.us-east-1.amazonaws.com:8443/SimpleNotificationService-1.pem",
		"https://sns.us-east-1.amazonaws.com/SimpleNotificationService-1.txt",
		"https://sns.us-east-1.amazonaws.com/SimpleNotificationService-1.pem?x=1",
		"https://SNS.us-east-1.amazonaws.com/SimpleNotificationService-1.pem",
		"https://sns.amazonaws.com/SimpleNotificationService-1.pem",
		"https://s3.us-east-1.amazonaws.com/SimpleNotificationService-1.pem",
		"https://127.0.0.1/SimpleNotificationService-1.pem",
		"https://[::1]/SimpleNotificationService-1.pem",
		"file:///etc/passwd",
		"//sns.us-east-1.amazonaws.com/x.pem",
	} {
		err := v.Verify(&Request{Body: snsSign(t, key, "2", snsNotification(u))}, t0)
		if !errors.Is(err, ErrNoMatch) && !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", u, err)
		}
	}
	if seen := e.tr.seen(); len(seen) != 0 {
		t.Fatalf("the client was asked for %v", seen)
	}
	// China and GovCloud hosts are SNS hosts.
	for _, host := range []string{"sns.cn-north-1.amazonaws.com.cn", "sns.us-gov-west-1.amazonaws.com"} {
		u := e.signingCert(t, host+"/SimpleNotificationService-2.pem", key)
		if err := v.Verify(&Request{Body: snsSign(t, key, "2", snsNotification(u))}, t0); err != nil {
			t.Errorf("%s: %v", host, err)
		}
	}
}

// TestSNSCertificateChain: certificates that do not chain to the roots are refused.
func TestSNSCertificateChain(t *testing.T) {
	e := newPKIEnv(t)
	key := testRSAKey(t, 2)
	rogue := newTestCA(t, "Rogue CA", testRSAKey(t, 4))
	cases := map[string]*x509.Certificate{
		"other CA":    rogue.issue(t, &key.PublicKey, "sns.amazonaws.com", nil, t0.Add(-time.Hour), t0.Add(time.Hour)),
		"expired":     e.ca.issue(t, &key.PublicKey, "sns.amazonaws.com", nil, t0.Add(-48*time.Hour), t0.Add(-time.Hour)),
		"not yet":     e.ca.issue(t, &key.PublicKey, "sns.amazonaws.com", nil, t0.Add(time.Hour), t0.Add(48*time.Hour)),
		"self-signed": newTestCA(t, "sns.amazonaws.com", key).cert,
		// From the trusted CA, at a pinned URL, but issued to someone else: AWS's SDKs refuse it.
		"not issued to SNS": e.ca.issue(t, &key.PublicKey, "uploads.example.com", nil, t0.Add(-time.Hour), t0.Add(time.Hour)),
	}
	encOnly := e.ca.issue(t, &key.PublicKey, "sns.amazonaws.com", nil, t0.Add(-time.Hour), t0.Add(time.Hour))
	tmpl := *encOnly
	tmpl.KeyUsage = x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, &tmpl, e.ca.cert, &key.PublicKey, e.ca.key)
	if err != nil {
		t.Fatal(err)
	}
	cases["not for signatures"], _ = x509.ParseCertificate(der)
	v := snsVerifier(t, e.fetcher(FetcherOptions{}))
	for name, c := range cases {
		path := "sns.us-east-1.amazonaws.com/SimpleNotificationService-" + strings.ReplaceAll(name, " ", "") + ".pem"
		e.serve(path, pemOf(c))
		err := v.Verify(&Request{Body: snsSign(t, key, "2", snsNotification("https://"+path))}, t0)
		if !errors.Is(err, ErrNoMatch) {
			t.Errorf("%s: %v", name, err)
		}
	}
	// With an intermediate in the bundle, the chain verifies.
	inter := newTestCA(t, "Test Intermediate", testRSAKey(t, 5))
	interCert2, _ := x509.ParseCertificate(mustCA(t, e.ca, inter.key))
	leaf := (&testCA{cert: interCert2, key: inter.key}).issue(t, &key.PublicKey, "sns.amazonaws.com", nil, t0.Add(-time.Hour), t0.Add(time.Hour))
	e.serve("sns.us-east-1.amazonaws.com/SimpleNotificationService-bundle.pem", pemOf(leaf, interCert2))
	e.serve("sns.us-east-1.amazonaws.com/SimpleNotificationService-leafonly.pem", pemOf(leaf))
	if err := v.Verify(&Request{Body: snsSign(t, key, "2", snsNotification("https://sns.us-east-1.amazonaws.com/SimpleNotificationService-bundle.pem"))}, t0); err != nil {
		t.Errorf("leaf and intermediate: %v", err)
	}
	if err := v.Verify(&Request{Body: snsSign(t, key, "2", snsNotification("https://sns.us-east-1.amazonaws.com/SimpleNotificationService-leafonly.pem"))}, t0); !errors.Is(err, ErrNoMatch) {
		t.Errorf("leaf without its intermediate: %v", err)
	}
	// Default roots are the system's, which do not hold the test CA.
	sys := snsVerifier(t, NewFetcher(FetcherOptions{Client: e.client}))
	e.signingCert(t, "sns.us-east-1.amazonaws.com/SimpleNotificationService-ok.pem", key)
	if err := sys.Verify(&Request{Body: snsSign(t, key, "2", snsNotification("https://sns.us-east-1.amazonaws.com/SimpleNotificationService-ok.pem"))}, t0); !errors.Is(err, ErrNoMatch) {
		t.Errorf("test CA under system roots: %v", err)
	}
}

// mustCA makes an intermediate CA certificate for key under parent.
func mustCA(t *testing.T, parent *testCA, key *rsa.PrivateKey) []byte {
	t.Helper()
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(7), Subject: pkix.Name{CommonName: "Test Intermediate"},
		NotBefore: t0.Add(-time.Hour), NotAfter: t0.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent.cert, &key.PublicKey, parent.key)
	if err != nil {
		t.Fatal(err)
	}
	return der
}

func TestFetcherBounds(t *testing.T) {
	e := newPKIEnv(t)
	key := testRSAKey(t, 2)
	msg := func(path string) *Request {
		return &Request{Body: snsSign(t, key, "2", snsNotification("https://sns.us-east-1.amazonaws.com/"+path))}
	}
	t.Run("cache TTL and size", func(t *testing.T) {
		f := e.fetcher(FetcherOptions{TTL: time.Minute, MaxEntries: 2})
		v := snsVerifier(t, f)
		for _, p := range []string{"a.pem", "b.pem", "c.pem"} {
			e.signingCert(t, "sns.us-east-1.amazonaws.com/"+p, key)
		}
		start := len(e.tr.seen())
		for range 3 {
			if err := v.Verify(msg("a.pem"), t0); err != nil {
				t.Fatal(err)
			}
		}
		if n := len(e.tr.seen()) - start; n != 1 {
			t.Fatalf("%d fetches for a warm certificate", n)
		}
		if err := v.Verify(msg("a.pem"), t0.Add(61*time.Second)); err != nil {
			t.Fatal(err)
		}
		if n := len(e.tr.seen()) - start; n != 2 {
			t.Fatalf("expired entry not refetched: %d fetches", n)
		}
		for _, p := range []string{"b.pem", "c.pem"} {
			if err := v.Verify(msg(p), t0); err != nil {
				t.Fatal(err)
			}
		}
		f.mu.Lock()
		n := len(f.cache)
		f.mu.Unlock()
		if n > 2 {
			t.Fatalf("cache holds %d entries, bound 2", n)
		}
	})
	t.Run("response size", func(t *testing.T) {
		big := append(pemOf(e.ca.cert), make([]byte, 70<<10)...)
		e.serve("sns.us-east-1.amazonaws.com/big.pem", big)
		if err := snsVerifier(t, e.fetcher(FetcherOptions{})).Verify(msg("big.pem"), t0); !errors.Is(err, ErrMalformed) {
			t.Fatalf("oversized certificate: %v", err)
		}
	})
	t.Run("redirect off the pinned hosts", func(t *testing.T) {
		e.route("sns.us-east-1.amazonaws.com/redirect.pem", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://evil.example.com/SimpleNotificationService-1.pem", http.StatusFound)
		})
		e.signingCert(t, "evil.example.com/SimpleNotificationService-1.pem", key)
		start := len(e.tr.seen())
		if err := snsVerifier(t, e.fetcher(FetcherOptions{})).Verify(msg("redirect.pem"), t0); !errors.Is(err, ErrNoMatch) {
			t.Fatalf("redirect off-host: %v", err)
		}
		for _, u := range e.tr.seen()[start:] {
			if strings.Contains(u, "evil") {
				t.Fatalf("followed the redirect: %v", e.tr.seen()[start:])
			}
		}
		// A redirect to another SNS .pem is followed.
		e.route("sns.us-east-1.amazonaws.com/moved.pem", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://sns.us-east-1.amazonaws.com/a.pem", http.StatusFound)
		})
		if err := snsVerifier(t, e.fetcher(FetcherOptions{})).Verify(msg("moved.pem"), t0); err != nil {
			t.Fatalf("redirect within the pin: %v", err)
		}
	})
	t.Run("errors and timeouts are unavailable, not forged", func(t *testing.T) {
		e.route("sns.us-east-1.amazonaws.com/500.pem", func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, "oops", http.StatusInternalServerError)
		})
		release := make(chan struct{})
		e.route("sns.us-east-1.amazonaws.com/slow.pem", func(w http.ResponseWriter, r *http.Request) {
			select {
			case <-release:
			case <-r.Context().Done():
			}
			// A server that never answers: returning would send an empty
			// 200, which a loaded CI machine once let the fetcher read as
			// a certificate that is not PEM (a refusal, not a timeout).
			panic(http.ErrAbortHandler)
		})
		defer close(release)
		f := e.fetcher(FetcherOptions{Timeout: 200 * time.Millisecond})
		for _, p := range []string{"500.pem", "slow.pem"} {
			if err := snsVerifier(t, f).Verify(msg(p), t0); !errors.Is(err, ErrUnavailable) {
				t.Errorf("%s: %v", p, err)
			}
		}
		// A 404 means there is no such certificate: not authentic, not worth a retry.
		before := len(e.tr.seen())
		for range 3 {
			if err := snsVerifier(t, f).Verify(msg("missing.pem"), t0); !errors.Is(err, ErrNoMatch) {
				t.Errorf("missing.pem: %v", err)
			}
		}
		// ... and remembered for a minute: one fetch for three requests, another after it.
		if n := len(e.tr.seen()) - before; n != 1 {
			t.Errorf("missing.pem fetched %d times", n)
		}
		_ = snsVerifier(t, f).Verify(msg("missing.pem"), t0.Add(61*time.Second))
		if n := len(e.tr.seen()) - before; n != 2 {
			t.Errorf("refusal remembered past a minute: %d fetches", n)
		}
		// Failures are not cached: the next request tries again.
		start := len(e.tr.seen())
		_ = snsVerifier(t, f).Verify(msg("500.pem"), t0)
		if len(e.tr.seen()) == start {
			t.Error("a failed fetch was cached")
		}
	})
}

func snsConfirmation(certURL, subscribeURL string) map[string]string {
	return map[string]string{"Type": "SubscriptionConfirmation", "MessageId": "165545c9-2a5c-472c-8df2-7ff2be2b3b1b",
		"Token":    "2336412f37fb687f5d51e6e241d09c805a5a57b30d712f794cc5f6a988666d92768dd60a747ba6f3beb71854e285d6ad02428b09ceece29417f1f02d609c582afbacc99c583a916b9981dd2728f4ae6fdb82efd087cc3b7849e05798d2d2785c03b0879594eeac82c01f235d0e717736",
		"TopicArn": snsTopic, "Message": "You have chosen to subscribe to the topic " + snsTopic + ".\nTo confirm the subscription, visit the SubscribeURL included in this message.",
		"SubscribeURL": subscribeURL, "Timestamp": "2026-03-14T15:09:26.000Z", "SigningCertURL": certURL}
}

func TestSNSSubscriptionHandshake(t *testing.T) {
	e := newPKIEnv(t)
	key := testRSAKey(t, 2)
	certURL := e.signingCert(t, "sns.us-east-1.amazonaws.com/SimpleNotificationService-0123abcd.pem", key)
	var confirmed []string
	var mu sync.Mutex
	e.route("sns.us-east-1.amazonaws.com/", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		confirmed = append(confirmed, r.URL.RawQuery)
		mu.Unlock()
		_, _ = w.Write([]byte("<ConfirmSubscriptionResponse/>"))
	})
	sub := "https://sns.us-east-1.amazonaws.com/?Action=ConfirmSubscription&TopicArn=" + snsTopic + "&Token=2336412f"
	cfg := Config{Secrets: []string{snsTopic}, Fetcher: e.fetcher(FetcherOptions{})}
	hs := func(body []byte) (*HandshakeResponse, bool, error) {
		return Handshake("sns", cfg, &Request{Method: http.MethodPost, Header: http.Header{}, Body: body}, t0)
	}

	resp, ok, err := hs(snsSign(t, key, "1", snsConfirmation(certURL, sub)))
	if !ok || err != nil || resp.Status != http.StatusOK {
		t.Fatalf("confirmation: %v %v %+v", ok, err, resp)
	}
	if len(confirmed) != 1 || !strings.Contains(confirmed[0], "Action=ConfirmSubscription") {
		t.Fatalf("SubscribeURL requests: %v", confirmed)
	}

	// Refusals: not confirmed, nothing fetched beyond the certificate.
	start := len(e.tr.seen())
	forged := snsSign(t, testRSAKey(t, 3), "1", snsConfirmation(certURL, sub))
	offHost := snsSign(t, key, "1", snsConfirmation(certURL, "https://evil.example.com/?Action=ConfirmSubscription"))
	notConfirm := snsSign(t, key, "1", snsConfirmation(certURL, "https://sns.us-east-1.amazonaws.com/?Action=DeleteTopic"))
	for name, b := range map[string][]byte{"forged": forged, "SubscribeURL off-host": offHost, "other action": notConfirm} {
		if _, ok, err := hs(b); !ok || !errors.Is(err, ErrNoMatch) {
			t.Errorf("%s: %v %v", name, ok, err)
		}
	}
	if len(confirmed) != 1 || len(e.tr.seen()) != start {
		t.Fatalf("refused confirmations made requests: %v", e.tr.seen()[start:])
	}
	// SNS answering an error: 503 so it retries, not 401.
	e.route("sns.us-gov-west-1.amazonaws.com/", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) })
	resp, ok, err = hs(snsSign(t, key, "1", snsConfirmation(certURL, "https://sns.us-gov-west-1.amazonaws.com/?Action=ConfirmSubscription&Token=x")))
	if !ok || err != nil || resp.Status != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("failed confirmation: %v %v %+v", ok, err, resp)
	}
	// UnsubscribeConfirmation: verified and acknowledged, no GET.
	un := snsConfirmation(certURL, sub)
	un["Type"] = "UnsubscribeConfirmation"
	before := len(confirmed)
	if resp, ok, err := hs(snsSign(t, key, "2", un)); !ok || err != nil || resp.Status != http.StatusOK || len(confirmed) != before {
		t.Fatalf("unsubscribe: %v %v %+v", ok, err, resp)
	}
	// A Notification is not a handshake.
	if _, ok, _ := hs(snsSign(t, key, "2", snsNotification(certURL))); ok {
		t.Fatal("notification taken as a handshake")
	}
	if _, err := NewSigner("sns", cfg); !errors.Is(err, ErrConfig) {
		t.Fatalf("NewSigner(sns): %v", err)
	}
}

// TestSNSPublishedVector: a notification signed by SNS itself, from aws-sdk-java-v2's tests.
func TestSNSPublishedVector(t *testing.T) {
	body, err := os.ReadFile("testdata/sns/aws-sdk-java-v2-sample-message.json")
	if err != nil {
		t.Fatal(err)
	}
	pemBytes, err := os.ReadFile("testdata/sns/aws-sdk-java-v2-unit-test-public-cert.pem")
	if err != nil {
		t.Fatal(err)
	}
	e := newPKIEnv(t)
	e.serve("sns.us-east-1.amazonaws.com/SimpleNotificationService-bb750dd426d95ee9390147a5624348ee.pem", pemBytes)
	blk, _ := pem.Decode(pemBytes)
	leaf, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf) // its 2015 Symantec issuer is no longer trusted; trust the leaf itself
	at := time.Date(2015, 9, 20, 1, 22, 14, 0, time.UTC)
	v := snsVerifier(t, e.fetcher(FetcherOptions{Roots: roots}), "arn:aws:sns:us-east-1:810605503585:just_testing")
	if err := v.Verify(&Request{Body: body}, at); err != nil {
		t.Fatalf("SNS-signed message rejected: %v", err)
	}
	for _, c := range [][2]string{{`"boo"`, `"bop"`}, {"this is raw", "this is ram"}, {"01:22:14.001Z", "01:22:14.002Z"}} {
		changed := strings.Replace(string(body), c[0], c[1], 1)
		if err := v.Verify(&Request{Body: []byte(changed)}, at); !errors.Is(err, ErrNoMatch) {
			t.Errorf("%s → %s: %v", c[0], c[1], err)
		}
	}
	// Unsigned parts (MessageAttributes, UnsubscribeURL) are not covered, as AWS documents.
	if err := v.Verify(&Request{Body: []byte(strings.Replace(string(body), "realtime", "delayed", 1))}, at); err != nil {
		t.Errorf("MessageAttributes are not signed, yet: %v", err)
	}
	// After the certificate's NotAfter the chain no longer verifies.
	late := snsVerifier(t, e.fetcher(FetcherOptions{Roots: roots}), "*")
	if err := late.Verify(&Request{Body: body}, time.Date(2017, 1, 1, 0, 0, 0, 0, time.UTC)); !errors.Is(err, ErrNoMatch) {
		t.Errorf("expired certificate: %v", err)
	}
}
