package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func writeSelfSigned(t *testing.T, certPath, keyPath, name string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(certPath, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// servedName is the common name of the certificate a new connection gets.
func servedName(t *testing.T, addr string) string {
	t.Helper()
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) // the test checks which certificate, not trust
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	return conn.ConnectionState().PeerCertificates[0].Subject.CommonName
}

// tlsGateway is serve with a tls section, started on fresh certificate
// files (common name "first").
type tlsGateway struct {
	addr, cert, key string
	logs            *syncBuffer
}

func startTLSGateway(t *testing.T, tlsExtra string, reload <-chan struct{}, check <-chan time.Time, checked func()) *tlsGateway {
	t.Helper()
	dir := t.TempDir()
	g := &tlsGateway{cert: filepath.Join(dir, "cert.pem"), key: filepath.Join(dir, "key.pem"), logs: &syncBuffer{}}
	writeSelfSigned(t, g.cert, g.key, "first")
	sink := newSink(t)
	cfgPath := writeConfig(t, "{kind: memory}", "", sink.srv.URL)
	raw, _ := os.ReadFile(cfgPath)
	cfg := "tls: {cert: " + g.cert + ", key: " + g.key + tlsExtra + "}\n" + string(raw)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	app := &App{Stdout: io.Discard, Stderr: g.logs, LookupEnv: env(nil), Clock: time.Now, Reload: reload, TLSCheck: check, TLSChecked: checked,
		Ready: func(public, _ string) { ready <- public }}
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, []string{"serve", "--config", cfgPath}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	select {
	case g.addr = <-ready:
	case err := <-done:
		t.Fatalf("serve: %v\n%s", err, g.logs.String())
	}
	if got := servedName(t, g.addr); got != "first" {
		t.Fatalf("served %q, want first", got)
	}
	return g
}

// With tls: {cert, key} the public listener serves HTTPS; a reload (SIGHUP)
// picks up new files, and a reload of broken files keeps the old pair.
func TestTLSListenerReloads(t *testing.T) {
	reload := make(chan struct{})
	g := startTLSGateway(t, "", reload, nil, nil)
	certPath, keyPath, addr, logs := g.cert, g.key, g.addr, g.logs
	writeSelfSigned(t, certPath, keyPath, "second")
	reload <- struct{}{}
	for deadline := time.Now().Add(10 * time.Second); servedName(t, addr) != "second"; {
		if time.Now().After(deadline) {
			t.Fatalf("the new certificate was never served\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := os.WriteFile(keyPath, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	reload <- struct{}{}
	for deadline := time.Now().Add(10 * time.Second); !strings.Contains(logs.String(), "reload failed"); {
		if time.Now().After(deadline) {
			t.Fatalf("no reload failure logged\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := servedName(t, addr); got != "second" {
		t.Fatalf("after a failed reload: served %q, want second", got)
	}
}

// Where no signal reloads (Windows), serve checks the files on a timer
// (tls.check_every): a check reloads a changed pair, leaves an unchanged
// one alone, and reports a broken pair once, not on every check.
func TestTLSTimedCheckReloadsChangedFiles(t *testing.T) {
	check := make(chan time.Time)
	checked := make(chan struct{})
	g := startTLSGateway(t, ", check_every: 1h", nil, check, func() { checked <- struct{}{} })
	// Each tick returns once its check is done, so the test never writes
	// the files while a check reads them (a check that saw a half-written
	// key would report it, and the next one would report it again).
	tick := func() { check <- time.Now(); <-checked }
	tick()
	if strings.Contains(g.logs.String(), "reload") {
		t.Fatalf("a check of unchanged files reloaded them\n%s", g.logs.String())
	}
	writeSelfSigned(t, g.cert, g.key, "second")
	tick()
	if got := servedName(t, g.addr); got != "second" {
		t.Fatalf("after a check of renewed files: served %q, want second\n%s", got, g.logs.String())
	}
	if err := os.WriteFile(g.key, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	tick()
	tick()
	if n := strings.Count(g.logs.String(), "reload failed"); n != 1 {
		t.Fatalf("a broken pair was reported %d times over two checks, want once\n%s", n, g.logs.String())
	}
	if got := servedName(t, g.addr); got != "second" {
		t.Fatalf("after a failed reload: served %q, want second", got)
	}
}

// tls.check_every runs the check on its own, with no signal and no test
// hook: a renewed pair is served without anyone asking.
func TestTLSCheckEveryReloadsByItself(t *testing.T) {
	g := startTLSGateway(t, ", check_every: 20ms", nil, nil, nil)
	writeSelfSigned(t, g.cert, g.key, "second")
	for deadline := time.Now().Add(10 * time.Second); servedName(t, g.addr) != "second"; {
		if time.Now().After(deadline) {
			t.Fatalf("the renewed certificate was never served\n%s", g.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}
