//go:build unix

package redis

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/storetest"
	"github.com/replyonce/gateway/stores/testservers"
)

// masterWithReplica starts a master and one replica of it, and a client
// of the master.
func masterWithReplica(t *testing.T) (master, replica *testservers.Process, c *goredis.Client) {
	t.Helper()
	master = testservers.Redis(t)
	replica = testservers.RedisReplica(t, master)
	o, err := Config{}.Topology("redis://" + master.Addr() + "/0")
	if err != nil {
		t.Fatal(err)
	}
	c = goredis.NewClient(o.Server)
	t.Cleanup(func() { _ = c.Close() })
	return master, replica, c
}

// The whole ledger contract holds when every write waits for a replica:
// the scripts and their WAIT travel alone and in pipelines.
func TestConformanceWithReplicas(t *testing.T) {
	_, _, c := masterWithReplica(t)
	storetest.Run(t, func(t *testing.T) ledger.Store {
		s, _ := newTestStoreOn(t, c, Options{Replicas: 1})
		return s
	})
}

// With replicas: 1, a write the replica does not acknowledge in time is an
// error, never a success; so is a read-only answer on a document the
// replica may not have; with the replica back, both succeed again. With
// replicas: 0 the paused replica changes nothing.
func TestReplicasWaitForTheReplica(t *testing.T) {
	_, replica, c := masterWithReplica(t)
	ctx := ctxT(t)
	s, _ := newTestStoreOn(t, c, Options{Replicas: 1, ReplicasTimeout: 300 * time.Millisecond})
	unsafe, _ := newTestStoreOn(t, c, Options{KeyPrefix: s.prefix})

	if err := increment(ctx, s, "acked"); err != nil {
		t.Fatalf("with the replica up: %v", err)
	}
	if err := replica.Pause(); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = replica.Resume()
		}
	})

	err := increment(ctx, s, "unreplicated")
	var re *ReplicasError
	if !errors.As(err, &re) || re.Want != 1 || re.Got != 0 {
		t.Fatalf("a write with the replica paused: %v, want a *ReplicasError (0 of 1)", err)
	}
	// The master has it: the error says "not known to be safe", not "not
	// written". A later Transact sees it.
	doc, err := unsafe.Read(ctx, "unreplicated")
	if err != nil || decodeCounter(t, doc).N != 1 {
		t.Fatalf("the master holds %q, %v", doc, err)
	}
	// A decision not to write, resting on a document the replica lacks.
	readOnly := func(cur []byte) (*ledger.Write, error) { return nil, nil }
	if err := s.Transact(ctx, "unreplicated", readOnly); !errors.As(err, &re) {
		t.Fatalf("a read-only answer on an unreplicated document: %v, want a *ReplicasError", err)
	}
	// Without replicas, the paused replica is no concern.
	if err := increment(ctx, unsafe, "fast"); err != nil {
		t.Fatalf("replicas 0 with the replica paused: %v", err)
	}
	// Many writers at once: pipelines fail as a whole, each write with
	// its own error.
	var wg sync.WaitGroup
	errs := make([]error, 32)
	for i := range errs {
		wg.Go(func() { errs[i] = increment(ctx, s, fmt.Sprintf("many-%d", i)) })
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.As(err, &re) {
			t.Fatalf("writer %d with the replica paused: %v", i, err)
		}
	}

	if err := replica.Resume(); err != nil {
		t.Fatal(err)
	}
	resumed = true
	if err := s.Transact(ctx, "unreplicated", readOnly); err != nil {
		t.Fatalf("a read-only answer once the replica is back: %v", err)
	}
	if err := increment(ctx, s, "unreplicated"); err != nil {
		t.Fatalf("a write once the replica is back: %v", err)
	}
	doc, err = s.Read(ctx, "unreplicated")
	if err != nil || decodeCounter(t, doc).N != 2 {
		t.Fatalf("after the replica is back: %q, %v; want n 2", doc, err)
	}
}

// A read-only answer confirms the document it read: if another writer
// changed it in between, the decision is made again on the new one.
func TestReplicasConfirmSeesAChange(t *testing.T) {
	_, _, c := masterWithReplica(t)
	ctx := ctxT(t)
	// No cache: every decision here is made on a document just read.
	s, _ := newTestStoreOn(t, c, Options{Replicas: 1, CacheSize: -1})
	other, _ := newTestStoreOn(t, c, Options{KeyPrefix: s.prefix})
	if err := increment(ctx, s, "scope"); err != nil {
		t.Fatal(err)
	}
	var seen []int
	changed := false
	err := s.Transact(ctx, "scope", func(cur []byte) (*ledger.Write, error) {
		n := decodeCounter(t, cur).N
		seen = append(seen, n)
		if n == 1 && !changed {
			// Another process writes between this read and the answer.
			changed = true
			if err := increment(ctx, other, "scope"); err != nil {
				t.Fatal(err)
			}
		}
		return nil, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(seen) < 2 || seen[len(seen)-1] != 2 {
		t.Fatalf("decisions saw %v; want the last one to see n 2", seen)
	}
}

func TestReplicasNeedAClientThatCanWait(t *testing.T) {
	c := testClient(t)
	ring := goredis.NewRing(&goredis.RingOptions{Addrs: map[string]string{"a": c.Options().Addr}, ContextTimeoutEnabled: true})
	defer ring.Close()
	defer func() {
		if recover() == nil {
			t.Fatal("New accepted Replicas with a Ring client")
		}
	}()
	New(ring, Options{Replicas: 1})
}
