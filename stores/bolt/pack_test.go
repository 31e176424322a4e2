package bolt

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	bbolt "go.etcd.io/bbolt"

	"github.com/replyonce/gateway/ledger"
)

// largeDoc is a JSON document of n entries, repetitive as a scope's is.
func largeDoc(n int) []byte {
	var b bytes.Buffer
	b.WriteString(`{"format":1,"scope":"conv","entries":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"e` + strings.Repeat("0", 3) + string(rune('a'+i%26)) + `":{"intent":"reply","state":"committed","claimedAt":"2026-12-06T11:16:04.153Z"}`)
	}
	b.WriteString(`}}`)
	return b.Bytes()
}

// openTemp opens a store on a file of the test's own, closed with it.
func openTemp(t *testing.T) *Store {
	t.Helper()
	s, err := Open(filepath.Join(t.TempDir(), "ledger.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func storedDoc(t *testing.T, s *Store, scope string) []byte {
	t.Helper()
	var v []byte
	if err := s.db.View(func(tx *bbolt.Tx) error {
		v = bytes.Clone(tx.Bucket(bucketDocs).Get([]byte(scope)))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

func putStored(t *testing.T, s *Store, scope string, v []byte) {
	t.Helper()
	if err := s.db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketDocs).Put([]byte(scope), v)
	}); err != nil {
		t.Fatal(err)
	}
}

// A large document is stored packed, a fraction of its size, and reads
// back byte for byte; a small one is stored as it is.
func TestDocumentsAreStoredPacked(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	for _, doc := range [][]byte{largeDoc(100), []byte(`{"format":1}`)} {
		if err := s.Transact(ctx, "conv", func([]byte) (*ledger.Write, error) { return &ledger.Write{Doc: doc}, nil }); err != nil {
			t.Fatal(err)
		}
		got, err := s.Read(ctx, "conv")
		if err != nil || !bytes.Equal(got, doc) {
			t.Fatalf("read back %d bytes (%v), want the %d written", len(got), err, len(doc))
		}
		stored := storedDoc(t, s, "conv")
		if len(doc) >= packMin {
			if stored[0] != packedDoc || len(stored)*3 > len(doc) {
				t.Fatalf("a %d-byte document stored in %d bytes starting %q: not packed", len(doc), len(stored), stored[:1])
			}
		} else if !bytes.Equal(stored, doc) {
			t.Fatalf("a %d-byte document stored as %q, want as it is", len(doc), stored)
		}
	}
}

// A file written before documents were packed holds them as JSON: they
// read as they are, and the next write packs them.
func TestUnpackedDocumentsStillRead(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	old := largeDoc(50)
	putStored(t, s, "conv", old)
	var seen []byte
	err := s.Transact(ctx, "conv", func(cur []byte) (*ledger.Write, error) {
		seen = cur
		return &ledger.Write{Doc: append(bytes.Clone(cur[:len(cur)-1]), `,"n":1}`...)}, nil
	})
	if err != nil || !bytes.Equal(seen, old) {
		t.Fatalf("function saw %d bytes (%v), want the stored JSON", len(seen), err)
	}
	if stored := storedDoc(t, s, "conv"); stored[0] != packedDoc {
		t.Fatalf("rewritten document not packed: starts %q", stored[:1])
	}
	if got, _ := s.Read(ctx, "conv"); !bytes.HasSuffix(got, []byte(`,"n":1}`)) {
		t.Fatalf("read %q", got[len(got)-20:])
	}
}

// A packed document that does not unpack is the store's corruption,
// reported as ledger.ErrCorrupt naming the scope, and the function never
// sees it.
func TestCorruptPackedDocumentIsReported(t *testing.T) {
	s := openTemp(t)
	ctx := context.Background()
	putStored(t, s, "conv", []byte{packedDoc, 0xff, 0xff, 0xff})
	if _, err := s.Read(ctx, "conv"); !errors.Is(err, ledger.ErrCorrupt) || !strings.Contains(err.Error(), `"conv"`) {
		t.Fatalf("read: %v, want ErrCorrupt naming the scope", err)
	}
	called := false
	err := s.Transact(ctx, "conv", func([]byte) (*ledger.Write, error) { called = true; return nil, nil })
	if !errors.Is(err, ledger.ErrCorrupt) || called {
		t.Fatalf("transact: %v (function called: %v), want ErrCorrupt before the function", err, called)
	}
}
