package bench

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	bbolt "go.etcd.io/bbolt"
)

// BenchmarkBoltBatchShapes measures bbolt settings the bolt store could
// use, with the store's write pattern: 64 writers, each transaction putting
// a scope's document (about 600 bytes of JSON) and 16 bytes of metadata in
// two buckets, then rewriting it (the gateway's claim, then its settle),
// through DB.Batch with fsync on (stores/bolt now runs its own group
// commit instead of DB.Batch; see stores/bolt). "default" is the file
// options stores/bolt opens with;
// "no-freelist-sync" adds the options etcd runs bbolt with (the freelist is
// rebuilt on open instead of written at every commit, and kept in a hash
// map). The decide-* variants add a stand-in for the ledger's JSON work,
// inside bbolt's single writer (as stores/bolt runs the ledger's function)
// or before Batch (as an optimistic compare-and-put store would).
// The metric to read is writes/s. On the 2-CPU machines this project runs
// on, none of these changes moved it beyond the noise: the store is bound
// by CPU, not by its serialized section or its freelist.
func BenchmarkBoltBatchShapes(b *testing.B) {
	for _, v := range []struct {
		name string
		opts bbolt.Options
		// decide is where a stand-in for the ledger's decision (decode the
		// document, encode it again) runs: "" nowhere, "inside" in the
		// batch function, as stores/bolt runs it, so under bbolt's
		// single writer; "outside" before Batch, as an optimistic store
		// would (deciding on a snapshot, then compare-and-put).
		decide string
	}{
		{"default", bbolt.Options{}, ""},
		{"no-freelist-sync", bbolt.Options{NoFreelistSync: true, FreelistType: bbolt.FreelistMapType}, ""},
		{"decide-inside-batch", bbolt.Options{}, "inside"},
		{"decide-outside-batch", bbolt.Options{}, "outside"},
	} {
		b.Run(v.name, func(b *testing.B) {
			db, err := bbolt.Open(filepath.Join(b.TempDir(), "b.db"), 0o600, &v.opts)
			if err != nil {
				b.Fatal(err)
			}
			defer db.Close()
			db.MaxBatchDelay = time.Millisecond
			docs, meta := []byte("docs"), []byte("meta")
			if err := db.Update(func(tx *bbolt.Tx) error {
				if _, err := tx.CreateBucketIfNotExists(docs); err != nil {
					return err
				}
				_, err := tx.CreateBucketIfNotExists(meta)
				return err
			}); err != nil {
				b.Fatal(err)
			}
			doc := bytes.Repeat([]byte("x"), 600)
			sample := ledgerDoc()
			decide := func() {
				var m map[string]any
				if err := json.Unmarshal(sample, &m); err != nil {
					b.Error(err)
				}
				if _, err := json.Marshal(m); err != nil {
					b.Error(err)
				}
			}
			var seq atomic.Int64
			b.SetParallelism(32)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					n := seq.Add(1)
					// Two writes per op: half the ops create a scope, half
					// rewrite the one created just before, as claim and
					// settle do.
					key := []byte("bench:evt_" + strconv.FormatInt(n/2, 10))
					if v.decide == "outside" {
						decide()
					}
					err := db.Batch(func(tx *bbolt.Tx) error {
						if v.decide == "inside" {
							decide()
						}
						var m [16]byte
						binary.BigEndian.PutUint64(m[:8], uint64(n))
						if err := tx.Bucket(docs).Put(key, doc); err != nil {
							return err
						}
						return tx.Bucket(meta).Put(key, m[:])
					})
					if err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
		})
	}
}

// ledgerDoc is a scope document as the ledger writes it for a delivered
// event: one run, one committed deliver entry.
func ledgerDoc() []byte {
	return []byte(`{"v":1,"scope":"bench:evt_1","seq":2,"tokens":1,"createdAt":"2026-12-02T13:00:00.000Z",` +
		`"runs":{"bench:evt_1":{"id":"bench:evt_1","mode":"independent","token":1,"delivery":1,"contextAt":"2026-12-02T13:00:00.000Z",` +
		`"seenSeq":0,"startedAt":"2026-12-02T13:00:00.000Z","heartbeatAt":"2026-12-02T13:00:00.000Z"}},` +
		`"entries":{"e3b0c44298fc1c149afbf4c8996fb924":{"id":"e3b0c44298fc1c149afbf4c8996fb924","scope":"bench:evt_1","intent":"deliver",` +
		`"payloadHash":"27ae41e4649b934ca495991b7852b855","state":"committed","attempts":1,"runId":"bench:evt_1","token":1,` +
		`"claimedAt":"2026-12-02T13:00:00.000Z","settledAt":"2026-12-02T13:00:00.010Z","pendingTtl":15000000000,"seq":1,` +
		`"value":{"outcome":"delivered","agentStatus":200},"redeliverable":true,"maxAttempts":1073741824}}}`)
}
