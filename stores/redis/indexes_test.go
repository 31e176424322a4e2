//go:build unix

package redis

import (
	"strconv"
	"strings"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/testservers"
)

// commandCalls reads INFO commandstats: calls per command name.
func commandCalls(t *testing.T, c *goredis.Client) map[string]int {
	t.Helper()
	info, err := c.Info(ctxT(t), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, isCmd := strings.CutPrefix(name, "cmdstat_")
		if !ok || !isCmd {
			continue
		}
		calls, _, _ := strings.Cut(strings.TrimPrefix(rest, "calls="), ",")
		out[name], _ = strconv.Atoi(calls)
	}
	return out
}

// A write removes the scope only from the indexes the previous write left
// it in, adds it only where it is not already at the same time, and
// touches the blob hash only when one may exist (issue #29): a step's
// other commands are ones that could not change anything. Counted on a
// server of the test's own, whose statistics nobody else moves.
func TestWriteTouchesOnlyWhatThePreviousWriteLeft(t *testing.T) {
	srv := testservers.Redis(t)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	s, _ := newTestStoreOn(t, c, Options{})
	ctx := ctxT(t)
	at := time.Now().Add(time.Minute)
	write := func(w ledger.Write) map[string]int {
		t.Helper()
		if err := c.ConfigResetStat(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := s.Transact(ctx, "a", func([]byte) (*ledger.Write, error) { return &w, nil }); err != nil {
			t.Fatal(err)
		}
		return commandCalls(t, c)
	}
	listed := func() (review, due, received bool) {
		t.Helper()
		r, err := s.ScopesToReview(ctx, at, 10)
		if err != nil {
			t.Fatal(err)
		}
		d, err := s.ScopesDue(ctx, at, 10)
		if err != nil {
			t.Fatal(err)
		}
		v, err := s.ScopesReceived(ctx, ledger.ScopeAt{}, 10)
		if err != nil {
			t.Fatal(err)
		}
		return len(r) == 1, len(d) == 1, len(v) == 1
	}
	// A new document touches only the index it sets: an earlier life's
	// entries are the listings' to skip (TestEarlierLifeIsNotListed).
	if n := write(ledger.Write{Doc: []byte(`{"n":1}`), TTL: time.Hour, ReviewAt: at}); n["zrem"] != 0 || n["zadd"] != 1 || n["del"] != 0 || n["pexpire"] != 1 {
		t.Fatalf("creating write: %v", n)
	}
	if r, d, v := listed(); !r || d || v {
		t.Fatalf("after a write with a review time: review %v, due %v, received %v", r, d, v)
	}
	// Only the review index holds the scope, and no blob hash exists.
	if n := write(ledger.Write{Doc: []byte(`{"n":2}`), TTL: time.Hour, DueAt: at}); n["zrem"] != 1 || n["zadd"] != 1 || n["pexpire"] != 1 {
		t.Fatalf("write moving the scope from review to due: %v", n)
	}
	if r, d, v := listed(); r || !d || v {
		t.Fatalf("after a write with a due time: review %v, due %v, received %v", r, d, v)
	}
	if n := write(ledger.Write{Doc: []byte(`{"n":3}`), TTL: time.Hour, Blobs: map[string][]byte{"b": []byte("x")}}); n["zrem"] != 1 || n["zadd"] != 0 || n["pexpire"] != 2 {
		t.Fatalf("write leaving the due index, with a blob: %v", n)
	}
	if r, d, v := listed(); r || d || v {
		t.Fatalf("after a write with neither: review %v, due %v, received %v", r, d, v)
	}
	if n := write(ledger.Write{Doc: []byte(`{"n":4}`), TTL: time.Hour}); n["zrem"] != 0 || n["pexpire"] != 2 {
		t.Fatalf("write after one with a blob: %v", n)
	}
	if b, err := s.ReadBlob(ctx, "a", "b"); err != nil || string(b) != "x" {
		t.Fatalf("blob: %q, %v", b, err)
	}
	if ttl := c.PTTL(ctx, s.blobKey("a")).Val(); ttl <= 0 {
		t.Fatalf("the blob hash has no expiry: %v", ttl)
	}
	// A settle keeps the received time the accept wrote: no ZADD for an
	// index that already holds the scope at that time, one for a time
	// that moved.
	received := at.Add(-time.Hour)
	if n := write(ledger.Write{Doc: []byte(`{"n":5}`), TTL: time.Hour, DueAt: at, ReceivedAt: received}); n["zadd"] != 2 || n["zrem"] != 0 {
		t.Fatalf("write entering the due and received indexes: %v", n)
	}
	if n := write(ledger.Write{Doc: []byte(`{"n":6}`), TTL: time.Hour, DueAt: at, ReceivedAt: received}); n["zadd"] != 0 || n["zrem"] != 0 {
		t.Fatalf("write keeping both times: %v", n)
	}
	if n := write(ledger.Write{Doc: []byte(`{"n":7}`), TTL: time.Hour, DueAt: at.Add(-time.Second), ReceivedAt: received}); n["zadd"] != 1 || n["zrem"] != 0 {
		t.Fatalf("write moving the due time: %v", n)
	}
	if r, d, v := listed(); r || !d || !v {
		t.Fatalf("after a write with a due and a received time: review %v, due %v, received %v", r, d, v)
	}
	if due := c.ZScore(ctx, s.dueKeys[bucketOf("a")], "a").Val(); int64(due) != at.Add(-time.Second).UnixMilli() {
		t.Fatalf("due index holds %v, want the moved time", due)
	}
	if n := write(ledger.Write{Doc: []byte(`{"n":8}`), TTL: time.Hour, ReceivedAt: received}); n["zadd"] != 0 || n["zrem"] != 1 {
		t.Fatalf("settle leaving the due index: %v", n)
	}
	if r, d, v := listed(); r || d || !v {
		t.Fatalf("after a settle: review %v, due %v, received %v", r, d, v)
	}
}

// A scope created again after its document expired may find its earlier
// life's entries in the indexes, since a creating write clears nothing:
// no listing names the scope for an index its new document is not in, and
// the listing prunes those entries, while the index the new document is
// in keeps it.
func TestEarlierLifeIsNotListed(t *testing.T) {
	s, c := newTestStore(t, Options{})
	ctx := ctxT(t)
	at := time.Now().Add(-time.Minute)
	put := func(w ledger.Write) {
		t.Helper()
		if err := s.Transact(ctx, "twice", func([]byte) (*ledger.Write, error) { return &w, nil }); err != nil {
			t.Fatal(err)
		}
	}
	put(ledger.Write{Doc: []byte(`{"life":1}`), TTL: 20 * time.Millisecond, ReviewAt: at, DueAt: at, ReceivedAt: at,
		Blobs: map[string][]byte{"b": []byte("x")}})
	time.Sleep(60 * time.Millisecond)
	// The scope this process cached has expired: a new document.
	s.cache.drop("twice")
	put(ledger.Write{Doc: []byte(`{"life":2}`), TTL: time.Hour, DueAt: at})
	b := bucketOf("twice")
	for _, k := range []string{s.indexKeys[b], s.receivedKeys[b], s.dueKeys[b]} {
		if n := c.ZCard(ctx, k).Val(); n != 1 {
			t.Fatalf("%s holds %d entries before the listings, want the earlier life's 1", k, n)
		}
	}
	if r, err := s.ScopesToReview(ctx, time.Now(), 10); err != nil || len(r) != 0 {
		t.Fatalf("review lists %v (%v), want nothing", r, err)
	}
	if v, err := s.ScopesReceived(ctx, ledger.ScopeAt{}, 10); err != nil || len(v) != 0 {
		t.Fatalf("received lists %v (%v), want nothing", v, err)
	}
	if d, err := s.ScopesDue(ctx, time.Now(), 10); err != nil || len(d) != 1 || d[0] != "twice" {
		t.Fatalf("due lists %v (%v), want the new document", d, err)
	}
	for k, want := range map[string]int64{s.indexKeys[b]: 0, s.receivedKeys[b]: 0, s.dueKeys[b]: 1} {
		if n := c.ZCard(ctx, k).Val(); n != want {
			t.Fatalf("%s holds %d entries after the listings, want %d", k, n, want)
		}
	}
	if got, err := s.ReadBlob(ctx, "twice", "b"); err != nil || got != nil {
		t.Fatalf("the new document reads the earlier life's blob %q (%v)", got, err)
	}
}

// A write by an older gateway's script, which records nothing of what it
// left, makes the next write clear everything, as that script did.
func TestWriteAfterOlderScriptClearsEverything(t *testing.T) {
	s, c := newTestStore(t, Options{})
	ctx := ctxT(t)
	at := time.Now().Add(time.Minute)
	put := func(w ledger.Write) {
		t.Helper()
		if err := s.Transact(ctx, "old", func([]byte) (*ledger.Write, error) { return &w, nil }); err != nil {
			t.Fatal(err)
		}
	}
	put(ledger.Write{Doc: []byte(`{"n":1}`), TTL: time.Hour})
	tok, err := c.HGet(ctx, s.docKey("old"), "t").Result()
	if err != nil {
		t.Fatal(err)
	}
	// The older script writes a due time and a blob, under a new token.
	a := casArgs{scope: "old", key: s.docKey("old"), expect: tok, next: newToken(),
		w: &ledger.Write{Doc: []byte(`{"n":2}`), TTL: time.Hour, DueAt: at, Blobs: map[string][]byte{"b": []byte("x")}}}
	if r, err := olderCasScript.Run(ctx, c, a.keys(s), a.argv()...).Slice(); err != nil || len(r) != 1 {
		t.Fatalf("older script: %v, %v", r, err)
	}
	put(ledger.Write{Doc: []byte(`{"n":3}`), TTL: 2 * time.Hour})
	if d, err := s.ScopesDue(ctx, at, 10); err != nil || len(d) != 0 {
		t.Fatalf("due after a write without a due time: %v, %v", d, err)
	}
	if ttl := c.PTTL(ctx, s.blobKey("old")).Val(); ttl <= time.Hour {
		t.Fatalf("the blob hash the older script wrote kept its expiry: %v", ttl)
	}
}

// A write after one that recorded the indexes it left but not their times
// (x as "token:flags", the gateways of commit 83793c1) adds the scope to
// every index it sets and removes it from every other, as it cannot tell
// which time an index holds.
func TestWriteAfterFlagsWithoutTimesAddsEverything(t *testing.T) {
	srv := testservers.Redis(t)
	c := goredis.NewClient(&goredis.Options{Addr: srv.Addr(), ContextTimeoutEnabled: true})
	t.Cleanup(func() { _ = c.Close() })
	s, _ := newTestStoreOn(t, c, Options{})
	ctx := ctxT(t)
	at := time.Now().Add(-time.Minute)
	w := ledger.Write{Doc: []byte(`{"n":1}`), TTL: time.Hour, DueAt: at, ReceivedAt: at}
	if err := s.Transact(ctx, "f", func([]byte) (*ledger.Write, error) { return &w, nil }); err != nil {
		t.Fatal(err)
	}
	tok := c.HGet(ctx, s.docKey("f"), "t").Val()
	if err := c.HSet(ctx, s.docKey("f"), "x", tok+":6").Err(); err != nil {
		t.Fatal(err)
	}
	if err := c.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	w.Doc = []byte(`{"n":2}`)
	if err := s.Transact(ctx, "f", func([]byte) (*ledger.Write, error) { return &w, nil }); err != nil {
		t.Fatal(err)
	}
	if n := commandCalls(t, c); n["zadd"] != 2 || n["zrem"] != 1 || n["pexpire"] != 2 {
		t.Fatalf("write after flags without times: %v", n)
	}
	if d, err := s.ScopesDue(ctx, time.Now(), 10); err != nil || len(d) != 1 {
		t.Fatalf("due: %v, %v", d, err)
	}
}

// olderCasScript is casScript as gateways before issue #29's change wrote
// it: it neither keeps nor reads the field x.
var olderCasScript = goredis.NewScript(`
local tok = redis.call('HGET', KEYS[1], 't') or ''
if tok ~= ARGV[1] then
  if tok == ARGV[2] then
    -- A client-side retry of an attempt that already landed: the token is
    -- fresh per attempt, so nobody else can have written it. Writing it
    -- again (a no-op) puts it behind this connection's WAIT, if one follows.
    redis.call('HSET', KEYS[1], 't', tok)
    return {1}
  end
  if tok == '' then
    return {0}
  end
  return {0, tok, redis.call('HGET', KEYS[1], 'd') or ''}
end
redis.call('HSET', KEYS[1], 't', ARGV[2], 'd', ARGV[3])
if ARGV[5] == '' then
  redis.call('ZREM', KEYS[2], ARGV[6])
else
  redis.call('ZADD', KEYS[2], ARGV[5], ARGV[6])
end
if ARGV[7] == '' then
  redis.call('ZREM', KEYS[3], ARGV[6])
else
  redis.call('ZADD', KEYS[3], ARGV[7], ARGV[6])
end
if tok == '' then
  redis.call('DEL', KEYS[4])
end
local puts = tonumber(ARGV[8])
local i = 9
for _ = 1, puts do
  redis.call('HSET', KEYS[4], ARGV[i], ARGV[i + 1])
  i = i + 2
end
while i < #ARGV do
  redis.call('HDEL', KEYS[4], ARGV[i])
  i = i + 1
end
if ARGV[#ARGV] == '' then
  redis.call('ZREM', KEYS[5], ARGV[6])
else
  redis.call('ZADD', KEYS[5], ARGV[#ARGV], ARGV[6])
end
local ttl = tonumber(ARGV[4])
if ttl > 0 then
  redis.call('PEXPIRE', KEYS[1], ttl)
  redis.call('PEXPIRE', KEYS[4], ttl)
else
  redis.call('PERSIST', KEYS[1])
  redis.call('PERSIST', KEYS[4])
end
return {1}
`)
