package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/replyonce/gateway/stores/internal/groupcommit"
)

// row is one scope's row as a read found it; live is false when there is
// none or it has expired (both read as absent).
type row struct {
	live    bool
	version int64
	doc     []byte
}

// rowRead is a grouped read's outcome.
type rowRead struct {
	row row
	err error
}

// The grouped reads: concurrent reads of a scope's row outside a
// transaction (Read, and Transact checking a decision that writes nothing
// or reading after a lost compare-and-set) share one statement when they
// meet, as writes share a commit. A redelivery is answered by such a read
// (it must see what other processes did to the event), and with a fifth of
// a busy source's requests being redeliveries they meet often. On
// PostgreSQL 15 on this project's two-core machine (pgbench, prepared
// statements) a primary-key read of a 1.6 KB document took 55 µs alone and
// 108 µs for eight together. The rules are groupcommit's: a read that
// finds nothing in flight goes at once, alone, as the single-row statement
// it always was; otherwise it queues, and the reads queued go together as
// soon as the one in flight is answered (no window: a read never waits
// for company, only for the read ahead of it). One in flight, not two:
// in gateway bench (queued, Postgres, three rounds alternated) two gave
// 0.35-0.45x the bare proxy and one 0.37-0.38x, against 0.34-0.35x
// without grouping, and one halves the statements (docs/performance.md).
// Every read in a batch starts after its caller asked, so it sees every
// write that finished before that, as a lone read does.
type rowReader = groupcommit.Batcher[string, rowRead]

// readsInFlight bounds the statements reads through the pool have in
// flight at once, lone and grouped.
const readsInFlight = 1

func newRowReader(s *Store, maxBatch, maxInflight int) *rowReader {
	return groupcommit.New(groupcommit.Options{MaxBatch: maxBatch, MaxInflight: maxInflight},
		func(ctx context.Context, scope string) rowRead {
			r, err := s.readRowAlone(ctx, s.pool, scope, false)
			return rowRead{row: r, err: err}
		},
		s.readRows,
		func(err error) rowRead { return rowRead{err: err} },
		nil)
}

// readRow reads scope's row, in a group with other reads when they meet.
// After Close it reads alone: reads work until the pool is closed.
func (s *Store) readRow(ctx context.Context, scope string) (row, error) {
	r := s.reads.Do(ctx, scope)
	if errors.Is(r.err, groupcommit.ErrClosed) {
		return s.readRowAlone(ctx, s.pool, scope, false)
	}
	return r.row, r.err
}

// readRowAlone reads scope's row with its own statement; forUpdate locks it
// until q's transaction ends.
func (s *Store) readRowAlone(ctx context.Context, q querier, scope string, forUpdate bool) (row, error) {
	sql := s.q.load
	if forUpdate {
		sql = s.q.loadForUpdate
	}
	var r row
	err := q.QueryRow(ctx, sql, scope).Scan(&r.version, &r.doc, &r.live)
	if errors.Is(err, pgx.ErrNoRows) {
		return row{}, nil
	}
	return r, err
}

// loadManySQL returns the grouped reads' statements: the i-th reads 2<<i
// scopes named one parameter each, up to the first that holds maxBatch.
// Written as scope = ANY($1) with an array, the statement was planned
// again at every execution (storecost: 1.04 plans per call, each some tens
// of microseconds of the server's CPU), since a generic plan cannot know
// the array's length and so never looks as cheap as a plan for the one
// given. With a fixed number of parameters the generic plan knows how many
// rows it looks up, and PostgreSQL keeps it after the statement's first
// five executions on a session.
func loadManySQL(n names, maxBatch int) []string {
	var out []string
	for size := 2; ; size *= 2 {
		var q strings.Builder
		q.WriteString(`SELECT scope, version, doc, ` + liveRow + ` FROM ` + n.table + ` WHERE scope IN (`)
		for i := 1; i <= size; i++ {
			if i > 1 {
				q.WriteByte(',')
			}
			fmt.Fprintf(&q, "$%d", i)
		}
		q.WriteByte(')')
		out = append(out, q.String())
		if size >= maxBatch {
			return out
		}
	}
}

// readRows reads a batch's rows in one statement and answers each read;
// two reads of one scope get the same row. The scopes fill the smallest
// statement that holds them, the last one repeated in the places left.
func (s *Store) readRows(ctx context.Context, batch []*groupcommit.Item[string, rowRead]) {
	i := 0
	for 2<<i < len(batch) {
		i++
	}
	var rows pgx.Rows
	var err error
	found := make(map[string]row, len(batch))
	if i < len(s.q.loadMany) {
		args := make([]any, 2<<i)
		for j := range args {
			args[j] = batch[min(j, len(batch)-1)].Write
		}
		rows, err = s.pool.Query(ctx, s.q.loadMany[i], args...)
	} else {
		// The batcher sends at most MaxBatch reads, which the last
		// statement holds; a scope left out would read as absent.
		err = fmt.Errorf("no statement reads %d scopes", len(batch))
	}
	if err == nil {
		for rows.Next() {
			var scope string
			var r row
			if err = rows.Scan(&scope, &r.version, &r.doc, &r.live); err != nil {
				break
			}
			found[scope] = r
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	for _, it := range batch {
		if err != nil {
			it.Result = rowRead{err: fmt.Errorf("grouped read of %d scopes: %w", len(batch), err)}
			continue
		}
		it.Result = rowRead{row: found[it.Write]}
	}
}
