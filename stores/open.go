package stores

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/replyonce/gateway/ingress/field"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/bolt"
	"github.com/replyonce/gateway/stores/memory"
	"github.com/replyonce/gateway/stores/postgres"
	"github.com/replyonce/gateway/stores/redis"
)

// Config names a store and where it is: the gateway's `store:` section,
// decoded into this struct as it is.
type Config struct {
	Kind string `yaml:"kind"` // one of Kinds
	Path string `yaml:"path"` // bolt
	URL  string `yaml:"url"`  // postgres, redis (a single server)
	// Table is the Postgres table ("schema.table" allowed; default
	// replyonce_scopes), Prefix the Redis key prefix (default the store's),
	// so that several gateways, or test runs, can share one server.
	Table  string `yaml:"table"`
	Prefix string `yaml:"prefix"`
	// Redis is the Redis store's own settings: Cluster or Sentinel
	// instead of a URL, ACL user, TLS, replicas to wait for. The store
	// package checks them (redis.Config.Topology).
	Redis redis.Config `yaml:"redis"`
}

// Options are what the caller, not the configuration, decides.
type Options struct {
	// Clock judges physical expiry in the memory and bolt stores
	// (default time.Now).
	Clock func() time.Time
	// Postgres, when set, adjusts the pool's settings before it connects
	// (bench makes every commit wait for the WAL flush whatever the
	// server's default).
	Postgres func(*pgxpool.Config)
}

// Opened is an open store and what it was built on.
type Opened struct {
	Store ledger.Store
	// Pool is the Postgres store's pool and Redis the Redis store; nil
	// for the other kinds. They let a caller look at the server behind
	// the store (bench reads its CPU and the run's size).
	Pool  *pgxpool.Pool
	Redis *redis.Store
	close func()
}

// Close releases the store and what Open made for it.
func (o *Opened) Close() { o.close() }

// opener opens one kind of store.
type opener func(ctx context.Context, c Config, o Options) (*Opened, error)

// kinds is the one list of store kinds: a kind added here (with its cases
// in Check and String, below in this file) is known to Open and Kinds, so
// to serve, check and bench.
var kinds = []struct {
	name string
	open opener
}{
	{"memory", openMemory},
	{"bolt", openBolt},
	{"postgres", openPostgres},
	{"redis", openRedis},
}

// Kinds lists the store kinds, in the order the documentation gives them.
func Kinds() []string {
	out := make([]string, len(kinds))
	for i, k := range kinds {
		out[i] = k.name
	}
	return out
}

// Open opens the store c names. For Postgres it also runs the migration,
// so that a fresh database works on first start; for Redis it pings the
// servers. Errors name the field at fault, as store.<field>.
func Open(ctx context.Context, c Config, o Options) (*Opened, error) {
	for _, k := range kinds {
		if k.name == c.Kind {
			return k.open(ctx, c, o)
		}
	}
	return nil, fmt.Errorf("store.kind: %q is not one of %s", c.Kind, strings.Join(Kinds(), ", "))
}

func openMemory(_ context.Context, _ Config, o Options) (*Opened, error) {
	return &Opened{Store: memory.New(o.Clock), close: func() {}}, nil
}

func openBolt(_ context.Context, c Config, o Options) (*Opened, error) {
	if dir := filepath.Dir(c.Path); dir != "" {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("store.path: %w", err)
		}
	}
	s, err := bolt.Open(c.Path, bolt.Options{Clock: o.Clock})
	if err != nil {
		return nil, err
	}
	return &Opened{Store: s, close: func() { _ = s.Close() }}, nil
}

func openPostgres(ctx context.Context, c Config, o Options) (*Opened, error) {
	pcfg, err := pgxpool.ParseConfig(c.URL)
	if err != nil {
		return nil, fmt.Errorf("store.url: %w", err)
	}
	if !strings.Contains(c.URL, "pool_max_conns") {
		// pgx's default, max(4, CPUs), starves a gateway whose every
		// request waits on a commit; pool_max_conns in the URL wins.
		pcfg.MaxConns = 32
	}
	if o.Postgres != nil {
		o.Postgres(pcfg)
	}
	pool, err := pgxpool.NewWithConfig(ctx, pcfg)
	if err != nil {
		return nil, fmt.Errorf("store.url: %w", err)
	}
	s := postgres.New(pool, postgres.Options{Table: c.Table})
	if err := s.Migrate(ctx); err != nil {
		s.Close()
		pool.Close()
		return nil, err
	}
	return &Opened{Store: s, Pool: pool, close: func() { s.Close(); pool.Close() }}, nil
}

func openRedis(ctx context.Context, c Config, _ Options) (*Opened, error) {
	t, err := c.Redis.Topology(c.URL)
	if err != nil {
		return nil, err
	}
	s, err := t.Open(ctx, redis.Options{KeyPrefix: c.Prefix})
	if err != nil {
		return nil, err
	}
	return &Opened{Store: s, Redis: s, close: func() { _ = s.Close() }}, nil
}

// Check returns the problems of c that Open would meet before it connects,
// each naming its field under "store.".
func (c Config) Check() []*field.Error {
	var errs []*field.Error
	bad := func(f, format string, args ...any) { errs = append(errs, field.Errorf("store."+f, format, args...)) }
	switch c.Kind {
	case "memory":
	case "bolt":
		if c.Path == "" {
			bad("path", "required for the bolt store")
		}
	case "postgres":
		if c.URL == "" {
			bad("url", "required for the %s store", c.Kind)
		} else if _, err := pgxpool.ParseConfig(c.URL); err != nil {
			// Open would refuse it: so must check. pgx's message
			// names the part at fault, not the password.
			bad("url", "%v", err)
		}
	case "redis":
		if _, err := c.Redis.Topology(c.URL); err != nil {
			for _, fe := range redisProblems(err) {
				errs = append(errs, field.Wrap("store."+fe.Field, fe.Err))
			}
		}
	default:
		return []*field.Error{field.Errorf("store.kind", "%q is not one of %s", c.Kind, strings.Join(Kinds(), ", "))}
	}
	if c.Kind != "redis" && !reflect.ValueOf(c.Redis).IsZero() {
		bad("redis", "only the redis store reads it (store.kind is %q)", c.Kind)
	}
	return errs
}

// redisProblems takes apart the Redis store's joined field errors.
func redisProblems(err error) []*redis.FieldError {
	var out []*redis.FieldError
	var walk func(error)
	walk = func(e error) {
		if j, ok := e.(interface{ Unwrap() []error }); ok {
			for _, c := range j.Unwrap() {
				walk(c)
			}
			return
		}
		var fe *redis.FieldError
		if errors.As(e, &fe) {
			out = append(out, fe)
			return
		}
		out = append(out, &redis.FieldError{Field: "redis", Err: e})
	}
	walk(err)
	return out
}

// String says which store c names, and where, without credentials: for
// Redis its topology, for Postgres its hosts (a multi-host URL lists them
// all, in the order they are tried).
func (c Config) String() string {
	switch c.Kind {
	case "bolt":
		return "bolt (" + c.Path + ")"
	case "postgres":
		pc, err := pgxpool.ParseConfig(c.URL)
		if err != nil {
			return "postgres"
		}
		cc := pc.ConnConfig
		hosts := []string{net.JoinHostPort(cc.Host, strconv.Itoa(int(cc.Port)))}
		for _, f := range cc.Fallbacks {
			if h := net.JoinHostPort(f.Host, strconv.Itoa(int(f.Port))); !slices.Contains(hosts, h) {
				hosts = append(hosts, h)
			}
		}
		desc := fmt.Sprintf("postgres (%s, database %s", strings.Join(hosts, ", "), cc.Database)
		if u, err := url.Parse(c.URL); err == nil {
			if tsa := u.Query().Get("target_session_attrs"); tsa != "" {
				desc += ", target_session_attrs " + tsa
			}
		}
		return desc + ")"
	case "redis":
		t, err := c.Redis.Topology(c.URL)
		if err != nil {
			return "redis"
		}
		return "redis: " + t.String()
	}
	return c.Kind
}

// ErrInUse is wrapped by Open's error when the store is a bolt file held
// by another process: unlike a server still starting, it does not come
// good by retrying while that process runs, so serve exits instead.
var ErrInUse = bolt.ErrInUse
