//go:build unix

package redis

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	cryptorand "crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/storetest"
	"github.com/replyonce/gateway/stores/testservers"
)

func TestTopologyFromConfig(t *testing.T) {
	ca := writeCA(t)
	cases := []struct {
		name string
		url  string
		c    Config
		want string // in String()
		kind string
	}{
		{name: "server", url: "redis://127.0.0.1:6379/2", want: "Redis server 127.0.0.1:6379 (db 2), writes do not wait for replicas", kind: "server"},
		{name: "server with credentials and tls from the config", url: "redis://redis.internal:6380/0",
			c:    Config{Username: "gateway", Password: "s3cret", TLS: TLS{Enabled: true, CAFile: ca.certFile}},
			want: "Redis server redis.internal:6380 (db 0), user gateway, TLS", kind: "server"},
		{name: "rediss url", url: "rediss://gateway:s3cret@redis.internal:6380/1", want: "user gateway, TLS", kind: "server"},
		{name: "cluster", c: Config{Cluster: []string{"10.0.0.1:6379", "10.0.0.2:6379"}, Username: "gw", Password: "pw", Replicas: 1},
			want: "Redis Cluster (seeds 10.0.0.1:6379, 10.0.0.2:6379), user gw, writes wait for 1 replica (1s)", kind: "cluster"},
		{name: "cluster with one seed", c: Config{Cluster: []string{"redis-cluster:6379"}, TLS: TLS{Enabled: true}, Replicas: 2, ReplicasTimeout: 250 * time.Millisecond},
			want: "Redis Cluster (seeds redis-cluster:6379), TLS, writes wait for 2 replicas (250ms)", kind: "cluster"},
		{name: "sentinel", c: Config{Sentinel: Sentinel{Master: "ledger", Addrs: []string{"s1:26379", "s2:26379"}, Password: "sentinel-pw"}, Password: "pw", DB: 3},
			want: `Redis via Sentinel (master "ledger", sentinels s1:26379, s2:26379, db 3)`, kind: "sentinel"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			top, err := tc.c.Topology(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			s := top.String()
			if !strings.Contains(s, tc.want) {
				t.Errorf("String() = %q, want it to contain %q", s, tc.want)
			}
			for _, secret := range []string{"s3cret", "pw"} {
				if strings.Contains(s, secret) {
					t.Errorf("String() = %q shows a password", s)
				}
			}
			got := map[bool]string{top.Server != nil: "server", top.Cluster != nil: "cluster", top.Sentinel != nil: "sentinel"}[true]
			if got != tc.kind {
				t.Fatalf("topology is a %s, want a %s", got, tc.kind)
			}
			client := top.NewClient()
			defer client.Close()
			if !honoursContext(client) {
				t.Error("the client does not end calls with their context")
			}
		})
	}

	top, err := Config{Cluster: []string{"a:1"}, Username: "u", Password: "p", TLS: TLS{Enabled: true, CAFile: ca.certFile, ServerName: "redis.internal"}}.Topology("")
	if err != nil {
		t.Fatal(err)
	}
	o := top.Cluster
	if o.Username != "u" || o.Password != "p" || o.TLSConfig == nil || o.TLSConfig.RootCAs == nil || o.TLSConfig.ServerName != "redis.internal" ||
		!o.ContextTimeoutEnabled || o.PoolSize < 64 {
		t.Fatalf("cluster options %+v", o)
	}
	top, err = Config{Sentinel: Sentinel{Master: "m", Addrs: []string{"s:26379"}, Username: "su", Password: "sp"}, Username: "u", Password: "p", DB: 1}.Topology("")
	if err != nil {
		t.Fatal(err)
	}
	if f := top.Sentinel; f.MasterName != "m" || f.SentinelUsername != "su" || f.SentinelPassword != "sp" || f.Username != "u" || f.Password != "p" || f.DB != 1 {
		t.Fatalf("failover options %+v", f)
	}
	// A wait longer than go-redis's read timeout must not be cut short
	// by it.
	top, err = Config{Cluster: []string{"a:1"}, Replicas: 1, ReplicasTimeout: 10 * time.Second}.Topology("")
	if err != nil || top.Cluster.ReadTimeout < 10*time.Second {
		t.Fatalf("read timeout %s with a 10s wait for replicas (%v)", top.Cluster.ReadTimeout, err)
	}
}

// Every configuration the store cannot use is refused with the field at
// fault, before anything dials: `gateway check` relies on it.
func TestTopologyRefuses(t *testing.T) {
	ca := writeCA(t)
	notPEM := filepath.Join(t.TempDir(), "not.pem")
	if err := os.WriteFile(notPEM, []byte("hello"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		url   string
		c     Config
		field string
	}{
		{"nothing", "", Config{}, "url"},
		{"two deployments", "redis://a:1", Config{Cluster: []string{"b:2"}}, "redis"},
		{"cluster and sentinel", "", Config{Cluster: []string{"b:2"}, Sentinel: Sentinel{Master: "m", Addrs: []string{"c:3"}}}, "redis"},
		{"cluster url scheme", "redis+cluster://a:1,b:2", Config{}, "url"},
		{"http url", "http://a:1", Config{}, "url"},
		{"unknown url option", "redis://a:1?pool_siz=3", Config{}, "url"},
		{"bad db in url", "redis://a:1/x", Config{}, "url"},
		{"credentials twice", "redis://u:p@a:1", Config{Password: "q"}, "redis.password"},
		{"db twice", "redis://a:1/1", Config{DB: 2}, "redis.db"},
		{"tls on a plain url", "redis://a:1", Config{TLS: TLS{CAFile: ca.certFile}}, "redis.tls"},
		{"cluster seed without port", "", Config{Cluster: []string{"a:1", "b"}}, "redis.cluster[1]"},
		{"cluster seed with a bad port", "", Config{Cluster: []string{"a:99999"}}, "redis.cluster[0]"},
		{"cluster db", "", Config{Cluster: []string{"a:1"}, DB: 1}, "redis.db"},
		{"cluster tls not enabled", "", Config{Cluster: []string{"a:1"}, TLS: TLS{ServerName: "x"}}, "redis.tls"},
		{"sentinel without master", "", Config{Sentinel: Sentinel{Addrs: []string{"a:1"}}}, "redis.sentinel.master"},
		{"sentinel without addrs", "", Config{Sentinel: Sentinel{Master: "m"}}, "redis.sentinel.addrs"},
		{"sentinel bad addr", "", Config{Sentinel: Sentinel{Master: "m", Addrs: []string{":1"}}}, "redis.sentinel.addrs[0]"},
		{"missing ca", "", Config{Cluster: []string{"a:1"}, TLS: TLS{Enabled: true, CAFile: "/nonexistent/ca.pem"}}, "redis.tls.ca_file"},
		{"ca not pem", "", Config{Cluster: []string{"a:1"}, TLS: TLS{Enabled: true, CAFile: notPEM}}, "redis.tls.ca_file"},
		{"cert without key", "", Config{Cluster: []string{"a:1"}, TLS: TLS{Enabled: true, CertFile: ca.certFile}}, "redis.tls"},
		{"key that is not the cert's", "", Config{Cluster: []string{"a:1"}, TLS: TLS{Enabled: true, CertFile: ca.certFile, KeyFile: notPEM}}, "redis.tls.cert_file"},
		{"negative replicas", "redis://a:1", Config{Replicas: -1}, "redis.replicas"},
		{"negative replicas timeout", "redis://a:1", Config{Replicas: 1, ReplicasTimeout: -time.Second}, "redis.replicas_timeout"},
		{"replicas timeout alone", "redis://a:1", Config{ReplicasTimeout: time.Second}, "redis.replicas_timeout"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.c.Topology(tc.url)
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Fatalf("Topology = %v, want a *FieldError", err)
			}
			if fe.Field != tc.field {
				t.Fatalf("field %q (%v), want %q", fe.Field, err, tc.field)
			}
			if strings.Contains(err.Error(), ":p@") {
				t.Fatalf("the error repeats the URL's password: %v", err)
			}
		})
	}
}

// TLS with a CA of our own and an ACL user, against a real server that
// refuses plain connections and the default user.
func TestTopologyTLSAndACL(t *testing.T) {
	ca := writeCA(t)
	srv := testservers.Redis(t, "--port", "0", "--tls-port", "PORT",
		"--tls-cert-file", ca.serverCert, "--tls-key-file", ca.serverKey, "--tls-ca-cert-file", ca.certFile,
		"--tls-auth-clients", "no",
		"--user", "default", "off",
		// The least the store needs, as docs/scaling.md gives it.
		"--user", "gateway", "on", ">gateway-secret", "~replyonce:*", "resetchannels", "-@all",
		"+@read", "+@write", "+@scripting", "+@transaction", "+@connection", "+wait", "+cluster|slots", "+cluster|shards")
	ctx := ctxT(t)
	url := "redis://" + srv.Addr() + "/0"

	good := Config{Username: "gateway", Password: "gateway-secret", TLS: TLS{Enabled: true, CAFile: ca.certFile}}
	top, err := good.Topology(url)
	if err != nil {
		t.Fatal(err)
	}
	s, err := top.Open(ctx, Options{})
	if err != nil {
		t.Fatalf("open over TLS as gateway: %v", err)
	}
	defer s.Close()
	storetestSmoke(t, s)
	// Every store operation works with no more rights than these.
	client := s.client
	storetest.Run(t, func(t *testing.T) ledger.Store {
		prefix := fmt.Sprintf("replyonce:%016x:", rand.Uint64())
		t.Cleanup(func() { deletePrefix(t, client, prefix) })
		return New(client, Options{KeyPrefix: prefix})
	})

	for name, c := range map[string]Config{
		"wrong password": {Username: "gateway", Password: "nope", TLS: good.TLS},
		"default user":   {TLS: good.TLS},
		"no tls":         {Username: "gateway", Password: "gateway-secret"},
		"unknown ca":     {Username: "gateway", Password: "gateway-secret", TLS: TLS{Enabled: true}},
	} {
		top, err := c.Topology(url)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if s, err := top.Open(ctx, Options{}); err == nil {
			_ = s.Close()
			t.Errorf("%s: Open succeeded", name)
		} else if strings.Contains(err.Error(), "gateway-secret") {
			t.Errorf("%s: the error shows the password: %v", name, err)
		}
	}
}

// A master found through Sentinel.
func TestTopologySentinel(t *testing.T) {
	master := testservers.Redis(t)
	sentinel := testservers.Sentinel(t, "ledger", master)
	top, err := Config{Sentinel: Sentinel{Master: "ledger", Addrs: []string{sentinel.Addr()}}}.Topology("")
	if err != nil {
		t.Fatal(err)
	}
	s, err := top.Open(ctxT(t), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	storetestSmoke(t, s)
	mc := master.Client()
	defer mc.Close()
	if n, err := mc.DBSize(ctxT(t)).Result(); err != nil || n == 0 {
		t.Fatalf("the master holds %d keys (%v): the store did not write there", n, err)
	}
}

// storetestSmoke writes and reads one scope: enough to show the store
// reaches a server it opened.
func storetestSmoke(t *testing.T, s *Store) {
	t.Helper()
	ctx := ctxT(t)
	if err := increment(ctx, s, "smoke"); err != nil {
		t.Fatal(err)
	}
	doc, err := s.Read(ctx, "smoke")
	if err != nil || decodeCounter(t, doc).N != 1 {
		t.Fatalf("read back %q, %v", doc, err)
	}
}

// testCA is a certificate authority and a server certificate for
// 127.0.0.1 that it signed, in PEM files.
type testCA struct {
	certFile, serverCert, serverKey string
}

func writeCA(t *testing.T) testCA {
	t.Helper()
	dir := t.TempDir()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), cryptorand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "replyonce test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(cryptorand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, err := ecdsa.GenerateKey(elliptic.P256(), cryptorand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	srvTmpl := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage: x509.KeyUsageDigitalSignature}
	srvDER, err := x509.CreateCertificate(cryptorand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(srvKey)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, kind string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	return testCA{
		certFile:   write("ca.pem", "CERTIFICATE", caDER),
		serverCert: write("server.pem", "CERTIFICATE", srvDER),
		serverKey:  write("server-key.pem", "EC PRIVATE KEY", keyDER),
	}
}
