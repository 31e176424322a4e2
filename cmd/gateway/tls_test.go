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

// With tls: {cert, key} the public listener serves HTTPS; a reload (SIGHUP)
// picks up new files, and a reload of broken files keeps the old pair.
func TestTLSListenerReloads(t *testing.T) {
	dir := t.TempDir()
	certPath, keyPath := filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	writeSelfSigned(t, certPath, keyPath, "first")
	sink := newSink(t)
	cfgPath := writeConfig(t, "{kind: memory}", "", sink.srv.URL)
	raw, _ := os.ReadFile(cfgPath)
	cfg := "tls: {cert: " + certPath + ", key: " + keyPath + "}\n" + string(raw)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	reload := make(chan struct{})
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	logs := &syncBuffer{}
	app := &App{Stdout: io.Discard, Stderr: logs, LookupEnv: env(nil), Clock: time.Now, Reload: reload,
		Ready: func(public, _ string) { ready <- public }}
	done := make(chan error, 1)
	go func() { done <- app.Run(ctx, []string{"serve", "--config", cfgPath}) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve: %v", err)
		}
	})
	var addr string
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("serve: %v\n%s", err, logs.String())
	}
	if got := servedName(t, addr); got != "first" {
		t.Fatalf("served %q, want first", got)
	}
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
