package bolt

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bbolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"

	"github.com/replyonce/gateway/ledger"
)

var (
	bucketDocs   = []byte("docs")
	bucketMeta   = []byte("meta")
	bucketReview = []byte("review")
	bucketDue    = []byte("due")
	bucketBlobs  = []byte("blobs")
	// The received index: keys as in the review and due indexes (time,
	// then scope), and each scope's current key time, so a write can
	// remove the key it replaces without widening meta.
	bucketReceived   = []byte("received")
	bucketReceivedAt = []byte("received-at")
	// Control records: a bucket of their own, outside the scopes' key
	// space (docs).
	bucketControl = []byte("control")
)

// ErrInUse is wrapped by Open's error when another process holds the
// file: bolt is single-process, so waiting longer would not help while
// that process runs.
var ErrInUse = errors.New("is held by another process")

// Options tune the store. Zero values take the defaults.
type Options struct {
	// Clock judges physical expiry (default time.Now).
	Clock func() time.Time
	// MaxBatch bounds how many Transacts one commit (one set of fsyncs)
	// carries; Transacts that arrive while a commit runs share the next
	// one (default DefaultMaxBatch; 1 commits every Transact alone).
	MaxBatch int
	// OpenTimeout bounds the wait for another process's file lock
	// (default 5 s); past it Open fails with an error that says the file
	// is in use and wraps bbolt.ErrTimeout.
	OpenTimeout time.Duration
}

// Store is a bbolt-backed ledger.Store.
type Store struct {
	db     *bbolt.DB
	now    func() time.Time
	commit committer
}

var _ ledger.Store = (*Store)(nil)

// Open opens (creating if needed) the ledger file at path.
func Open(path string, opts Options) (*Store, error) {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	if opts.MaxBatch <= 0 {
		opts.MaxBatch = DefaultMaxBatch
	}
	if opts.OpenTimeout <= 0 {
		opts.OpenTimeout = 5 * time.Second
	}
	// bbolt locks the file for as long as it is open, with flock(2) on
	// Linux and macOS and `LockFileEx` on Windows, so a second process on
	// the same file waits here, then fails, on every platform.
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: opts.OpenTimeout})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("bolt store: %s %w (one gateway per bolt file; waited %s for its lock: %w)",
			path, ErrInUse, opts.OpenTimeout, err)
	}
	if err != nil {
		return nil, fmt.Errorf("bolt store: open %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, b := range [][]byte{bucketDocs, bucketMeta, bucketReview, bucketDue, bucketBlobs, bucketReceived, bucketReceivedAt, bucketControl} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		_ = db.Close()
		return nil, fmt.Errorf("bolt store: create buckets in %s: %w", path, err)
	}
	s := &Store{db: db, now: opts.Clock}
	s.commit = committer{s: s, maxBatch: opts.MaxBatch}
	return s, nil
}

// Close releases the file.
func (s *Store) Close() error { return s.db.Close() }

// meta is a scope's expiry and index times, in Unix nanoseconds (0: none).
// Files written before queued delivery hold 16 bytes: no due time.
type meta struct{ expires, review, due int64 }

func readMeta(b []byte) meta {
	if len(b) != 16 && len(b) != 24 {
		return meta{}
	}
	m := meta{expires: int64(binary.BigEndian.Uint64(b[:8])), review: int64(binary.BigEndian.Uint64(b[8:16]))}
	if len(b) == 24 {
		m.due = int64(binary.BigEndian.Uint64(b[16:]))
	}
	return m
}

func (m meta) bytes() []byte {
	var b [24]byte
	binary.BigEndian.PutUint64(b[:8], uint64(m.expires))
	binary.BigEndian.PutUint64(b[8:16], uint64(m.review))
	binary.BigEndian.PutUint64(b[16:], uint64(m.due))
	return b[:]
}

// blobPrefix starts the keys of a scope's blobs: the scope's length, so no
// scope's prefix is another's, then the scope.
func blobPrefix(scope string) []byte {
	k := binary.AppendUvarint(nil, uint64(len(scope)))
	return append(k, scope...)
}

func blobKey(scope, name string) []byte { return append(blobPrefix(scope), name...) }

// deleteBlobs removes every blob of scope.
func deleteBlobs(tx *bbolt.Tx, scope string) error {
	b := tx.Bucket(bucketBlobs)
	prefix := blobPrefix(scope)
	var keys [][]byte
	c := b.Cursor()
	for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
		keys = append(keys, bytes.Clone(k))
	}
	for _, k := range keys {
		if err := b.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

func reviewKey(at int64, scope string) []byte {
	k := make([]byte, 8, 8+len(scope))
	binary.BigEndian.PutUint64(k, uint64(at))
	return append(k, scope...)
}

// current returns the scope's live document, or nil, in its own memory.
func (s *Store) current(tx *bbolt.Tx, scope string) ([]byte, error) {
	doc, err := unpackDoc(s.live(tx, scope))
	if err != nil {
		return nil, fmt.Errorf("%w: bolt store: scope %q: %w", ledger.ErrCorrupt, scope, err)
	}
	return doc, nil
}

// live returns the scope's document as stored (packDoc), nil if it has
// none or it has expired, as bbolt holds it: valid only within tx.
func (s *Store) live(tx *bbolt.Tx, scope string) []byte {
	doc := tx.Bucket(bucketDocs).Get([]byte(scope))
	if doc == nil {
		return nil
	}
	m := readMeta(tx.Bucket(bucketMeta).Get([]byte(scope)))
	if m.expires != 0 && s.now().UnixNano() >= m.expires {
		return nil
	}
	return doc
}

// ChecksAbsent implements ledger.AbsenceChecker: a write whose Absent
// names a record of its scope that exists is not made, and Transact
// returns a *ledger.PresentError. The check is made in the commit, right
// after the function decided (committer), so a refused write shares the
// commit of the writes around it like any refusal of the ledger's.
func (s *Store) ChecksAbsent() bool { return true }

// presentOf is the error for a write to scope that took names as absent
// when some of them exist in tx, or nil. The caller has found the scope's
// document live: an expired one's records are gone for the ledger even
// before a write deletes them.
func presentOf(tx *bbolt.Tx, scope string, names []string) *ledger.PresentError {
	var found map[string][]byte
	b := tx.Bucket(bucketBlobs)
	for _, n := range names {
		if v := b.Get(blobKey(scope, n)); v != nil {
			if found == nil {
				found = map[string][]byte{}
			}
			found[n] = bytes.Clone(v)
		}
	}
	if found == nil {
		return nil
	}
	return &ledger.PresentError{Blobs: found}
}

// Transact implements ledger.Store. It returns once the write is on disk,
// having shared its commit with whatever Transacts arrived meanwhile.
func (s *Store) Transact(ctx context.Context, scope string, fn func([]byte) (*ledger.Write, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	fnErr, err := s.commit.transact(scope, fn)
	if err != nil {
		return fmt.Errorf("bolt store: scope %q: %w", scope, err)
	}
	return fnErr
}

// put saves w, whose document packDoc made stored.
func (s *Store) put(tx *bbolt.Tx, scope string, w *ledger.Write, stored []byte) error {
	key := []byte(scope)
	metas, reviews := tx.Bucket(bucketMeta), tx.Bucket(bucketReview)
	dues, blobs := tx.Bucket(bucketDue), tx.Bucket(bucketBlobs)
	oldRaw := metas.Get(key)
	old := readMeta(oldRaw)
	if oldRaw != nil && old.expires != 0 && s.now().UnixNano() >= old.expires {
		// The document this write replaces had expired: its blobs went
		// with it.
		if err := deleteBlobs(tx, scope); err != nil {
			return err
		}
	}
	m := meta{}
	if w.TTL > 0 {
		m.expires = s.now().Add(w.TTL).UnixNano()
	}
	if !w.ReviewAt.IsZero() {
		m.review = w.ReviewAt.UnixNano()
	}
	if !w.DueAt.IsZero() {
		m.due = w.DueAt.UnixNano()
	}
	// An index key that stays as it was is left alone: most writes keep
	// their review time, and every B+tree change is a page to rewrite.
	if err := moveIndexKey(reviews, scope, old.review, m.review); err != nil {
		return err
	}
	if err := moveIndexKey(dues, scope, old.due, m.due); err != nil {
		return err
	}
	if err := putReceived(tx, scope, w.ReceivedAt); err != nil {
		return err
	}
	for name, b := range w.Blobs {
		var err error
		if b == nil {
			err = blobs.Delete(blobKey(scope, name))
		} else {
			err = blobs.Put(blobKey(scope, name), b)
		}
		if err != nil {
			return err
		}
	}
	if err := metas.Put(key, m.bytes()); err != nil {
		return err
	}
	return tx.Bucket(bucketDocs).Put(key, stored)
}

// moveIndexKey moves scope's key in a time index from old to at (zero:
// none), touching nothing when they are the same.
func moveIndexKey(index *bbolt.Bucket, scope string, old, at int64) error {
	if old == at {
		return nil
	}
	if old != 0 {
		if err := index.Delete(reviewKey(old, scope)); err != nil {
			return err
		}
	}
	if at != 0 {
		return index.Put(reviewKey(at, scope), nil)
	}
	return nil
}

// Read implements ledger.Store.
func (s *Store) Read(ctx context.Context, scope string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var doc []byte
	err := s.db.View(func(tx *bbolt.Tx) (err error) {
		doc, err = s.current(tx, scope)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("bolt store: read %q: %w", scope, err)
	}
	return doc, nil
}

// ReadControl implements ledger.Store.
func (s *Store) ReadControl(ctx context.Context, name string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var rec []byte
	err := s.db.View(func(tx *bbolt.Tx) error {
		rec = bytes.Clone(tx.Bucket(bucketControl).Get([]byte(name)))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bolt store: read control record %q: %w", name, err)
	}
	return rec, nil
}

// TransactControl implements ledger.Store. Control records change rarely
// (an operator pausing a source): each write is a commit of its own,
// outside the group commit.
func (s *Store) TransactControl(ctx context.Context, name string, fn func([]byte) ([]byte, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var fnErr error
	err := s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketControl)
		rec, err := fn(bytes.Clone(b.Get([]byte(name))))
		if err != nil || rec == nil {
			fnErr = err
			return nil
		}
		return b.Put([]byte(name), rec)
	})
	if err != nil {
		return fmt.Errorf("bolt store: control record %q: %w", name, err)
	}
	return fnErr
}

// ScopesToReview implements ledger.Store.
func (s *Store) ScopesToReview(ctx context.Context, notAfter time.Time, limit int) ([]string, error) {
	out, err := s.scopesIn(ctx, bucketReview, time.Time{}, notAfter, limit)
	if err != nil {
		return nil, fmt.Errorf("bolt store: list scopes to review: %w", err)
	}
	return out, nil
}

// ScopesDue implements ledger.Store.
func (s *Store) ScopesDue(ctx context.Context, notAfter time.Time, limit int) ([]string, error) {
	out, err := s.scopesIn(ctx, bucketDue, time.Time{}, notAfter, limit)
	if err != nil {
		return nil, fmt.Errorf("bolt store: list scopes due: %w", err)
	}
	return out, nil
}

// ScopesDueBetween implements ledger.Store: a seek to from in the due index.
func (s *Store) ScopesDueBetween(ctx context.Context, from, notAfter time.Time, limit int) ([]string, error) {
	out, err := s.scopesIn(ctx, bucketDue, from, notAfter, limit)
	if err != nil {
		return nil, fmt.Errorf("bolt store: list scopes due: %w", err)
	}
	return out, nil
}

// CountDue implements ledger.Store: the walk ScopesDue makes, counted.
func (s *Store) CountDue(ctx context.Context, notAfter time.Time) (int, error) {
	n := 0
	err := s.walkIndex(ctx, bucketDue, time.Time{}, notAfter, func([]byte) bool { n++; return true })
	if err != nil {
		return 0, fmt.Errorf("bolt store: count scopes due: %w", err)
	}
	return n, nil
}

// scopesIn lists up to limit scopes of a time index from from (see
// walkIndex).
func (s *Store) scopesIn(ctx context.Context, bucket []byte, from, notAfter time.Time, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, ctx.Err()
	}
	var out []string
	err := s.walkIndex(ctx, bucket, from, notAfter, func(scope []byte) bool {
		if len(out) == limit {
			return false
		}
		out = append(out, string(scope))
		return true
	})
	return out, err
}

// walkIndex walks a time index (keys: big-endian time, then scope) from
// from (its start when zero) up to notAfter, skipping scopes whose document
// has expired, until visit returns false.
func (s *Store) walkIndex(ctx context.Context, bucket []byte, from, notAfter time.Time, visit func(scope []byte) bool) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	limitKey := notAfter.UnixNano()
	now := s.now().UnixNano()
	return s.db.View(func(tx *bbolt.Tx) error {
		metas := tx.Bucket(bucketMeta)
		c := tx.Bucket(bucket).Cursor()
		k, _ := c.First()
		if !from.IsZero() {
			var start [8]byte
			binary.BigEndian.PutUint64(start[:], uint64(from.UnixNano()))
			k, _ = c.Seek(start[:])
		}
		for ; k != nil; k, _ = c.Next() {
			if len(k) < 8 || int64(binary.BigEndian.Uint64(k[:8])) > limitKey {
				return nil
			}
			if m := readMeta(metas.Get(k[8:])); m.expires != 0 && now >= m.expires {
				continue
			}
			if !visit(k[8:]) {
				return nil
			}
		}
		return nil
	})
}

// ReadBlob implements ledger.Store: ReadBlobs of one name.
func (s *Store) ReadBlob(ctx context.Context, scope, name string) ([]byte, error) {
	bs, err := s.ReadBlobs(ctx, scope, []string{name})
	if err != nil {
		return nil, err
	}
	return bs[0], nil
}

// ReadBlobs implements ledger.Store: one read transaction for all names.
func (s *Store) ReadBlobs(ctx context.Context, scope string, names []string) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	out := make([][]byte, len(names))
	err := s.db.View(func(tx *bbolt.Tx) error {
		if s.live(tx, scope) == nil {
			return nil
		}
		b := tx.Bucket(bucketBlobs)
		for i, name := range names {
			out[i] = bytes.Clone(b.Get(blobKey(scope, name)))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bolt store: read blobs %q of %q: %w", names, scope, err)
	}
	return out, nil
}

// DeleteExpired removes documents past their physical expiry and returns
// how many it removed.
func (s *Store) DeleteExpired(ctx context.Context) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	now := s.now().UnixNano()
	n := 0
	err := s.db.Update(func(tx *bbolt.Tx) error {
		metas := tx.Bucket(bucketMeta)
		var expired [][]byte
		err := metas.ForEach(func(k, v []byte) error {
			if m := readMeta(v); m.expires != 0 && now >= m.expires {
				expired = append(expired, bytes.Clone(k))
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, k := range expired {
			m := readMeta(metas.Get(k))
			if m.review != 0 {
				if err := tx.Bucket(bucketReview).Delete(reviewKey(m.review, string(k))); err != nil {
					return err
				}
			}
			if m.due != 0 {
				if err := tx.Bucket(bucketDue).Delete(reviewKey(m.due, string(k))); err != nil {
					return err
				}
			}
			if err := putReceived(tx, string(k), time.Time{}); err != nil {
				return err
			}
			if err := deleteBlobs(tx, string(k)); err != nil {
				return err
			}
			if err := metas.Delete(k); err != nil {
				return err
			}
			if err := tx.Bucket(bucketDocs).Delete(k); err != nil {
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("bolt store: delete expired: %w", err)
	}
	return n, nil
}

// putReceived replaces scope's key in the received index by one at at
// (none when at is zero).
func putReceived(tx *bbolt.Tx, scope string, at time.Time) error {
	index, ats := tx.Bucket(bucketReceived), tx.Bucket(bucketReceivedAt)
	var oldAt int64
	if old := ats.Get([]byte(scope)); len(old) == 8 {
		oldAt = int64(binary.BigEndian.Uint64(old))
	}
	var newAt int64
	if !at.IsZero() {
		newAt = at.UnixNano()
	}
	if oldAt == newAt {
		return nil
	}
	if err := moveIndexKey(index, scope, oldAt, newAt); err != nil {
		return err
	}
	if newAt == 0 {
		return ats.Delete([]byte(scope))
	}
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(newAt))
	return ats.Put([]byte(scope), b[:])
}

// ScopesReceived implements ledger.Store: it walks the received index
// backwards from the cursor, skipping scopes whose document has expired.
func (s *Store) ScopesReceived(ctx context.Context, before ledger.ScopeAt, limit int) ([]ledger.ScopeAt, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var out []ledger.ScopeAt
	now := s.now().UnixNano()
	err := s.db.View(func(tx *bbolt.Tx) error {
		metas := tx.Bucket(bucketMeta)
		c := tx.Bucket(bucketReceived).Cursor()
		var k []byte
		if before.At.IsZero() {
			k, _ = c.Last()
		} else if k, _ = c.Seek(reviewKey(before.At.UnixNano(), before.Scope)); k == nil {
			k, _ = c.Last()
		} else {
			k, _ = c.Prev() // Seek lands at or after the cursor: step before it
		}
		for ; k != nil && len(out) < limit; k, _ = c.Prev() {
			if len(k) < 8 {
				continue
			}
			if m := readMeta(metas.Get(k[8:])); m.expires != 0 && now >= m.expires {
				continue
			}
			out = append(out, ledger.ScopeAt{Scope: string(k[8:]), At: time.Unix(0, int64(binary.BigEndian.Uint64(k[:8]))).UTC()})
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bolt store: list scopes received: %w", err)
	}
	return out, nil
}
