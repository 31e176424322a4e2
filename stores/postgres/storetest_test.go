package postgres_test

import (
	"testing"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/postgres"
	"github.com/replyonce/gateway/stores/storetest"
)

// TestConformance runs the suite every store must pass, each subtest on a
// table in a schema of its own.
func TestConformance(t *testing.T) {
	pool := newPool(t, testDSN(t), 0)
	storetest.Run(t, func(t *testing.T) ledger.Store {
		s := postgres.New(pool, postgres.Options{Table: newTable(t, pool)})
		t.Cleanup(s.Close)
		return s
	})
}

// BenchmarkConformanceOnce is the suite's shared Once benchmark, so the
// stores' figures can be set side by side.
func BenchmarkConformanceOnce(b *testing.B) {
	pool := newPool(b, testDSN(b), 64+4)
	warm(b, pool)
	storetest.BenchmarkOnce(b, postgres.New(pool, postgres.Options{Table: newTable(b, pool)}))
}

// BenchmarkEnqueueBacklog is the suite's accept-with-a-backlog benchmark.
func BenchmarkEnqueueBacklog(b *testing.B) {
	pool := newPool(b, testDSN(b), 64+4)
	s := postgres.New(pool, postgres.Options{Table: newTable(b, pool)})
	defer s.Close()
	storetest.BenchmarkEnqueueBacklog(b, s)
}

// BenchmarkLongScope is the suite's long-scope benchmark (issue #34).
func BenchmarkLongScope(b *testing.B) {
	pool := newPool(b, testDSN(b), 4)
	s := postgres.New(pool, postgres.Options{Table: newTable(b, pool)})
	defer s.Close()
	storetest.BenchmarkLongScope(b, s)
}
