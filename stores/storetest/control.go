package storetest

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// testControlRecords: control records are read and written atomically
// by name, an error or a nil record writes nothing, and they never meet a
// scope of any name: a scope named like a control record (or like the old
// reserved scope of paused sources) is another record.
func testControlRecords(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{})
	s := e.store
	if rec, err := s.ReadControl(e.ctx, "paused-sources"); err != nil || rec != nil {
		t.Fatalf("absent control record: %q, %v", rec, err)
	}
	noErr(t, s.TransactControl(e.ctx, "paused-sources", func(cur []byte) ([]byte, error) {
		if cur != nil {
			t.Errorf("first write saw %q", cur)
		}
		return []byte(`{"gh":true}`), nil
	}))
	if rec := must(s.ReadControl(e.ctx, "paused-sources")); string(rec) != `{"gh":true}` {
		t.Fatalf("read back %q", rec)
	}
	boom := errors.New("refused")
	if err := s.TransactControl(e.ctx, "paused-sources", func(cur []byte) ([]byte, error) {
		if string(cur) != `{"gh":true}` {
			t.Errorf("second write saw %q", cur)
		}
		return []byte(`{"x":1}`), boom
	}); !errors.Is(err, boom) {
		t.Fatalf("fn's error came back as %v", err)
	}
	noErr(t, s.TransactControl(e.ctx, "paused-sources", func([]byte) ([]byte, error) { return nil, nil }))
	if rec := must(s.ReadControl(e.ctx, "paused-sources")); string(rec) != `{"gh":true}` {
		t.Fatalf("after a refused and an empty write: %q", rec)
	}

	// Scopes named like the record, however spelled, are documents of
	// their own; writing them changes no control record and the other way
	// round.
	for _, scope := range []string{"paused-sources", "control:paused-sources", "replyonce:control:paused-sources", ":control:paused-sources"} {
		noErr(t, s.Transact(e.ctx, scope, func([]byte) (*ledger.Write, error) {
			return &ledger.Write{Doc: []byte(`{"scope":` + strconv.Quote(scope) + `}`), ReceivedAt: start}, nil
		}))
	}
	if rec := must(s.ReadControl(e.ctx, "paused-sources")); string(rec) != `{"gh":true}` {
		t.Fatalf("scopes named like the control record changed it: %q", rec)
	}
	noErr(t, s.TransactControl(e.ctx, "paused-sources", func([]byte) ([]byte, error) { return []byte(`{}`), nil }))
	for _, scope := range []string{"paused-sources", "control:paused-sources", "replyonce:control:paused-sources"} {
		if doc := must(s.Read(e.ctx, scope)); !bytes.Contains(doc, []byte(strconv.Quote(scope))) {
			t.Fatalf("scope %q after a control write: %q", scope, doc)
		}
	}
	// Control records are in no scope listing: the four scopes are all
	// there is.
	var listed []string
	for _, at := range must(s.ScopesReceived(e.ctx, ledger.ScopeAt{}, 100)) {
		listed = append(listed, at.Scope)
	}
	slices.Sort(listed)
	if want := []string{":control:paused-sources", "control:paused-sources", "paused-sources", "replyonce:control:paused-sources"}; !slices.Equal(listed, want) {
		t.Fatalf("scopes listed: %q, want %q", listed, want)
	}
	// They do not expire with time.
	e.clock.Advance(400 * 24 * time.Hour)
	if rec := must(s.ReadControl(e.ctx, "paused-sources")); string(rec) != `{}` {
		t.Fatalf("a year on: %q", rec)
	}

	// Concurrent writers of one record, from two store handles where the
	// store has them: no increment is lost.
	const n = 40
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			err := s.TransactControl(e.ctx, "counter", func(cur []byte) ([]byte, error) {
				c := 0
				if cur != nil {
					var err error
					if c, err = strconv.Atoi(string(cur)); err != nil {
						return nil, err
					}
				}
				return []byte(strconv.Itoa(c + 1)), nil
			})
			if err != nil {
				t.Errorf("writer %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if rec := must(s.ReadControl(e.ctx, "counter")); string(rec) != strconv.Itoa(n) {
		t.Fatalf("%d increments left %q", n, rec)
	}
}
