//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/replyonce/gateway/stores"
	"github.com/replyonce/gateway/stores/postgres"
	"github.com/replyonce/gateway/stores/testservers"
)

// Ports hands out loopback ports of REPLYONCE_TEST_PORTS that nothing
// listens on and that it has not handed out before in this run: a
// gateway killed and started again keeps its ports, and while it is down
// a scenario running beside it must not take them.
type Ports struct {
	mu   sync.Mutex
	used map[int]bool
}

// NewPorts is a pool that has handed out nothing.
func NewPorts() *Ports { return &Ports{used: map[int]bool{}} }

// Take returns a port no one else in this run has.
func (p *Ports) Take() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for range 1000 {
		port, err := testservers.FreePort()
		if err != nil {
			return 0, err
		}
		if !p.used[port] {
			p.used[port] = true
			return port, nil
		}
	}
	return 0, errors.New("no port of REPLYONCE_TEST_PORTS left for this run")
}

// Hold marks a port taken elsewhere (the Redis server's) as in use.
func (p *Ports) Hold(port int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.used[port] = true
}

// Give hands ports back once what used them has stopped.
func (p *Ports) Give(ports ...int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, port := range ports {
		delete(p.used, port)
	}
}

// newRelay starts a relay on a free port of the range to target.
func newRelay(ports *Ports, target string) (*Relay, error) {
	var err error
	for range 5 {
		var port int
		if port, err = ports.Take(); err != nil {
			return nil, err
		}
		var r *Relay
		if r, err = NewRelay(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), target); err == nil {
			return r, nil
		}
	}
	return nil, err
}

// Store is one store a scenario runs on: the store section of each
// instance's configuration, through a relay of the instance's own for
// the stores reached over TCP (those with a URL).
type Store struct {
	Kind   string
	config stores.Config
	relays []*Relay
	ports  *Ports
	target string // the server's address, for relays; "" for a file
	// cleanup drops what the scenario wrote, once every instance has
	// stopped.
	cleanup func()
	redis   *testservers.Process // the Redis server of this run's own
}

// openStore makes the scenario's store c ready through stores.Open, as a
// gateway would open it (a Postgres table gets its schema, a Redis server
// answers a ping), before any instance starts. It keeps a Postgres pool
// to drop the table afterwards; everything else is closed again at once,
// since a bolt file is held by one process.
func openStore(ctx context.Context, c stores.Config, ports *Ports) (*Store, error) {
	s := &Store{Kind: c.Kind, config: c, ports: ports}
	if c.URL != "" {
		u, err := url.Parse(c.URL)
		if err != nil {
			return nil, fmt.Errorf("%s URL: %w", c.Kind, err)
		}
		if u.Port() == "" {
			return nil, fmt.Errorf("%s URL %s: give the port, the relays need it", c.Kind, u.Redacted())
		}
		s.target = u.Host
	}
	op, err := stores.Open(ctx, c, stores.Options{})
	if err != nil {
		return nil, err
	}
	if op.Pool != nil {
		s.cleanup = func() { dropTable(op.Pool, c.Table); op.Close() }
	} else {
		op.Close()
	}
	return s, nil
}

// Shared reports whether several processes can open the store at once:
// those reached over a server can, a bolt file cannot.
func (s *Store) Shared() bool { return s.target != "" }

// Section is instance i's store section, a YAML flow map; for a store
// reached over TCP it adds the instance's relay and points the section's
// URL at it.
func (s *Store) Section() (string, error) {
	c := s.config
	if s.target != "" {
		r, err := newRelay(s.ports, s.target)
		if err != nil {
			return "", err
		}
		s.relays = append(s.relays, r)
		u, _ := url.Parse(c.URL) // parsed once already by openStore
		u.Host = r.Addr()
		c.URL = u.String()
	}
	return section(c), nil
}

// section writes the fields of c that are set as a YAML flow map.
func section(c stores.Config) string {
	var parts []string
	for _, f := range []struct{ key, value string }{
		{"kind", c.Kind}, {"path", c.Path}, {"url", c.URL}, {"table", c.Table}, {"prefix", c.Prefix},
	} {
		if f.value != "" {
			parts = append(parts, fmt.Sprintf("%s: %q", f.key, f.value))
		}
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// Close stops the relays and drops what the run wrote.
func (s *Store) Close() {
	for _, r := range s.relays {
		r.Close()
		if _, port, err := net.SplitHostPort(r.Addr()); err == nil {
			n, _ := strconv.Atoi(port)
			s.ports.Give(n)
		}
	}
	if s.cleanup != nil {
		s.cleanup()
	}
}

// Outage settings of every relay.
func (s *Store) Stall() {
	for _, r := range s.relays {
		r.Stall()
	}
}
func (s *Store) Cut() {
	for _, r := range s.relays {
		r.Cut()
	}
}
func (s *Store) Heal() {
	for _, r := range s.relays {
		r.Heal()
	}
}

// dropTable drops the objects the store made for table.
func dropTable(pool *pgxpool.Pool, table string) {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	_, _ = pool.Exec(ctx, postgres.DropSQL(table))
}
