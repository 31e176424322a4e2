package redis

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// DefaultReplicasTimeout is how long a write waits for Config.Replicas
// replicas when Config.ReplicasTimeout is zero.
const DefaultReplicasTimeout = time.Second

// Config says which Redis deployment holds the ledger, how to log in to
// it, and how many replicas must have a write before it counts as done.
// The gateway reads it from store.redis; together with the store's URL it
// becomes a Topology.
//
// A deployment is exactly one of: a single server, named by the URL
// (redis://, rediss:// or unix://, with go-redis's query options); a Redis
// Cluster, named by Cluster's seed addresses; or a master watched by
// Sentinel, named by Sentinel.
type Config struct {
	// Cluster lists some of a Redis Cluster's nodes (host:port). The
	// client learns the rest, and follows failovers, from them.
	Cluster []string `yaml:"cluster"`
	// Sentinel names a master and the Sentinels that know where it is.
	Sentinel Sentinel `yaml:"sentinel"`

	// Username and Password log in to the data nodes (an ACL user; no
	// username is the default user). With a URL they may instead be in
	// the URL, not in both places.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
	// DB is the database number, for a single server (where the URL's
	// path may give it instead) or Sentinel. Cluster has only database 0.
	DB int `yaml:"db"`
	// TLS, when enabled (or the URL is rediss://), encrypts every
	// connection, to data nodes and Sentinels alike.
	TLS TLS `yaml:"tls"`

	// Replicas is how many replicas must have acknowledged a write
	// (Redis WAIT) before the store reports it done. 0 trusts the master
	// alone: a failover can then lose writes it acknowledged.
	Replicas int `yaml:"replicas"`
	// ReplicasTimeout bounds that wait; a write that has not reached
	// Replicas replicas by then fails (the gateway answers 503).
	// Default DefaultReplicasTimeout.
	ReplicasTimeout time.Duration `yaml:"replicas_timeout"`
}

// Sentinel names a master monitored by Redis Sentinel.
type Sentinel struct {
	Master string   `yaml:"master"` // the name the Sentinels know it by
	Addrs  []string `yaml:"addrs"`  // Sentinels (host:port)
	// Username and Password log in to the Sentinels themselves, when
	// they require it; Config's log in to the master.
	Username string `yaml:"username"`
	Password string `yaml:"password"`
}

func (s Sentinel) set() bool {
	return s.Master != "" || len(s.Addrs) > 0 || s.Username != "" || s.Password != ""
}

// TLS configures encrypted connections. The system's roots verify the
// server unless CAFile names others; CertFile and KeyFile present a
// client certificate to servers that ask for one.
type TLS struct {
	Enabled  bool   `yaml:"enabled"`
	CAFile   string `yaml:"ca_file"`
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ServerName is the name the servers' certificates must carry;
	// default: the host of each address dialled.
	ServerName string `yaml:"server_name"`
}

func (t TLS) set() bool {
	return t.Enabled || t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" || t.ServerName != ""
}

// FieldError is a problem with one setting. Field is its name within the
// store's configuration: "url", "redis.cluster[1]", "redis.tls.ca_file".
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return "store." + e.Field + ": " + e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// Topology is a Config made into go-redis's own options: exactly one of
// Server, Cluster and Sentinel is set. Its fields may be adjusted before
// Open.
type Topology struct {
	Server   *goredis.Options
	Cluster  *goredis.ClusterOptions
	Sentinel *goredis.FailoverOptions

	// Replicas and ReplicasTimeout are the Config's, defaults applied.
	Replicas        int
	ReplicasTimeout time.Duration
}

// Topology checks c together with the store's URL and returns the
// client options they describe. Every problem it finds is one
// *FieldError in the (joined) error. It reads the TLS files, so a
// configuration it accepts cannot fail later for a missing or malformed
// certificate; it does not dial.
func (c Config) Topology(url string) (*Topology, error) {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &FieldError{Field: field, Err: fmt.Errorf(format, args...)})
	}
	kinds := 0
	for _, set := range []bool{url != "", len(c.Cluster) > 0, c.Sentinel.set()} {
		if set {
			kinds++
		}
	}
	switch {
	case kinds == 0:
		bad("url", "required for the redis store, unless store.redis.cluster or store.redis.sentinel names the servers")
	case kinds > 1:
		bad("redis", "name one deployment: store.url (one server), store.redis.cluster or store.redis.sentinel, not several")
	}
	if c.Replicas < 0 {
		bad("redis.replicas", "must not be negative")
	}
	switch {
	case c.ReplicasTimeout < 0:
		bad("redis.replicas_timeout", "must not be negative")
	case c.ReplicasTimeout > 0 && c.Replicas == 0:
		bad("redis.replicas_timeout", "does nothing without store.redis.replicas")
	}
	t := &Topology{Replicas: max(c.Replicas, 0), ReplicasTimeout: c.ReplicasTimeout}
	if t.Replicas > 0 && t.ReplicasTimeout == 0 {
		t.ReplicasTimeout = DefaultReplicasTimeout
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	var tlsErr error
	tlsConfig := func(on bool, host string) *tls.Config {
		if !on {
			return nil
		}
		tc, err := c.TLS.config(host)
		if err != nil {
			tlsErr = err
		}
		return tc
	}
	switch {
	case url != "":
		o, err := goredis.ParseURL(url)
		if err != nil {
			// go-redis's messages name the scheme or option at fault;
			// the URL itself may carry a password and is not repeated.
			return nil, &FieldError{Field: "url", Err: err}
		}
		if c.Username != "" || c.Password != "" {
			if o.Username != "" || o.Password != "" {
				bad("redis.password", "the URL already has credentials: set them in one place")
			}
			o.Username, o.Password = c.Username, c.Password
		}
		if c.DB != 0 {
			bad("redis.db", "with a URL, give the database in the URL (redis://host:6379/%d)", c.DB)
		}
		if c.TLS.set() {
			if o.TLSConfig == nil && !c.TLS.Enabled {
				bad("redis.tls", "set enabled: true, or use a rediss:// URL")
			}
			insecure := o.TLSConfig != nil && o.TLSConfig.InsecureSkipVerify // the URL's skip_verify
			o.TLSConfig = tlsConfig(true, hostOf(o.Addr))
			if o.TLSConfig != nil {
				o.TLSConfig.InsecureSkipVerify = insecure
			}
		}
		t.Server = o
	case len(c.Cluster) > 0:
		for i, a := range c.Cluster {
			if err := checkAddr(a); err != nil {
				bad(fmt.Sprintf("redis.cluster[%d]", i), "%v", err)
			}
		}
		if c.DB != 0 {
			bad("redis.db", "Redis Cluster has only database 0")
		}
		t.Cluster = &goredis.ClusterOptions{
			Addrs:     c.Cluster,
			Username:  c.Username,
			Password:  c.Password,
			TLSConfig: tlsConfig(c.TLS.set(), ""), // each node checked against its own host
		}
		if c.TLS.set() && !c.TLS.Enabled {
			bad("redis.tls", "set enabled: true to use TLS")
		}
	default:
		s := c.Sentinel
		if s.Master == "" {
			bad("redis.sentinel.master", "required: the name the Sentinels monitor the master by")
		}
		if len(s.Addrs) == 0 {
			bad("redis.sentinel.addrs", "required: at least one Sentinel (host:port)")
		}
		for i, a := range s.Addrs {
			if err := checkAddr(a); err != nil {
				bad(fmt.Sprintf("redis.sentinel.addrs[%d]", i), "%v", err)
			}
		}
		if c.DB < 0 {
			bad("redis.db", "must not be negative")
		}
		t.Sentinel = &goredis.FailoverOptions{
			MasterName:       s.Master,
			SentinelAddrs:    s.Addrs,
			SentinelUsername: s.Username,
			SentinelPassword: s.Password,
			Username:         c.Username,
			Password:         c.Password,
			DB:               c.DB,
			TLSConfig:        tlsConfig(c.TLS.set(), ""),
		}
		if c.TLS.set() && !c.TLS.Enabled {
			bad("redis.tls", "set enabled: true to use TLS")
		}
	}
	if tlsErr != nil {
		errs = append(errs, tlsErr)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	t.defaults()
	return t, nil
}

// defaults sets what every client of the store needs: calls that end with
// their context, a pool as large as the gateway's concurrency, and a read
// timeout that lets a WAIT for replicas run its course.
func (t *Topology) defaults() {
	pool := max(64, 10*runtime.GOMAXPROCS(0))
	read := func(d *time.Duration) {
		// go-redis reads for 3s when unset; a WAIT answers after at most
		// ReplicasTimeout, plus the round trip.
		if t.Replicas > 0 && *d >= 0 && max(*d, 3*time.Second) < t.ReplicasTimeout+time.Second {
			*d = t.ReplicasTimeout + time.Second
		}
	}
	switch {
	case t.Server != nil:
		t.Server.ContextTimeoutEnabled = true
		if t.Server.PoolSize == 0 {
			t.Server.PoolSize = pool
		}
		read(&t.Server.ReadTimeout)
	case t.Cluster != nil:
		t.Cluster.ContextTimeoutEnabled = true
		if t.Cluster.PoolSize == 0 {
			t.Cluster.PoolSize = pool // per node
		}
		read(&t.Cluster.ReadTimeout)
	case t.Sentinel != nil:
		t.Sentinel.ContextTimeoutEnabled = true
		if t.Sentinel.PoolSize == 0 {
			t.Sentinel.PoolSize = pool
		}
		read(&t.Sentinel.ReadTimeout)
	}
}

// NewClient returns a go-redis client for the topology, without dialling.
func (t *Topology) NewClient() goredis.UniversalClient {
	switch {
	case t.Cluster != nil:
		return goredis.NewClusterClient(t.Cluster)
	case t.Sentinel != nil:
		return goredis.NewFailoverClient(t.Sentinel)
	}
	return goredis.NewClient(t.Server)
}

// String describes the topology for people, without credentials:
// "Redis Cluster (seeds a:6379, b:6379), user gateway, TLS, writes wait
// for 1 replica (1s)".
func (t *Topology) String() string {
	var parts []string
	var user string
	var tlsOn bool
	switch {
	case t.Cluster != nil:
		parts = append(parts, fmt.Sprintf("Redis Cluster (seeds %s)", strings.Join(t.Cluster.Addrs, ", ")))
		user, tlsOn = t.Cluster.Username, t.Cluster.TLSConfig != nil
	case t.Sentinel != nil:
		parts = append(parts, fmt.Sprintf("Redis via Sentinel (master %q, sentinels %s, db %d)",
			t.Sentinel.MasterName, strings.Join(t.Sentinel.SentinelAddrs, ", "), t.Sentinel.DB))
		user, tlsOn = t.Sentinel.Username, t.Sentinel.TLSConfig != nil
	case t.Server != nil:
		parts = append(parts, fmt.Sprintf("Redis server %s (db %d)", t.Server.Addr, t.Server.DB))
		user, tlsOn = t.Server.Username, t.Server.TLSConfig != nil
	}
	if user != "" {
		parts = append(parts, "user "+user)
	}
	if tlsOn {
		parts = append(parts, "TLS")
	}
	if t.Replicas > 0 {
		parts = append(parts, fmt.Sprintf("writes wait for %d %s (%s)", t.Replicas, plural(t.Replicas, "replica"), t.ReplicasTimeout))
	} else {
		parts = append(parts, "writes do not wait for replicas")
	}
	return strings.Join(parts, ", ")
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// Open connects to the topology, checks that it answers, and returns a
// Store that owns the client: Close releases it. opts.Replicas and
// opts.ReplicasTimeout, when zero, are taken from the topology.
func (t *Topology) Open(ctx context.Context, opts Options) (*Store, error) {
	if opts.Replicas == 0 {
		opts.Replicas, opts.ReplicasTimeout = t.Replicas, t.ReplicasTimeout
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	client := t.NewClient()
	if err := client.Ping(ctx).Err(); err != nil {
		_ = client.Close()
		// The description only: a URL may carry a password.
		return nil, fmt.Errorf("redis store: ping %s: %w", t.where(), err)
	}
	s := New(client, opts)
	s.ownsClient = true
	return s, nil
}

// where names the servers for an error message.
func (t *Topology) where() string {
	switch {
	case t.Cluster != nil:
		return "cluster " + strings.Join(t.Cluster.Addrs, ",")
	case t.Sentinel != nil:
		return "master " + strconv.Quote(t.Sentinel.MasterName) + " via sentinels " + strings.Join(t.Sentinel.SentinelAddrs, ",")
	}
	return t.Server.Addr
}

func (c TLS) config(host string) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: c.ServerName}
	if tc.ServerName == "" {
		tc.ServerName = host
	}
	if c.CAFile != "" {
		pem, err := os.ReadFile(c.CAFile)
		if err != nil {
			return nil, &FieldError{Field: "redis.tls.ca_file", Err: err}
		}
		tc.RootCAs = x509.NewCertPool()
		if !tc.RootCAs.AppendCertsFromPEM(pem) {
			return nil, &FieldError{Field: "redis.tls.ca_file", Err: fmt.Errorf("%s holds no PEM certificate", c.CAFile)}
		}
	}
	if (c.CertFile == "") != (c.KeyFile == "") {
		return nil, &FieldError{Field: "redis.tls", Err: errors.New("set both cert_file and key_file, or neither")}
	}
	if c.CertFile != "" {
		cert, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile)
		if err != nil {
			return nil, &FieldError{Field: "redis.tls.cert_file", Err: err}
		}
		tc.Certificates = []tls.Certificate{cert}
	}
	return tc, nil
}

func checkAddr(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil || host == "" {
		return fmt.Errorf("%q is not host:port", a)
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return fmt.Errorf("%q: port %q is not a port number", a, port)
	}
	return nil
}

func hostOf(addr string) string {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}
