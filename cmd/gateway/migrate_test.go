package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// migrate names what it created, and says so when there was nothing to do.
// It runs in a schema of its own on the shared server, dropped afterwards.
func TestMigrateSaysWhatItCreated(t *testing.T) {
	dsn := os.Getenv("REPLYONCE_TEST_POSTGRES")
	if dsn == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("REPLYONCE_TEST_POSTGRES is not set")
		}
		t.Skip("REPLYONCE_TEST_POSTGRES is not set")
	}
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close) // after the schema is dropped: cleanups run last first
	schema := fmt.Sprintf("migrate_test_%d", time.Now().UnixNano())
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	path := filepath.Join(t.TempDir(), "c.yaml")
	cfg := "store: {kind: postgres, url: '" + u.String() + "'}\n" + validSource
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	run := func() string {
		var out bytes.Buffer
		app := &App{Stdout: &out, Stderr: io.Discard, LookupEnv: env(nil)}
		if err := app.Run(ctx, []string{"migrate", "--config", path}); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	first := run()
	for _, want := range []string{`created table "replyonce_scopes"`, `sequence "replyonce_scopes_version_seq"`, `index "replyonce_scopes_review_idx"`, `index "replyonce_scopes_expires_idx"`, `table "replyonce_scopes_blobs"`, `table "replyonce_scopes_control"`} {
		if !strings.Contains(first, want) {
			t.Errorf("first migrate lacks %q: %s", want, first)
		}
	}
	if second := run(); !strings.Contains(second, "already up to date") {
		t.Errorf("second migrate: %s", second)
	}
	// A table made before queued delivery has no records table: migrate
	// adds it and says so rather than calling the schema up to date.
	if _, err := pool.Exec(ctx, "DROP TABLE "+schema+".replyonce_scopes_blobs"); err != nil {
		t.Fatal(err)
	}
	if third := run(); !strings.Contains(third, `created table "replyonce_scopes_blobs"`) || strings.Contains(third, "up to date") {
		t.Errorf("migrate of a table without its records table: %s", third)
	}
}
