package postgres

import (
	"context"
	"fmt"
	"hash/fnv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// DefaultTable is the table used when Options.Table is empty.
const DefaultTable = "replyonce_scopes"

// names holds the quoted identifiers derived from one table name, so that
// the schema and the statements can never disagree about them.
type names struct {
	table    string // quoted, possibly schema-qualified
	sequence string // quoted, same schema as the table
	review   string // index name, unqualified: indexes live in the table's schema
	expires  string
	due      string // index on due_at
	received string // index on received_at
	blobs    string // quoted, same schema as the table
	control  string // quoted, same schema as the table
}

// parseTable splits "schema.table" at the first dot. A name without a dot
// is left to the connection's search_path.
func parseTable(table string) names {
	if table == "" {
		table = DefaultTable
	}
	var schema, name string
	if i := strings.IndexByte(table, '.'); i >= 0 {
		schema, name = table[:i], table[i+1:]
	} else {
		name = table
	}
	qualify := func(n string) string {
		if schema == "" {
			return pgx.Identifier{n}.Sanitize()
		}
		return pgx.Identifier{schema, n}.Sanitize()
	}
	return names{
		table:    qualify(name),
		sequence: qualify(name + "_version_seq"),
		review:   pgx.Identifier{name + "_review_idx"}.Sanitize(),
		expires:  pgx.Identifier{name + "_expires_idx"}.Sanitize(),
		due:      pgx.Identifier{name + "_due_idx"}.Sanitize(),
		received: pgx.Identifier{name + "_received_idx"}.Sanitize(),
		blobs:    qualify(name + "_blobs"),
		control:  qualify(name + "_control"),
	}
}

// SchemaObject is one database object SchemaSQL creates.
type SchemaObject struct {
	Kind string // table, sequence or index
	Name string // as to_regclass reads it: quoted, schema-qualified when the table is
}

// SchemaObjects lists what SchemaSQL(table) creates, so that a migration
// can say what it added.
func SchemaObjects(table string) []SchemaObject {
	n := parseTable(table)
	schema := ""
	if i := strings.IndexByte(n.table, '.'); i >= 0 && strings.HasPrefix(n.table, `"`) {
		schema = n.table[:i+1]
	}
	return []SchemaObject{{"table", n.table}, {"sequence", n.sequence}, {"index", schema + n.review}, {"index", schema + n.expires}, {"index", schema + n.due}, {"index", schema + n.received}, {"table", n.blobs}, {"table", n.control}}
}

// DropSQL returns the statement that drops everything SchemaSQL(table)
// creates, for tools and tests that make a table of their own and must
// leave nothing behind. The sequence goes with the table that owns it.
func DropSQL(table string) string {
	n := parseTable(table)
	return "DROP TABLE IF EXISTS " + n.table + ", " + n.blobs + ", " + n.control + " CASCADE"
}

// SchemaSQL returns the DDL that Migrate runs for the given table name
// (empty means DefaultTable; "schema.table" puts everything in that schema,
// which must already exist). It is idempotent, so it can be handed to a
// migration tool as is or run at every start.
//
// The document column is json rather than jsonb because the ledger's store
// contract asks for the bytes to come back exactly as written; json keeps
// the text verbatim yet still rejects malformed documents and supports the
// usual operators for inspection (doc->'runs').
//
// Listing queued events newest first adds received_at, with a partial
// index in descending order, added to older tables the same way as due_at.
//
// Queued delivery adds due_at (with a partial index, like review_at) and a
// second table of blobs, rows keyed by (scope, name) that go with their
// scope's row, written only by the statement that wins the scope's
// compare-and-set and deleted by the statement that deletes the row. A
// table made by an older version gets the column once; the ALTER runs only
// then, and before the index statements, because its exclusive lock taken
// after their share lock would deadlock with writers of the live table.
//
// The blobs table has no foreign key to the scope table (issue #29): with
// one, every blob insert made PostgreSQL lock the scope row FOR KEY SHARE,
// a second statement and a row lock per blob on the queued hot path, to
// guard an invariant the statements keep anyway. A table made with the
// key loses it once, in the same first block as the column ALTERs.
//
// Documents are compressed with lz4 where the server has it (PostgreSQL 14
// and later, built with it), else with the server's default: a queued
// event's document carries its body, which takes it past the 2 KB at
// which PostgreSQL compresses a row, and with pglz, the default,
// compressing took about half of the statement's time (issue #29). Only
// documents written afterwards are affected; the ALTER, taken once, sits
// in the first block for the same reason as the others.
//
// Control records (the ledger's own settings, such as which sources are
// paused) are rows of a third table, keyed by name: outside the scope
// table, so no scope can name one. A NULL doc is no record.
//
// Versions come from one sequence rather than a per-row counter: a row that
// expires, is deleted and is created again must never reuse a version that
// some process may still hold in its cache, or a compare-and-set against
// that stale version would succeed and overwrite the new document.
func SchemaSQL(table string) string {
	n := parseTable(table)
	return fmt.Sprintf(`CREATE SEQUENCE IF NOT EXISTS %[2]s AS bigint;
CREATE TABLE IF NOT EXISTS %[1]s (
    scope      text        PRIMARY KEY,
    doc        json        NOT NULL,
    version    bigint      NOT NULL,
    expires_at timestamptz,
    review_at  timestamptz,
    updated_at timestamptz NOT NULL DEFAULT now(),
    due_at     timestamptz,
    received_at timestamptz
);
DO $migrate$ DECLARE fk name; recompress boolean; BEGIN
    IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '%[7]s'::regclass AND attname = 'due_at' AND NOT attisdropped) THEN
        ALTER TABLE %[1]s ADD COLUMN due_at timestamptz;
    END IF;
    IF NOT EXISTS (SELECT 1 FROM pg_attribute WHERE attrelid = '%[7]s'::regclass AND attname = 'received_at' AND NOT attisdropped) THEN
        ALTER TABLE %[1]s ADD COLUMN received_at timestamptz;
    END IF;
    FOR fk IN SELECT conname FROM pg_constraint WHERE conrelid = to_regclass('%[10]s') AND contype = 'f' LOOP
        EXECUTE format('ALTER TABLE %%s DROP CONSTRAINT %%I', '%[10]s', fk);
    END LOOP;
    IF current_setting('server_version_num')::int >= 140000 THEN
        EXECUTE format('SELECT attcompression <> %%L FROM pg_attribute WHERE attrelid = %%L::regclass AND attname = %%L', 'l', '%[7]s', 'doc') INTO recompress;
        IF recompress THEN
            BEGIN
                EXECUTE format('ALTER TABLE %%s ALTER COLUMN doc SET COMPRESSION lz4', '%[7]s');
            EXCEPTION WHEN feature_not_supported OR invalid_parameter_value THEN
                NULL;
            END;
        END IF;
    END IF;
END $migrate$;
ALTER SEQUENCE %[2]s OWNED BY %[1]s.version;
CREATE INDEX IF NOT EXISTS %[3]s ON %[1]s (review_at, scope) WHERE review_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS %[4]s ON %[1]s (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS %[5]s ON %[1]s (due_at, scope) WHERE due_at IS NOT NULL;
CREATE INDEX IF NOT EXISTS %[8]s ON %[1]s (received_at DESC, scope DESC) WHERE received_at IS NOT NULL;
CREATE TABLE IF NOT EXISTS %[6]s (
    scope text  NOT NULL,
    name  text  NOT NULL,
    data  bytea NOT NULL,
    PRIMARY KEY (scope, name)
);
CREATE TABLE IF NOT EXISTS %[9]s (
    name text  PRIMARY KEY,
    doc  bytea
);
`, n.table, n.sequence, n.review, n.expires, n.due, n.blobs, escapeLiteral(n.table), n.received, n.control, escapeLiteral(n.blobs))
}

// Migrate creates the store's table, sequence and indexes if they are
// missing. Several processes may call it at once (every gateway instance
// at start-up): a transaction-scoped advisory lock keyed on the table name
// serialises them, because concurrent CREATE ... IF NOT EXISTS statements
// can still fail on catalog unique constraints.
func (s *Store) Migrate(ctx context.Context) error {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("postgres store: migrate %s: %w", s.names.table, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()

	h := fnv.New64a()
	_, _ = h.Write([]byte("replyonce/stores/postgres migrate " + s.names.table))
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(h.Sum64())); err != nil {
		return fmt.Errorf("postgres store: migrate %s: lock: %w", s.names.table, err)
	}
	// No arguments: pgx sends this over the simple protocol, which accepts
	// several statements in one string.
	if _, err := tx.Exec(ctx, SchemaSQL(s.table)); err != nil {
		return fmt.Errorf("postgres store: migrate %s: %w", s.names.table, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("postgres store: migrate %s: commit: %w", s.names.table, err)
	}
	return nil
}
