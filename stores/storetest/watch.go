package storetest

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/replyonce/gateway/ledger"
)

// watchStore is a store that counts the side records read through it
// (blobReads), the calls that read them (blobCalls) and its Transact
// calls, and remembers the names of the records its writes carried. Reads
// of a long scope's listings record ("ls:{n}"), which a ledger makes once
// in a while and not for any entry, count apart (listReads). It
// checks Write.Absent only when absent is set and the store it wraps does.
type watchStore struct {
	ledger.Store
	absent    bool
	blobReads atomic.Int64
	blobCalls atomic.Int64
	listReads atomic.Int64
	transacts atomic.Int64
	mu        sync.Mutex
	written   []string
}

func (s *watchStore) ChecksAbsent() bool { return s.absent && ledger.ChecksAbsent(s.Store) }

func (s *watchStore) ReadBlob(ctx context.Context, scope, name string) ([]byte, error) {
	if strings.HasPrefix(name, "ls:") {
		s.listReads.Add(1)
		return s.Store.ReadBlob(ctx, scope, name)
	}
	s.blobReads.Add(1)
	s.blobCalls.Add(1)
	return s.Store.ReadBlob(ctx, scope, name)
}

func (s *watchStore) ReadBlobs(ctx context.Context, scope string, names []string) ([][]byte, error) {
	s.blobReads.Add(int64(len(names)))
	s.blobCalls.Add(1)
	return s.Store.ReadBlobs(ctx, scope, names)
}

// Transact records the side records of the write that landed: fn may run
// more than once, and only its last run's write is saved.
func (s *watchStore) Transact(ctx context.Context, scope string, fn func([]byte) (*ledger.Write, error)) error {
	s.transacts.Add(1)
	var names []string
	err := s.Store.Transact(ctx, scope, func(cur []byte) (*ledger.Write, error) {
		out, err := fn(cur)
		names = names[:0]
		if out != nil && err == nil {
			for name := range out.Blobs {
				names = append(names, name)
			}
		}
		return out, err
	})
	if err == nil {
		s.mu.Lock()
		s.written = append(s.written, names...)
		s.mu.Unlock()
	}
	return err
}

// takeWritten returns the side record names written since the last call.
func (s *watchStore) takeWritten() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.written
	s.written = nil
	return out
}
