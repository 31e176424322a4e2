package redis

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/replyonce/gateway/ledger"
)

// envURL names the variable that points the tests at a real Redis.
const envURL = "REPLYONCE_TEST_REDIS"

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// testURL returns the server to test against, skipping when none is
// configured. A configured but unreachable server fails in testClient.
func testURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(envURL)
	if url == "" {
		t.Skipf("%s is not set: set it (e.g. %s=redis://127.0.0.1:6379/0) to run the Redis store tests", envURL, envURL)
	}
	return url
}

func clientOptions(t testing.TB) *goredis.Options {
	t.Helper()
	o, err := goredis.ParseURL(testURL(t))
	if err != nil {
		t.Fatalf("%s: %v", envURL, err)
	}
	o.ContextTimeoutEnabled = true
	o.PoolSize = 128
	return o
}

// testClient connects to the test server and fails the test when it does
// not answer.
func testClient(t testing.TB) *goredis.Client {
	t.Helper()
	c := goredis.NewClient(clientOptions(t))
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("%s is set but Redis does not answer: %v", envURL, err)
	}
	return c
}

// testPrefix returns a key prefix no other test (or test process) uses and
// deletes whatever was written under it when the test ends.
func testPrefix(t testing.TB, c goredis.UniversalClient) string {
	t.Helper()
	prefix := fmt.Sprintf("replyonce-test:%016x:", rand.Uint64())
	t.Cleanup(func() { deletePrefix(t, c, prefix) })
	return prefix
}

func deletePrefix(t testing.TB, c goredis.UniversalClient, prefix string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var cursor uint64
	for {
		keys, next, err := c.Scan(ctx, cursor, prefix+"*", 1000).Result()
		if err != nil {
			t.Errorf("cleanup scan %s: %v", prefix, err)
			return
		}
		// One UNLINK per key, pipelined: keys of different buckets live in
		// different Cluster slots.
		_, err = c.Pipelined(ctx, func(p goredis.Pipeliner) error {
			for _, k := range keys {
				p.Unlink(ctx, k)
			}
			return nil
		})
		if err != nil && len(keys) > 0 {
			t.Errorf("cleanup %s: %v", prefix, err)
			return
		}
		if cursor = next; cursor == 0 {
			return
		}
	}
}

// envPrivateURL names a Redis server that this test run has to itself
// (.ci/run starts one on its own port), for the tests that need a
// server-wide command such as SCRIPT FLUSH: on the shared server named by
// envURL those would disturb everyone else's tests.
const envPrivateURL = "REPLYONCE_TEST_REDIS_PRIVATE"

// privateClient connects to the private server. In CI (CI set) a missing
// variable fails the test: a skipped test there would hide the case.
func privateClient(t testing.TB) *goredis.Client {
	t.Helper()
	url := os.Getenv(envPrivateURL)
	if url == "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is not set: .ci/run starts a private Redis for this test", envPrivateURL)
		}
		t.Skipf("%s is not set: point it at a Redis of your own (never a shared one) to run this test", envPrivateURL)
	}
	o, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatalf("%s: %v", envPrivateURL, err)
	}
	o.ContextTimeoutEnabled = true
	c := goredis.NewClient(o)
	t.Cleanup(func() { _ = c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("%s is set but Redis does not answer: %v", envPrivateURL, err)
	}
	return c
}

// newPrivateTestStore is newTestStore on the private server.
func newPrivateTestStore(t testing.TB, opts Options) (*Store, *goredis.Client) {
	t.Helper()
	return newTestStoreOn(t, privateClient(t), opts)
}

// newTestStore returns a store on its own fresh prefix.
func newTestStore(t testing.TB, opts Options) (*Store, *goredis.Client) {
	t.Helper()
	return newTestStoreOn(t, testClient(t), opts)
}

func newTestStoreOn(t testing.TB, c *goredis.Client, opts Options) (*Store, *goredis.Client) {
	t.Helper()
	if opts.KeyPrefix == "" {
		opts.KeyPrefix = testPrefix(t, c)
	}
	s := New(c, opts)
	t.Cleanup(func() { _ = s.Close() })
	return s, c
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// counter is the document the concurrency tests increment.
type counter struct {
	N     int            `json:"n"`
	ByWho map[string]int `json:"by,omitempty"`
}

func decodeCounter(t testing.TB, doc []byte) counter {
	t.Helper()
	var c counter
	if doc == nil {
		return c
	}
	if err := json.Unmarshal(doc, &c); err != nil {
		t.Fatalf("decode %q: %v", doc, err)
	}
	return c
}

// increment adds one to the scope's counter through Transact.
func increment(ctx context.Context, s ledger.Store, scope string) error {
	return s.Transact(ctx, scope, func(cur []byte) (*ledger.Write, error) {
		var c counter
		if cur != nil {
			if err := json.Unmarshal(cur, &c); err != nil {
				return nil, err
			}
		}
		c.N++
		doc, err := json.Marshal(c)
		if err != nil {
			return nil, err
		}
		return &ledger.Write{Doc: doc}, nil
	})
}

func put(doc string, ttl time.Duration, review time.Time) func([]byte) (*ledger.Write, error) {
	return func([]byte) (*ledger.Write, error) {
		return &ledger.Write{Doc: []byte(doc), TTL: ttl, ReviewAt: review}, nil
	}
}
