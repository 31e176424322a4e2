package ledger

import (
	"context"
	"fmt"
	"strconv"
	"time"
)

// A scope grown one effect at a time spills 16 entries at a time, so its
// chunk list (Spilled) grew by one listing per 16 effects: 625 listings, 74
// KB of an 84 KB document, for 10,000 effects (issue #34). Once the list
// holds more than spillPageSize chunks, the oldest spillPageSize listings
// fold into a page: a record "sp:{n}" holding them, which the document
// lists (SpillPages) with the bounds of all its chunks, so that what asks
// whether any chunk qualifies (spilledAfter, retirable, the expiry) reads
// only the page listing, and what reads chunks (History, a conflict check
// that needs the spilled history, a history page whose bounds it needs,
// retirement) reads the page record first. Page records are written once
// under a number of the Spill counter, which never goes back, and deleted
// with their chunks.
//
// Pages fold the same way, level by level: once the document lists more
// than spillPageSize pages of one level, the oldest spillPageSize of them
// fold into a page of the next level, whose record holds their listings
// (Level > 0). Without it the page list grew by one listing per 256
// effects, 5.4 KB of a 17 KB document after 10,000 (issue #34: bytes moved
// per step must not grow with the scope's history); now each level lists
// at most spillPageSize (a document written when levels folded at twice
// that folds at its next write). A page of any level carries the bounds
// of everything under it, so what reads only bounds never reads a record,
// and what reads a page's chunks (readPage) reads down through the levels.
// Documents with such pages are format 5: an older build would read a
// page of pages as a page of chunks.

const spillPageSize = 8

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
	// Level is 0 for a page whose record lists chunks, n for one whose
	// record lists pages of level n-1.
	Level int `json:"level,omitempty"`
	// Runs and RunsUntil count and bound the runs of all its chunks, as
	// a chunk's do.
	Runs      int       `json:"runs,omitempty"`
	RunsUntil time.Time `json:"runsUntil,omitzero"`
}

// until is when p passes retention, as a chunk's until.
func (p spillPage) until() time.Time { return latest(p.Until, p.RunsUntil) }

func spillPageBlob(n uint64) string { return "sp:" + strconv.FormatUint(n, 10) }

// foldSpilled folds the oldest chunk listings into pages while the document
// lists more than spillPageSize chunks, then the oldest pages of each level
// into a page of the next while it lists more than spillPageSize of that
// level.
func (d *document) foldSpilled(blobs *blobSet) error {
	if r := d.outside(); r != nil && r.Chunks+len(d.Spilled) > spillPageSize && !d.wholeLists() {
		return nil // the step is void: the record is read first
	}
	for len(d.Spilled) > spillPageSize {
		part := d.Spilled[:spillPageSize]
		d.Spill++
		p := spillPage{N: d.Spill, Chunks: len(part), Low: part[0].N, First: part[0].First, Last: part[0].Last}
		for _, c := range part {
			p.widen(spillPage{Low: c.N, Count: c.Count, MaxSeq: c.MaxSeq, Until: c.Until, First: c.First, Last: c.Last,
				Items: c.Items, RecvFirst: c.RecvFirst, RecvLast: c.RecvLast, Runs: c.Runs, RunsUntil: c.RunsUntil})
		}
		b, err := marshalRecord([]spillChunk(part)) // a page record keeps the object form (listings.go)
		if err != nil {
			return fmt.Errorf("ledger: encode spill page: %w", err)
		}
		blobs.set(spillPageBlob(p.N), b)
		d.SpillPages = append(d.SpillPages, p)
		d.Spilled = append([]spillChunk(nil), d.Spilled[spillPageSize:]...)
	}
	pages, err := foldLevels(d.SpillPages, spillPageSize, func(p spillPage) int { return p.Level },
		func(part []spillPage, level int) (spillPage, error) {
			d.Spill++
			p := spillPage{N: d.Spill, Level: level, Low: part[0].Low, First: part[0].First, Last: part[0].Last}
			for _, q := range part {
				p.Chunks += q.Chunks
				p.widen(q)
			}
			b, err := marshalRecord(part)
			if err != nil {
				return p, fmt.Errorf("ledger: encode spill page: %w", err)
			}
			blobs.set(spillPageBlob(p.N), b)
			return p, nil
		})
	if err != nil {
		return err
	}
	d.SpillPages = pages
	return nil
}

// foldLevels folds, from level 0 up, the oldest size entries of a level
// into one entry of the next (made by fold, which must not keep part) while
// the list holds more than size of that level: every listing is bytes that
// each step of the scope moves, and a fold takes exactly size whenever it
// happens, so what a page spans stays known from its level. The list runs
// from the highest level down, oldest first within a level, and stays so,
// since only the oldest of a level ever fold. Spilled chunk pages and
// landing pages fold alike.
func foldLevels[T any](list []T, size int, levelOf func(T) int, fold func(part []T, level int) (T, error)) ([]T, error) {
	for level := 0; ; level++ {
		first, n := -1, 0
		for i, x := range list {
			if levelOf(x) == level {
				if first < 0 {
					first = i
				}
				n++
			}
		}
		if first < 0 {
			return list, nil
		}
		for ; n > size; n -= size {
			p, err := fold(list[first:first+size], level+1)
			if err != nil {
				return nil, err
			}
			rest := append([]T{p}, list[first+size:]...)
			list = append(list[:first:first], rest...)
			first++
		}
	}
}

// widen makes p's bounds cover q's (a chunk's, or a page's of a lower
// level), and adds q's entries and items to p's counts. First and Last
// stay zero (unknown) once any part's are.
func (p *spillPage) widen(q spillPage) {
	p.Low = min(p.Low, q.Low)
	p.Count += q.Count
	p.MaxSeq = max(p.MaxSeq, q.MaxSeq)
	if q.Until.After(p.Until) {
		p.Until = q.Until
	}
	p.Runs += q.Runs
	p.RunsUntil = latest(p.RunsUntil, q.RunsUntil)
	if q.Items > 0 {
		if p.Items == 0 || q.RecvFirst < p.RecvFirst {
			p.RecvFirst = q.RecvFirst
		}
		p.RecvLast = max(p.RecvLast, q.RecvLast)
		p.Items += q.Items
	}
	if q.First == 0 || p.First == 0 {
		p.First = 0
	} else {
		p.First = min(p.First, q.First)
	}
	if q.Last == 0 || p.Last == 0 {
		p.Last = 0
	} else {
		p.Last = max(p.Last, q.Last)
	}
}

// hasSpilledChunks reports whether the document lists any chunk, in a page
// or not.
func (d *document) hasSpilledChunks() bool {
	if r := d.outside(); r != nil && r.Spill > 0 {
		return true
	}
	return len(d.Spilled)+len(d.SpillPages) > 0
}

// readPage reads the chunk listings under a page, down through its levels;
// nil when it was retired meanwhile.
func (l *Ledger) readPage(ctx context.Context, scope string, p spillPage) ([]spillChunk, error) {
	cs, _, err := l.readPageTree(ctx, scope, p)
	return cs, err
}

// readPageTree reads the chunk listings under a page and the numbers of
// the page records they were found through, p's own first: one store call
// per level, the pages of a level read together.
func (l *Ledger) readPageTree(ctx context.Context, scope string, p spillPage) ([]spillChunk, []uint64, error) {
	var cs []spillChunk
	var ns []uint64
	for level := []spillPage{p}; len(level) > 0; {
		bs, err := readRecords(ctx, l, scope, "spill pages", level, func(q spillPage) string { return spillPageBlob(q.N) })
		if err != nil {
			return nil, nil, err
		}
		var next []spillPage
		for i, q := range level {
			if bs[i] == nil {
				continue // retired meanwhile
			}
			ns = append(ns, q.N)
			if q.Level == 0 {
				c, err := decodePage[spillChunk](scope, q.N, bs[i])
				if err != nil {
					return nil, nil, err
				}
				cs = append(cs, c...)
				continue
			}
			ps, err := decodePage[spillPage](scope, q.N, bs[i])
			if err != nil {
				return nil, nil, err
			}
			next = append(next, ps...)
		}
		level = next
	}
	return cs, ns, nil
}

// readPagesOf reads the page listings that a page above level 0 holds; nil
// when it was retired meanwhile.
func (l *Ledger) readPagesOf(ctx context.Context, scope string, p spillPage) ([]spillPage, error) {
	b, err := l.store.ReadBlob(ctx, scope, spillPageBlob(p.N))
	if err != nil || b == nil {
		return nil, err
	}
	return decodePage[spillPage](scope, p.N, b)
}

// decodePage decodes page record n: chunk listings at level 0, page
// listings above.
func decodePage[T spillChunk | spillPage](scope string, n uint64, b []byte) ([]T, error) {
	var out []T
	if err := unmarshalRecord(b, &out); err != nil {
		return nil, fmt.Errorf("%w: scope %q: spill page %d: %w", ErrCorrupt, scope, n, err)
	}
	return out, nil
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
