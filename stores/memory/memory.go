package memory

import (
	"context"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// Store is an in-memory ledger.Store.
type Store struct {
	now func() time.Time

	mu   sync.Mutex
	docs map[string]record
	// dueSet and reviewSet name the scopes whose record has a due or a
	// review time, so that a sweep scans those, not every document.
	dueSet, reviewSet map[string]struct{}
	// controls are the control records, a map of their own: no scope
	// reaches them.
	controls map[string][]byte
}

type record struct {
	doc      []byte
	expires  time.Time // zero: no physical expiry
	reviewAt time.Time
	dueAt    time.Time
	received time.Time
	blobs    map[string][]byte // live and die with the document
}

var _ ledger.Store = (*Store)(nil)

// New returns an empty store. clock judges physical expiry of documents
// (nil: time.Now); the ledger judges logical expiry with its own clock.
func New(clock func() time.Time) *Store {
	if clock == nil {
		clock = time.Now
	}
	return &Store{now: clock, docs: map[string]record{}, dueSet: map[string]struct{}{}, reviewSet: map[string]struct{}{},
		controls: map[string][]byte{}}
}

// current returns the scope's live document; the caller holds mu.
func (s *Store) current(scope string) []byte {
	r, ok := s.docs[scope]
	if !ok {
		return nil
	}
	if !r.expires.IsZero() && !s.now().Before(r.expires) {
		s.set(scope, record{}, false)
		return nil
	}
	return r.doc
}

// Transact implements ledger.Store.
func (s *Store) Transact(ctx context.Context, scope string, fn func([]byte) (*ledger.Write, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.current(scope)
	w, err := fn(clone(cur))
	if err != nil || w == nil {
		return err
	}
	if cur != nil {
		if present := presentOf(s.docs[scope].blobs, w.Absent); present != nil {
			return present
		}
	}
	r := record{doc: clone(w.Doc), reviewAt: w.ReviewAt, dueAt: w.DueAt, blobs: s.docs[scope].blobs}
	r.received = w.ReceivedAt
	if cur == nil {
		r.blobs = nil // an expired document's blobs went with it
	}
	for name, b := range w.Blobs {
		if b == nil {
			delete(r.blobs, name)
			continue
		}
		if r.blobs == nil {
			r.blobs = map[string][]byte{}
		}
		r.blobs[name] = clone(b)
	}
	if w.TTL > 0 {
		r.expires = s.now().Add(w.TTL)
	}
	s.set(scope, r, true)
	return nil
}

// ChecksAbsent implements ledger.AbsenceChecker: Transact refuses a write
// whose Absent names a record that exists. A read costs this store no
// round trip, so it gains nothing by it; it checks so that the ledger's
// tests run the path the Postgres and Redis stores take.
func (s *Store) ChecksAbsent() bool { return true }

// presentOf is the error for a write that took names as absent when some
// of blobs exist, or nil.
func presentOf(blobs map[string][]byte, names []string) *ledger.PresentError {
	var found map[string][]byte
	for _, n := range names {
		if b, ok := blobs[n]; ok {
			if found == nil {
				found = map[string][]byte{}
			}
			found[n] = clone(b)
		}
	}
	if found == nil {
		return nil
	}
	return &ledger.PresentError{Blobs: found}
}

// set stores (keep) or deletes scope's record and keeps the time sets in
// step; the caller holds mu.
func (s *Store) set(scope string, r record, keep bool) {
	if keep {
		s.docs[scope] = r
	} else {
		delete(s.docs, scope)
	}
	for _, x := range []struct {
		set map[string]struct{}
		at  time.Time
	}{{s.dueSet, r.dueAt}, {s.reviewSet, r.reviewAt}} {
		if keep && !x.at.IsZero() {
			x.set[scope] = struct{}{}
		} else {
			delete(x.set, scope)
		}
	}
}

// Read implements ledger.Store.
func (s *Store) Read(ctx context.Context, scope string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return clone(s.current(scope)), nil
}

// ReadBlob implements ledger.Store: ReadBlobs of one name.
func (s *Store) ReadBlob(ctx context.Context, scope, name string) ([]byte, error) {
	bs, err := s.ReadBlobs(ctx, scope, []string{name})
	if err != nil {
		return nil, err
	}
	return bs[0], nil
}

// ReadBlobs implements ledger.Store.
func (s *Store) ReadBlobs(ctx context.Context, scope string, names []string) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]byte, len(names))
	if s.current(scope) == nil {
		return out, nil
	}
	for i, name := range names {
		out[i] = clone(s.docs[scope].blobs[name])
	}
	return out, nil
}

// ScopesToReview implements ledger.Store.
func (s *Store) ScopesToReview(ctx context.Context, notAfter time.Time, limit int) ([]string, error) {
	return s.scopesBy(ctx, s.reviewSet, time.Time{}, notAfter, limit, func(r record) time.Time { return r.reviewAt })
}

// ScopesDue implements ledger.Store.
func (s *Store) ScopesDue(ctx context.Context, notAfter time.Time, limit int) ([]string, error) {
	return s.scopesBy(ctx, s.dueSet, time.Time{}, notAfter, limit, func(r record) time.Time { return r.dueAt })
}

// CountDue implements ledger.Store: ScopesDue with no limit, counted.
func (s *Store) CountDue(ctx context.Context, notAfter time.Time) (int, error) {
	scopes, err := s.scopesBy(ctx, s.dueSet, time.Time{}, notAfter, math.MaxInt, func(r record) time.Time { return r.dueAt })
	return len(scopes), err
}

// ScopesDueBetween implements ledger.Store.
func (s *Store) ScopesDueBetween(ctx context.Context, from, notAfter time.Time, limit int) ([]string, error) {
	return s.scopesBy(ctx, s.dueSet, from, notAfter, limit, func(r record) time.Time { return r.dueAt })
}

// scopesBy lists scopes whose time (as at picks it) is set and in [from,
// notAfter], earliest first, among those in set (the scopes whose time is
// set). A scan of those is fine for a test store.
func (s *Store) scopesBy(ctx context.Context, set map[string]struct{}, from, notAfter time.Time, limit int, at func(record) time.Time) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	now := s.now()
	s.mu.Lock()
	type due struct {
		scope string
		at    time.Time
	}
	var all []due
	for scope := range set {
		r := s.docs[scope]
		if t := at(r); !t.IsZero() && !t.Before(from) && !t.After(notAfter) && (r.expires.IsZero() || now.Before(r.expires)) {
			all = append(all, due{scope, t})
		}
	}
	s.mu.Unlock()
	sort.Slice(all, func(i, j int) bool {
		if !all[i].at.Equal(all[j].at) {
			return all[i].at.Before(all[j].at)
		}
		return all[i].scope < all[j].scope
	})
	out := make([]string, 0, min(limit, len(all)))
	for _, d := range all {
		if len(out) == limit {
			break
		}
		out = append(out, d.scope)
	}
	return out, nil
}

// ScopesReceived implements ledger.Store with a scan that keeps the limit
// newest (limit is a page, small), which is fine for a test store.
func (s *Store) ScopesReceived(ctx context.Context, before ledger.ScopeAt, limit int) ([]ledger.ScopeAt, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if limit <= 0 {
		return nil, nil
	}
	now := s.now()
	s.mu.Lock()
	defer s.mu.Unlock()
	top := make([]ledger.ScopeAt, 0, limit+1) // newest first
	for scope, r := range s.docs {
		at := ledger.ScopeAt{Scope: scope, At: r.received}
		if at.At.IsZero() || !at.Before(before) || !r.expires.IsZero() && !now.Before(r.expires) {
			continue
		}
		if len(top) == limit && !top[limit-1].Before(at) {
			continue // older than every one kept
		}
		i := sort.Search(len(top), func(i int) bool { return top[i].Before(at) })
		top = append(top, ledger.ScopeAt{})
		copy(top[i+1:], top[i:])
		top[i] = at
		if len(top) > limit {
			top = top[:limit]
		}
	}
	return top, nil
}

// ReadControl implements ledger.Store.
func (s *Store) ReadControl(ctx context.Context, name string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return clone(s.controls[name]), nil
}

// TransactControl implements ledger.Store.
func (s *Store) TransactControl(ctx context.Context, name string, fn func([]byte) ([]byte, error)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rec, err := fn(clone(s.controls[name]))
	if err != nil || rec == nil {
		return err
	}
	s.controls[name] = clone(rec)
	return nil
}

// clone keeps callers from sharing the store's bytes, as a real store's
// callers never do.
func clone(b []byte) []byte {
	if b == nil {
		return nil
	}
	return append([]byte(nil), b...)
}
