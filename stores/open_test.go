package stores_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores"
	"github.com/replyonce/gateway/stores/bolt"
	"github.com/replyonce/gateway/stores/memory"
	"github.com/replyonce/gateway/stores/redis"
)

// Every kind Kinds lists is one Open knows, and the kind names the adapter
// it opens; an unknown kind is an error naming store.kind.
func TestOpenOpensEachKindItLists(t *testing.T) {
	ctx := context.Background()
	want := map[string]func(ledger.Store) bool{
		"memory": func(s ledger.Store) bool { _, ok := s.(*memory.Store); return ok },
		"bolt":   func(s ledger.Store) bool { _, ok := s.(*bolt.Store); return ok },
	}
	for _, c := range []stores.Config{{Kind: "memory"}, {Kind: "bolt", Path: filepath.Join(t.TempDir(), "sub", "ledger.db")}} {
		op, err := stores.Open(ctx, c, stores.Options{})
		if err != nil {
			t.Fatalf("Open(%s): %v", c.Kind, err)
		}
		if !want[c.Kind](op.Store) {
			t.Errorf("Open(%s) gave a %T", c.Kind, op.Store)
		}
		op.Close()
	}
	if got := strings.Join(stores.Kinds(), ","); got != "memory,bolt,postgres,redis" {
		t.Errorf("Kinds() = %s", got)
	}
	if _, err := stores.Open(ctx, stores.Config{Kind: "sqlite"}, stores.Options{}); err == nil || !strings.HasPrefix(err.Error(), "store.kind:") {
		t.Errorf("Open(sqlite) = %v, want a store.kind error", err)
	}
}

// Check names the field at fault, under store., for what Open would refuse
// before it connects.
func TestCheckNamesTheField(t *testing.T) {
	for _, c := range []struct {
		cfg  stores.Config
		want string
	}{
		{stores.Config{Kind: "bolt"}, "store.path"},
		{stores.Config{Kind: "postgres"}, "store.url"},
		{stores.Config{Kind: "postgres", URL: "postgres://a:b@host:notaport/db"}, "store.url"},
		{stores.Config{Kind: "memory", Redis: redis.Config{Cluster: []string{"a:6379"}}}, "store.redis"},
		{stores.Config{Kind: "nope"}, "store.kind"},
	} {
		errs := c.cfg.Check()
		if len(errs) != 1 || errs[0].Field != c.want {
			t.Errorf("Check(%+v) = %v, want one error about %s", c.cfg, errs, c.want)
		}
	}
	if errs := (stores.Config{Kind: "memory"}).Check(); len(errs) != 0 {
		t.Errorf("Check(memory) = %v", errs)
	}
}
