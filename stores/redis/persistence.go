package redis

import (
	"context"
	"fmt"
	"strings"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// Persistence is what a Redis server is set to save to disk, as CONFIG GET
// reports it: what a crash of that server can take away from the ledger.
type Persistence struct {
	// AppendOnly is appendonly yes: every write is in the append-only file
	// before the server answers it, so a crash of the Redis process loses
	// nothing it acknowledged.
	AppendOnly bool
	// AppendFsync is how often that file reaches the disk (always,
	// everysec, no): what a crash of the machine can still lose.
	AppendFsync string
	// Save holds the RDB snapshot rules ("" when there are none).
	Save string
	// Server names the server these settings are from (its address), the
	// weakest of a Cluster's masters.
	Server string
}

// CrashLoses says what a crash of the Redis server can lose of what the
// gateway acknowledged, in a sentence for an operator; "" when nothing.
// A failover is another matter: replication is asynchronous whatever
// these settings say.
func (p Persistence) CrashLoses() string {
	switch {
	case !p.AppendOnly && p.Save == "":
		return "persistence is off (appendonly no, no save rules): a restart or crash of the Redis server loses every event, claim and outcome recorded since it started"
	case !p.AppendOnly:
		return fmt.Sprintf("appendonly is off (save %q): a crash of the Redis server loses everything recorded since its last snapshot", p.Save)
	case p.AppendFsync == "always":
		return ""
	case p.AppendFsync == "no":
		return "appendfsync no: a crash of the Redis process loses nothing, but a crash of its machine loses what the operating system had not yet written (up to about 30 s)"
	default:
		return fmt.Sprintf("appendfsync %s: a crash of the Redis process loses nothing, but a crash of its machine loses about the last second", p.AppendFsync)
	}
}

// ProcessCrashLoses says whether a crash of the Redis process alone (a kill,
// an out-of-memory kill, a restart) loses acknowledged writes.
func (p Persistence) ProcessCrashLoses() bool { return !p.AppendOnly }

// Persistence reads the server's persistence settings with CONFIG GET,
// which changes nothing. On Cluster it asks every master and returns the
// weakest. Managed services and ACLs often refuse CONFIG: the error says
// so, and the settings are then unknown.
func (s *Store) Persistence(ctx context.Context) (Persistence, error) {
	if c, ok := s.client.(*goredis.ClusterClient); ok {
		var (
			mu      sync.Mutex // masters are visited concurrently
			weakest Persistence
			found   bool
		)
		err := c.ForEachMaster(ctx, func(ctx context.Context, m *goredis.Client) error {
			p, err := persistenceOf(ctx, m)
			if err != nil {
				return err
			}
			mu.Lock()
			weakest, found = weaker(weakest, p, found), true
			mu.Unlock()
			return nil
		})
		if err != nil {
			return Persistence{}, err
		}
		return weakest, nil
	}
	c, ok := s.client.(*goredis.Client)
	if !ok {
		return Persistence{}, fmt.Errorf("redis store: persistence: a %T cannot be asked", s.client)
	}
	return persistenceOf(ctx, c)
}

// weaker returns the weaker of two servers' settings (b alone when a is
// not set yet).
func weaker(a, b Persistence, aSet bool) Persistence {
	if !aSet {
		return b
	}
	rank := func(p Persistence) int {
		switch {
		case !p.AppendOnly && p.Save == "":
			return 0
		case !p.AppendOnly:
			return 1
		case p.AppendFsync == "no":
			return 2
		case p.AppendFsync != "always":
			return 3
		}
		return 4
	}
	if rank(b) < rank(a) {
		return b
	}
	return a
}

func persistenceOf(ctx context.Context, c *goredis.Client) (Persistence, error) {
	got := map[string]string{}
	for _, name := range []string{"appendonly", "appendfsync", "save"} {
		v, err := c.ConfigGet(ctx, name).Result()
		if err != nil {
			return Persistence{}, fmt.Errorf("redis store: CONFIG GET %s on %s: %w", name, c.Options().Addr, err)
		}
		got[name] = v[name]
	}
	return Persistence{AppendOnly: strings.EqualFold(got["appendonly"], "yes"), AppendFsync: got["appendfsync"],
		Save: strings.TrimSpace(got["save"]), Server: c.Options().Addr}, nil
}
