//go:build unix

package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/jackc/pgx/v5"

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
// the stores reached over TCP.
type Store struct {
	Kind   string
	relays []*Relay
	ports  *Ports
	// section returns an instance's store section, given the address of
	// its relay ("" for bolt).
	section func(relay string) string
	target  string // the server's address, for relays
	cleanup func()
	redis   *testservers.Process // the Redis server of this run's own
}

// Section is instance i's store section; for a networked store it adds
// the instance's relay.
func (s *Store) Section() (string, error) {
	if s.target == "" {
		return s.section(""), nil
	}
	r, err := newRelay(s.ports, s.target)
	if err != nil {
		return "", err
	}
	s.relays = append(s.relays, r)
	return s.section(r.Addr()), nil
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

// boltStore is a file in dir.
func boltStore(dir string) *Store {
	path := filepath.Join(dir, "ledger.db")
	return &Store{Kind: "bolt", section: func(string) string { return fmt.Sprintf("{kind: bolt, path: %q}", path) }}
}

// postgresStore is a table of its own (name) on the server of dsn, which
// Close drops.
func postgresStore(dsn, table string) (*Store, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return nil, fmt.Errorf("postgres DSN: %w", err)
	}
	target := u.Host
	if u.Port() == "" {
		target = net.JoinHostPort(u.Hostname(), "5432")
	}
	return &Store{Kind: "postgres", target: target,
		section: func(relay string) string {
			v := *u
			v.Host = relay
			return fmt.Sprintf("{kind: postgres, url: %q, table: %s}", v.String(), table)
		},
		cleanup: func() { dropTable(dsn, table) },
	}, nil
}

// dropTable drops the objects the store made for table.
func dropTable(dsn, table string) {
	ctx, cancel := context.WithTimeout(context.Background(), 15e9)
	defer cancel()
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return
	}
	defer conn.Close(ctx)
	// The queued events' blobs live in table_blobs, which SchemaObjects
	// does not list.
	objects := append(postgres.SchemaObjects(table), postgres.SchemaObject{Kind: "table", Name: table + "_blobs"})
	for _, o := range objects {
		switch o.Kind {
		case "table":
			_, _ = conn.Exec(ctx, "DROP TABLE IF EXISTS "+o.Name+" CASCADE")
		case "sequence":
			_, _ = conn.Exec(ctx, "DROP SEQUENCE IF EXISTS "+o.Name)
		}
	}
}

// redisStore is a key prefix of its own on srv, the run's own server.
func redisStore(srv *testservers.Process, prefix string) *Store {
	return &Store{Kind: "redis", target: srv.Addr(), redis: srv,
		section: func(relay string) string {
			return fmt.Sprintf("{kind: redis, url: \"redis://%s/0\", prefix: %q}", relay, prefix)
		}}
}
