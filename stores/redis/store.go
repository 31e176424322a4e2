package redis

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/internal/scopelock"
)

// Defaults for the zero values of Options.
const (
	DefaultKeyPrefix  = "replyonce:"
	DefaultMaxRetries = 100
	DefaultCacheSize  = 10000
)

// reviewBuckets is how many review indexes the scopes are spread over. Each
// bucket is one hash tag, so it is also the number of Cluster slots the
// store's keys can occupy. Changing it re-homes every key: it is a constant,
// not an option, on purpose.
const reviewBuckets = 256

// Backoff between optimistic attempts once the first immediate retry has
// also lost. The window starts at about one round trip (as measured on the
// losing attempt) and doubles with every further loss, so a crowd of N
// writers on one scope thins out to about one attempt per round trip after
// log2(N) losses instead of colliding in lockstep; the wait is a uniform
// draw from the window, so writers do not re-collide either.
const (
	minBackoff = 200 * time.Microsecond
	maxBackoff = 250 * time.Millisecond
)

// Options tunes a Store. The zero value is usable.
type Options struct {
	// KeyPrefix starts every key the store touches, so several ledgers (or
	// tests) can share one Redis. It must not contain '{' or '}': the store
	// places its own hash tag right after it. Default "replyonce:".
	KeyPrefix string

	// MaxRetries is how many times one Transact may lose the race to
	// another writer of the same scope before it gives up with a
	// *ContentionError. Attempts that failed only because this process's
	// cached copy was out of date are not counted. Default 100.
	MaxRetries int

	// CacheSize bounds how many scopes' last known documents are kept in
	// memory to save the read before each write. Zero means
	// DefaultCacheSize; a negative value turns the cache off (every
	// Transact on an existing scope then costs two round trips).
	CacheSize int

	// MaxBatch bounds how many concurrent writes are sent together in one
	// pipeline when more are waiting than round trips are free. Zero means
	// DefaultMaxBatch; 1 or a negative value sends every write on its own.
	MaxBatch int

	// Replicas is how many replicas must have acknowledged a write (Redis
	// WAIT, sent on the same connection right after it) before Transact
	// reports it done; a write that has not reached them within
	// ReplicasTimeout fails with a *ReplicasError. A Transact that decides
	// not to write, on a document read from the store, waits the same way
	// for what it read, so an answer never rests on a write the replicas
	// may not have. 0 waits for none. It needs a *goredis.Client (a
	// single server or Sentinel) or a *goredis.ClusterClient.
	Replicas int
	// ReplicasTimeout bounds each wait for Replicas; zero means
	// DefaultReplicasTimeout.
	ReplicasTimeout time.Duration
}

// Validate reports options that New would refuse.
func (o Options) Validate() error {
	if strings.ContainsAny(o.KeyPrefix, "{}") {
		return fmt.Errorf("redis store: key_prefix %q: must not contain '{' or '}' (the store adds its own Cluster hash tag)", o.KeyPrefix)
	}
	if o.MaxRetries < 0 {
		return fmt.Errorf("redis store: max_retries %d: must not be negative", o.MaxRetries)
	}
	if o.Replicas < 0 {
		return fmt.Errorf("redis store: replicas %d: must not be negative", o.Replicas)
	}
	if o.ReplicasTimeout < 0 {
		return fmt.Errorf("redis store: replicas_timeout %s: must not be negative", o.ReplicasTimeout)
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.KeyPrefix == "" {
		o.KeyPrefix = DefaultKeyPrefix
	}
	if o.MaxRetries == 0 {
		o.MaxRetries = DefaultMaxRetries
	}
	if o.CacheSize == 0 {
		o.CacheSize = DefaultCacheSize
	}
	if o.MaxBatch == 0 {
		o.MaxBatch = DefaultMaxBatch
	}
	if o.ReplicasTimeout == 0 {
		o.ReplicasTimeout = DefaultReplicasTimeout
	}
	return o
}

// Store is a ledger.Store kept in Redis. It is safe for concurrent use by
// any number of goroutines, and any number of Stores in any number of
// processes may share one Redis (or Cluster) with the same KeyPrefix.
type Store struct {
	client     goredis.UniversalClient
	prefix     string
	maxRetries int
	cache      *docCache
	locks      *scopelock.Table // this process's Transacts, one per scope at a time
	ownsClient bool
	batch      *batcher

	replicas        int
	replicasTimeout time.Duration

	// Per bucket, the start of its scopes' keys and its index key, built
	// once so the hot path allocates one string per key.
	docPrefixes  [reviewBuckets]string
	indexKeys    [reviewBuckets]string
	dueKeys      [reviewBuckets]string
	receivedKeys [reviewBuckets]string
	blobPrefixes [reviewBuckets]string
}

var _ ledger.Store = (*Store)(nil)

var _ ledger.AbsenceChecker = (*Store)(nil)

// ChecksAbsent implements ledger.AbsenceChecker: the write's
// compare-and-set refuses a write whose Absent names a record that exists.
func (s *Store) ChecksAbsent() bool { return true }

// ContentionError is returned when a Transact lost the race for one scope
// more than Options.MaxRetries times in a row. It matches
// ledger.ErrContention with errors.Is. It is a store failure, never a
// decision.
type ContentionError struct {
	Scope     string
	Conflicts int
}

func (e *ContentionError) Error() string {
	return fmt.Sprintf("redis store: scope %q: gave up after %d conflicting writes: %v", e.Scope, e.Conflicts, ledger.ErrContention)
}

func (e *ContentionError) Unwrap() error { return ledger.ErrContention }

// New returns a Store that keeps its documents in client.
//
// New panics when opts does not pass Validate, when client is a go-redis
// Client, ClusterClient or Ring built without ContextTimeoutEnabled (such a
// client lets a stalled connection hold a call for its ReadTimeout whatever
// the caller's deadline, which breaks the store's promise to give up when
// the context does), or when opts.Replicas is set and client is neither a
// Client nor a ClusterClient. Open and Topology.Open build suitable
// clients.
func New(client goredis.UniversalClient, opts Options) *Store {
	if err := opts.Validate(); err != nil {
		panic(err)
	}
	if !honoursContext(client) {
		panic("redis store: the client must be built with ContextTimeoutEnabled: true so calls end at the caller's deadline")
	}
	opts = opts.withDefaults()
	s := &Store{
		client:          client,
		prefix:          opts.KeyPrefix,
		maxRetries:      opts.MaxRetries,
		cache:           newDocCache(opts.CacheSize),
		locks:           scopelock.New(),
		replicas:        opts.Replicas,
		replicasTimeout: opts.ReplicasTimeout,
	}
	if s.replicas > 0 {
		switch client.(type) {
		case *goredis.Client, *goredis.ClusterClient:
		default:
			panic(fmt.Sprintf("redis store: Options.Replicas needs a go-redis Client or ClusterClient, not %T", client))
		}
	}
	s.batch = newBatcher(s, opts.MaxBatch, pipelinesInFlight)
	for b := range reviewBuckets {
		tag := opts.KeyPrefix + bucketTag(uint32(b))
		s.docPrefixes[b] = tag + ":s:"
		s.indexKeys[b] = tag + ":review"
		s.dueKeys[b] = tag + ":due"
		s.receivedKeys[b] = tag + ":received"
		s.blobPrefixes[b] = tag + ":b:"
	}
	return s
}

func honoursContext(c goredis.UniversalClient) bool {
	switch c := c.(type) {
	case *goredis.Client:
		return c.Options().ContextTimeoutEnabled
	case *goredis.ClusterClient:
		return c.Options().ContextTimeoutEnabled
	case *goredis.Ring:
		return c.Options().ContextTimeoutEnabled
	}
	// Another implementation (a wrapper, a test double): its owner vouches
	// for it.
	return true
}

// Open connects to the single Redis server at url (redis://, rediss:// or
// unix://, with the query options go-redis understands), checks that it
// answers, and returns a Store that owns the connection pool: Close
// releases it. The pool is at least 64 connections unless the URL says
// otherwise, since every concurrent request holds one for its round trip.
// Config.Topology and Topology.Open reach Cluster and Sentinel too.
func Open(ctx context.Context, url string, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	t, err := Config{}.Topology(url)
	if err != nil {
		return nil, fmt.Errorf("redis store: %w", err)
	}
	return t.Open(ctx, opts)
}

// Close ends the store: writes still queued for a pipeline fail unsent,
// pipelines in flight are cancelled, and Close returns once they have
// ended. It also releases the connection pool if Open created it; a client
// passed to New stays its caller's to close. Transact fails after Close.
func (s *Store) Close() error {
	s.batch.Close()
	if !s.ownsClient {
		return nil
	}
	if err := s.client.Close(); err != nil {
		return fmt.Errorf("redis store: close: %w", err)
	}
	return nil
}

// Client is the go-redis client the store writes through, for a caller
// that looks at the server itself (bench reads its CPU and memory); it
// stays the store's when Open created it.
func (s *Store) Client() goredis.UniversalClient { return s.client }

// Ping reports whether the server answers, for readiness checks.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return s.failed(fmt.Errorf("redis store: ping: %w", err))
	}
	return nil
}

// Transact implements ledger.Store. In the common case (this process wrote
// or read the scope last, or the scope is new) it costs one round trip: fn
// runs on the cached document and the script checks that guess while
// writing. A lost race hands back the winner's document in the same reply,
// and fn runs again on it.
func (s *Store) Transact(ctx context.Context, scope string, fn func(current []byte) (*ledger.Write, error)) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("redis store: transact %q: %w", scope, err)
	}
	// Goroutines of this process that write one scope take turns, each
	// deciding on what the one before wrote, instead of making each
	// other's compare-and-set fail (see scopelock).
	unlock, err := s.locks.Lock(ctx, scope)
	if err != nil {
		return fmt.Errorf("redis store: transact %q: waiting for other goroutines on this scope: %w", scope, err)
	}
	defer unlock()
	key := s.docKey(scope)
	// An unknown scope is guessed to be absent: token "" asks the script
	// for "no document", so a wrong guess costs one extra round trip.
	token, doc, _ := s.cache.get(scope)
	fresh := false
	conflicts := 0
	for {
		w, err := fn(bytes.Clone(doc))
		if err != nil || w == nil {
			if !fresh {
				// A refusal or a read-only answer drawn from a guess must
				// not leave the store unchecked: a write from elsewhere may
				// change the answer.
				cur, curDoc, lerr := s.load(ctx, key)
				if lerr != nil {
					return s.failed(fmt.Errorf("redis store: transact %q: %w", scope, lerr))
				}
				s.remember(scope, cur, curDoc)
				fresh = true
				if cur != token {
					token, doc = cur, curDoc
					continue
				}
				// fn is pure: same input, same answer
			}
			if err == nil && token != "" && s.replicas > 0 {
				// The answer rests on the document as read: the replicas
				// must have it too.
				switch cerr := s.confirm(ctx, key, token); {
				case errors.Is(cerr, errChanged):
					// Another writer got in between: decide again on
					// what it wrote, as after a lost race.
					conflicts++
					if conflicts > s.maxRetries {
						return &ContentionError{Scope: scope, Conflicts: conflicts}
					}
					cur, curDoc, lerr := s.load(ctx, key)
					if lerr != nil {
						return s.failed(fmt.Errorf("redis store: transact %q: %w", scope, lerr))
					}
					s.remember(scope, cur, curDoc)
					token, doc = cur, curDoc
					continue
				case cerr != nil:
					return s.failed(fmt.Errorf("redis store: transact %q: %w", scope, cerr))
				}
			}
			return err
		}

		next := newToken()
		sent := time.Now()
		r := s.batch.Do(ctx, casArgs{scope: scope, key: key, expect: token, next: next, w: w})
		rtt := time.Since(sent)
		if r.err != nil {
			// The write may or may not have landed; forget the guess.
			s.cache.drop(scope)
			return s.failed(fmt.Errorf("redis store: transact %q: %w", scope, r.err))
		}
		cur, curDoc := r.token, r.doc
		if r.won {
			s.cache.put(scope, next, bytes.Clone(w.Doc))
			return nil
		}
		if r.present != nil {
			// The document was the one fn decided on (the token
			// matched), so the cached guess stays.
			return &ledger.PresentError{Blobs: r.present}
		}
		s.remember(scope, cur, curDoc)
		wasFresh := fresh
		token, doc, fresh = cur, curDoc, true
		if !wasFresh {
			continue // only our cache was behind, nobody raced us
		}
		conflicts++
		if conflicts > s.maxRetries {
			return &ContentionError{Scope: scope, Conflicts: conflicts}
		}
		if err := sleepBackoff(ctx, conflicts, rtt); err != nil {
			return fmt.Errorf("redis store: transact %q: %w", scope, err)
		}
	}
}

// Read implements ledger.Store with one round trip. What it reads also
// primes the cache for the next Transact on the scope.
func (s *Store) Read(ctx context.Context, scope string) ([]byte, error) {
	token, doc, err := s.load(ctx, s.docKey(scope))
	if err != nil {
		return nil, s.failed(fmt.Errorf("redis store: read %q: %w", scope, err))
	}
	s.remember(scope, token, doc)
	return bytes.Clone(doc), nil
}

// maxPruneRounds bounds how often ScopesToReview starts over after removing
// index entries of documents that expired.
const maxPruneRounds = 4

// ScopesToReview implements ledger.Store. It asks every bucket's index for
// its oldest entries (one pipelined round trip), merges them, checks the
// winners still exist and are held by the index (a second), and drops
// entries of expired documents, and those an earlier life of a scope left
// behind (the write script does not clear them when it creates a
// document; see casScript). The write script keeps the index exact
// otherwise, so those are the only ways it can name a scope that does not
// need review.
func (s *Store) ScopesToReview(ctx context.Context, notAfter time.Time, limit int) ([]string, error) {
	out, err := s.scopesIn(ctx, &s.indexKeys, inReview, time.Time{}, notAfter, limit)
	if err != nil {
		return nil, s.failed(fmt.Errorf("redis store: scopes to review: %w", err))
	}
	return out, nil
}

// ScopesDue implements ledger.Store the same way, over the due indexes.
func (s *Store) ScopesDue(ctx context.Context, notAfter time.Time, limit int) ([]string, error) {
	out, err := s.scopesIn(ctx, &s.dueKeys, inDue, time.Time{}, notAfter, limit)
	if err != nil {
		return nil, s.failed(fmt.Errorf("redis store: scopes due: %w", err))
	}
	return out, nil
}

// ScopesDueBetween implements ledger.Store: the same merge, each bucket's
// index read from from.
func (s *Store) ScopesDueBetween(ctx context.Context, from, notAfter time.Time, limit int) ([]string, error) {
	out, err := s.scopesIn(ctx, &s.dueKeys, inDue, from, notAfter, limit)
	if err != nil {
		return nil, s.failed(fmt.Errorf("redis store: scopes due: %w", err))
	}
	return out, nil
}

// CountDue implements ledger.Store: ZCOUNT on every bucket of the due
// index, in one pipeline. A scope whose document expired, or whose earlier
// life left an entry, is counted until a sweep meets it and prunes it
// from its bucket.
func (s *Store) CountDue(ctx context.Context, notAfter time.Time) (int, error) {
	stop := strconv.FormatInt(notAfter.UnixMilli(), 10)
	cmds := make([]*goredis.IntCmd, reviewBuckets)
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for b := range reviewBuckets {
			cmds[b] = p.ZCount(ctx, s.dueKeys[b], "-inf", stop)
		}
		return nil
	})
	if err != nil {
		return 0, s.failed(fmt.Errorf("redis store: count scopes due: %w", err))
	}
	n := 0
	for _, c := range cmds {
		n += int(c.Val())
	}
	return n, nil
}

// ReadBlob implements ledger.Store. The blob hash expires with the
// document, so a blob is there only while its document is.
func (s *Store) ReadBlob(ctx context.Context, scope, name string) ([]byte, error) {
	v, err := s.client.HGet(ctx, s.blobKey(scope), name).Bytes()
	switch {
	case errors.Is(err, goredis.Nil):
		return nil, nil
	case err != nil:
		return nil, s.failed(fmt.Errorf("redis store: read blob %q of %q: %w", name, scope, err))
	}
	return v, nil
}

// ReadBlobs implements ledger.Store with one HMGET: the blobs of a scope
// are fields of one hash.
func (s *Store) ReadBlobs(ctx context.Context, scope string, names []string) ([][]byte, error) {
	out := make([][]byte, len(names))
	if len(names) == 0 {
		return out, nil
	}
	vals, err := s.client.HMGet(ctx, s.blobKey(scope), names...).Result()
	if err != nil {
		return nil, s.failed(fmt.Errorf("redis store: read blobs %q of %q: %w", names, scope, err))
	}
	for i, v := range vals {
		switch v := v.(type) {
		case nil:
		case string:
			out[i] = []byte(v)
		default:
			return nil, fmt.Errorf("redis store: blob %q of %q of type %T", names[i], scope, v)
		}
	}
	return out, nil
}

// blobKey is prefix{bb}:b:scope, in the scope's slot.
func (s *Store) blobKey(scope string) string {
	return s.blobPrefixes[bucketOf(scope)] + scope
}

// scopesIn lists scopes from one kind of per-bucket time index, whose flag
// in the scope hash's x is flag.
func (s *Store) scopesIn(ctx context.Context, index *[reviewBuckets]string, flag int, from, notAfter time.Time, limit int) ([]string, error) {
	if limit <= 0 {
		return nil, nil
	}
	start := "-inf"
	if !from.IsZero() {
		// Scores are Unix milliseconds; a from within a millisecond
		// starts at that millisecond.
		start = strconv.FormatInt(from.UnixMilli(), 10)
	}
	stop := strconv.FormatInt(notAfter.UnixMilli(), 10)
	for round := 0; ; round++ {
		cands, err := s.reviewCandidates(ctx, index, start, stop, limit)
		if err != nil {
			return nil, err
		}
		held, err := s.heldIn(ctx, cands, flag)
		if err != nil {
			return nil, err
		}
		out := make([]string, 0, len(cands))
		var gone []string
		for i, c := range cands {
			if held[i] {
				out = append(out, c.scope)
			} else {
				gone = append(gone, c.scope)
			}
		}
		if len(gone) == 0 || round == maxPruneRounds {
			return out, nil
		}
		for _, scope := range gone {
			b := bucketOf(scope)
			err := pruneScript.Run(ctx, s.client, []string{index[b], s.docKey(scope)}, scope, flag).Err()
			if err != nil {
				return nil, fmt.Errorf("prune %q: %w", scope, err)
			}
		}
	}
}

// The flags of the scope hash's x (see casScript): the indexes the last
// write left the scope in.
const (
	inReview   = 1
	inDue      = 2
	inReceived = 4
)

// heldIn reports, for each candidate, whether its index (flag) holds its
// scope: its document exists and its x, when it has one under the
// document's token, has the index's flag. One pipelined round trip.
func (s *Store) heldIn(ctx context.Context, cands []candidate, flag int) ([]bool, error) {
	if len(cands) == 0 {
		return nil, nil
	}
	cmds := make([]*goredis.SliceCmd, len(cands))
	_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
		for i, c := range cands {
			cmds[i] = p.HMGet(ctx, s.docKey(c.scope), "t", "x")
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	held := make([]bool, len(cands))
	for i, cmd := range cmds {
		vals := cmd.Val()
		if len(vals) != 2 || vals[0] == nil {
			continue // the document has gone
		}
		tok, _ := vals[0].(string)
		x, _ := vals[1].(string)
		flags, known := heldFlags(tok, x)
		held[i] = !known || flags&flag != 0
	}
	return held, nil
}

// heldFlags reads the flags of x, the write script's record of what the
// write that set token tok left behind; known is false when x is not that
// write's (an older gateway's write kept none).
func heldFlags(tok, x string) (flags int, known bool) {
	rest, ok := strings.CutPrefix(x, tok+":")
	if !ok || tok == "" {
		return 0, false
	}
	end := strings.IndexByte(rest, ':')
	if end < 0 {
		end = len(rest)
	}
	f, err := strconv.Atoi(rest[:end])
	if err != nil || f < 0 {
		return 0, false
	}
	return f, true
}

type candidate struct {
	scope string
	at    float64
}

// reviewCandidates returns up to limit entries of the bucket indexes
// with scores in [start, stop], in (score, scope) order across buckets.
//
// It reads a few entries from every bucket first (one pipelined round
// trip), then more only from the buckets whose last entry read is not
// after the limit-th candidate so far: only they can hold more of the
// answer, since each bucket is read in that same order. Reading the limit
// from every bucket, as it did before, moved 256 × limit entries per call:
// 16,384 for a dispatcher's page of 64, which made draining a large Redis
// backlog slower the larger it was (issue #29).
func (s *Store) reviewCandidates(ctx context.Context, index *[reviewBuckets]string, start, stop string, limit int) ([]candidate, error) {
	first := int64(min(limit, max(4, 2*limit/reviewBuckets+1)))
	read := make([]int64, reviewBuckets) // entries read from each bucket
	last := make([]candidate, reviewBuckets)
	more := make([]bool, reviewBuckets) // the last read filled its count
	want := make([]int64, reviewBuckets)
	for b := range want {
		want[b] = first
	}
	var all []candidate
	for {
		var asked []int
		for b, n := range want {
			if n > 0 {
				asked = append(asked, b)
			}
		}
		if len(asked) == 0 {
			break
		}
		cmds := make([]*goredis.ZSliceCmd, len(asked))
		_, err := s.client.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for i, b := range asked {
				cmds[i] = p.ZRangeArgsWithScores(ctx, goredis.ZRangeArgs{
					Key:     index[b],
					ByScore: true,
					Start:   start,
					Stop:    stop,
					Offset:  read[b],
					Count:   want[b],
				})
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		for i, b := range asked {
			zs := cmds[i].Val()
			for _, z := range zs {
				scope, ok := z.Member.(string)
				if !ok {
					return nil, fmt.Errorf("review index member of type %T", z.Member)
				}
				c := candidate{scope: scope, at: z.Score}
				all = append(all, c)
				last[b] = c
			}
			read[b] += int64(len(zs))
			more[b] = int64(len(zs)) == want[b]
			want[b] = 0
		}
		slices.SortFunc(all, compareCandidates)
		if len(all) > limit {
			all = all[:limit]
		}
		for b := range more {
			// A bucket whose last entry comes after the limit-th candidate
			// holds nothing more of the answer.
			if more[b] && (len(all) < limit || compareCandidates(last[b], all[limit-1]) < 0) {
				want[b] = int64(limit)
			}
			more[b] = false
		}
	}
	return all, nil
}

func compareCandidates(a, b candidate) int {
	if a.at != b.at {
		if a.at < b.at {
			return -1
		}
		return 1
	}
	return strings.Compare(a.scope, b.scope)
}

// failed returns err, a failed call's, after asking a Cluster client to
// read the slot map again. go-redis does so by itself after a MOVED
// redirect, but not when a node stops answering: without this, the slots
// of a master that died would keep failing after its replica took over,
// until the client's periodic refresh (a minute). The refresh runs in the
// background, at most one at a time.
func (s *Store) failed(err error) error {
	s.refreshClusterMap(context.Background())
	return err
}

// refreshClusterMap asks a Cluster client to read the slot map again.
func (s *Store) refreshClusterMap(ctx context.Context) {
	if c, ok := s.client.(*goredis.ClusterClient); ok {
		c.ReloadState(ctx)
	}
}

// load reads a scope's token and document; token "" means no document.
func (s *Store) load(ctx context.Context, key string) (token string, doc []byte, err error) {
	vals, err := s.client.HMGet(ctx, key, "t", "d").Result()
	if err != nil {
		return "", nil, err
	}
	if len(vals) != 2 || vals[0] == nil {
		return "", nil, nil
	}
	t, ok1 := vals[0].(string)
	d, ok2 := vals[1].(string)
	if !ok1 || !ok2 {
		return "", nil, fmt.Errorf("key %s: unexpected reply %T, %T", key, vals[0], vals[1])
	}
	return t, []byte(d), nil
}

func (s *Store) remember(scope, token string, doc []byte) {
	if token == "" {
		s.cache.drop(scope)
		return
	}
	s.cache.put(scope, token, doc)
}

// docKey is prefix{bb}:s:scope, where bb names the scope's bucket; the
// bucket's review index prefix{bb}:review shares the hash tag and so the
// Cluster slot.
func (s *Store) docKey(scope string) string {
	return s.docPrefixes[bucketOf(scope)] + scope
}

func (s *Store) indexKey(bucket uint32) string {
	return s.indexKeys[bucket]
}

func bucketTag(b uint32) string {
	const hexdigits = "0123456789abcdef"
	return string([]byte{'{', hexdigits[b>>4], hexdigits[b&0xf], '}'})
}

// bucketOf spreads scopes over the buckets with 32-bit FNV-1a.
func bucketOf(scope string) uint32 {
	h := uint32(2166136261)
	for i := 0; i < len(scope); i++ {
		h ^= uint32(scope[i])
		h *= 16777619
	}
	return h % reviewBuckets
}

// newToken returns a fresh version token. Tokens are random rather than
// counters so a key that expired and was created again, or a write lost in
// a failover and made again by someone else, can never look like the
// version a stale cache remembers.
func newToken() string {
	return strconv.FormatUint(rand.Uint64(), 36)
}

func sleepBackoff(ctx context.Context, conflicts int, rtt time.Duration) error {
	if conflicts < 2 {
		return nil // the reply carried the fresh document: just try again
	}
	window := max(rtt, minBackoff)
	for i := 2; i < conflicts && window < maxBackoff; i++ {
		window *= 2
	}
	t := time.NewTimer(rand.N(min(window, maxBackoff)) + 1)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
