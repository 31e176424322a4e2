package ledger

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// A scope grown one effect at a time spills 16 entries at a time, so its
// chunk list (Spilled) grew by one listing per 16 effects: 625 listings,
// 74 KB of an 84 KB document, for 10,000 effects (issue #34). Once the
// list holds 2*spillPageSize chunks, the oldest spillPageSize listings
// fold into a page: a record "sp:{n}" holding them, which the document
// lists (SpillPages) with the bounds of all its chunks, so that what asks
// whether any chunk qualifies (spilledAfter, retirable, the expiry) reads
// only the page listing, and what reads chunks (History, a conflict check
// that needs the spilled history, a history page whose bounds it needs,
// retirement) reads the page record first. Page records are written once
// under a number of the Spill counter, which never goes back, and deleted
// with their chunks.

const spillPageSize = 16

// spillPage is one page record as the document lists it.
type spillPage struct {
	N      uint64    `json:"n"`      // its record, "sp:{n}"
	Chunks int       `json:"chunks"` // how many chunk listings it holds
	Low    uint64    `json:"low"`    // the lowest chunk number among them
	Count  int       `json:"count"`  // their entries
	MaxSeq uint64    `json:"maxSeq,omitempty"`
	Until  time.Time `json:"until"`
	// First and Last bound the claims of all its chunks' entries, as a
	// chunk's do; zero when a chunk's bound is unknown.
	First int64 `json:"first,omitempty"`
	Last  int64 `json:"last,omitempty"`
	// Items, RecvFirst and RecvLast count and bound the queue items of
	// all its chunks, as a chunk's do.
	Items     int   `json:"items,omitempty"`
	RecvFirst int64 `json:"recvFirst,omitempty"`
	RecvLast  int64 `json:"recvLast,omitempty"`
}

func spillPageBlob(n uint64) string { return "sp:" + strconv.FormatUint(n, 10) }

// foldSpilled folds the oldest chunk listings into pages while the document
// lists 2*spillPageSize chunks or more.
func (d *document) foldSpilled(blobs *blobSet) error {
	for len(d.Spilled) >= 2*spillPageSize {
		part := d.Spilled[:spillPageSize]
		d.Spill++
		p := spillPage{N: d.Spill, Chunks: len(part), Low: part[0].N, First: part[0].First, Last: part[0].Last}
		for _, c := range part {
			p.Low = min(p.Low, c.N)
			p.Count += c.Count
			p.MaxSeq = max(p.MaxSeq, c.MaxSeq)
			if c.Until.After(p.Until) {
				p.Until = c.Until
			}
			if c.Items > 0 {
				if p.Items == 0 || c.RecvFirst < p.RecvFirst {
					p.RecvFirst = c.RecvFirst
				}
				p.RecvLast = max(p.RecvLast, c.RecvLast)
				p.Items += c.Items
			}
			if c.First == 0 || p.First == 0 {
				p.First = 0
			} else {
				p.First = min(p.First, c.First)
			}
			if c.Last == 0 || p.Last == 0 {
				p.Last = 0
			} else {
				p.Last = max(p.Last, c.Last)
			}
		}
		b, err := marshalRecord(part)
		if err != nil {
			return fmt.Errorf("ledger: encode spill page: %w", err)
		}
		blobs.set(spillPageBlob(p.N), b)
		d.SpillPages = append(d.SpillPages, p)
		d.Spilled = append([]spillChunk(nil), d.Spilled[spillPageSize:]...)
	}
	return nil
}

// hasSpilledChunks reports whether the document lists any chunk, in a page
// or not.
func (d *document) hasSpilledChunks() bool { return len(d.Spilled)+len(d.SpillPages) > 0 }

// readPage reads the chunk listings of a page; nil when it was retired
// meanwhile.
func (l *Ledger) readPage(ctx context.Context, scope string, p spillPage) ([]spillChunk, error) {
	b, err := l.store.ReadBlob(ctx, scope, spillPageBlob(p.N))
	if err != nil || b == nil {
		return nil, err
	}
	var cs []spillChunk
	if err := unmarshalRecord(b, &cs); err != nil {
		return nil, fmt.Errorf("%w: scope %q: spill page %d: %w", ErrCorrupt, scope, p.N, err)
	}
	return cs, nil
}

// readAllChunks reads every chunk of d, oldest first.
func (l *Ledger) readAllChunks(ctx context.Context, d *document) ([]*spillRecord, error) {
	cr := chunkReader{l: l, scope: d.Scope}
	return cr.all(ctx, d)
}

// chunkReader reads a scope's chunks and pages, each at most once: their
// records are written once under numbers never reused, so a decision that
// must read the spilled history again, because the scope spilled more
// meanwhile, reads only what is new (transactFind). What it has read
// stays valid for as long as a document lists it.
type chunkReader struct {
	l      *Ledger
	scope  string
	chunks map[uint64][]*spillRecord
	pages  map[uint64][]spillChunk
}

// all is every chunk d lists, oldest first, as readChunks reads them (a
// chunk retired meanwhile reads as empty).
func (r *chunkReader) all(ctx context.Context, d *document) ([]*spillRecord, error) {
	if r.chunks == nil {
		r.chunks, r.pages = map[uint64][]*spillRecord{}, map[uint64][]spillChunk{}
	}
	var list []spillChunk
	for _, p := range d.SpillPages {
		cs, ok := r.pages[p.N]
		if !ok {
			var err error
			if cs, err = r.l.readPage(ctx, r.scope, p); err != nil {
				return nil, err
			}
			if cs != nil {
				r.pages[p.N] = cs
			}
		}
		list = append(list, cs...)
	}
	list = append(list, d.Spilled...)
	var out []*spillRecord
	for _, c := range list {
		rs, ok := r.chunks[c.N]
		if !ok {
			var err error
			if rs, err = r.l.readChunk(ctx, r.scope, c.N); err != nil {
				return nil, err
			}
			if rs == nil {
				continue // retired meanwhile: past retention
			}
			r.chunks[c.N] = rs
		}
		out = append(out, rs...)
	}
	return out, nil
}

// spilledItems reports whether any chunk of d holds queue items.
func (d *document) spilledItems() bool {
	for _, c := range d.Spilled {
		if c.Items > 0 {
			return true
		}
	}
	for _, p := range d.SpillPages {
		if p.Items > 0 {
			return true
		}
	}
	return false
}
