package ledger

import (
	"context"
	"fmt"
	"hash/crc32"
	"slices"
	"strconv"
	"time"
)

// The listings of the records a long scope's history moved into (spilled
// chunks and their pages, landing chunks and their pages) fold level by
// level and are written as numbers, but they still grow with the history:
// about 1.7 KB of a 9 KB document after 10,000 settled effects, moved by
// every step, so that a claim and settle on that scope wrote 1.29 times the
// bytes of one on a short scope (issue #34 asks for bytes independent of
// the scope's size on the stores that move them over the network).
//
// So once a document lists more than listsKeep of them, they move into a
// side record of the scope, "ls:{n}", written in the step that moves them,
// and the document keeps in their place:
//
//   - what every step asks of them (listsRef): how many there are, the
//     highest landed sequence spilled, the earliest and the latest end of
//     retention, the oldest chunk, whether runs or queue items left with
//     them, and the span of the landings they hold, so that a claim's
//     conflict check, the expiry, retirement's trigger, the received
//     index and a run's context map answer without the record;
//   - the listings added since (the tail: the chunks spilled and the
//     landing chunks moved out by later steps), at most listsTail of them
//     before they join the record.
//
// A step that needs the listings themselves (a fold, retention dropping
// the oldest of them, a run whose context predates the record's landings,
// the tail full, and the reads of a whole history) puts the record back
// first (wholeLists): from what this process wrote or read before, or, in
// a decision, by asking for it (errNeedLanding, which transactFind reads
// and decides again on). A record is written once under a number that is
// never used again for the scope, and the document keeps its checksum, so
// a record remembered is the record in force as long as the document names
// it with that checksum (a scope deleted by its store starts counting
// again, and the checksum tells a record of the earlier scope apart).
// Documents that name such a record are format 11: an older build would
// take the tail for every listing.

const (
	// listsKeep is how many listings stay in the document when there is
	// no record; listsTail how many a record's tail may hold. Each
	// listing is some 40 to 80 bytes that every step moves; a record
	// rewritten costs its size once per listsTail listings added (a
	// spill adds one per 16 effects, moved landings one per 16 writes).
	listsKeep = 4
	listsTail = 4
	// listsRemembered bounds the records a ledger remembers.
	listsRemembered = 1024
)

// listsRecord is what an "ls:{n}" record holds: the document's four lists
// as they were when it moved them out.
type listsRecord struct {
	Spilled    spillChunkList `json:"spilled,omitempty"`
	SpillPages spillPageList  `json:"spillPages,omitempty"`
	LandPages  landGroupList  `json:"landPages,omitempty"`
	LandChunks landGroupList  `json:"landChunks,omitempty"`
}

// listsRef names a scope's listings record and says what every step asks
// of the listings in it. Times are Unix nanoseconds; a record is written
// only when every time it sums up has that form (listingTime).
type listsRef struct {
	N   uint64 // the record, "ls:{n}"
	Sum uint32 // CRC-32C of its bytes
	// Spill counts its spilled chunk and page listings, Chunks the chunk
	// listings among them (a fold counts them); MaxSeq is their
	// highest landed sequence, Low their oldest chunk, Oldest and Until
	// the earliest and latest end of retention among them (until()),
	// Runs whether any lists spilled runs.
	Spill  int
	Chunks int
	MaxSeq uint64
	Low    uint64
	Oldest int64
	Until  int64
	Runs   bool
	// Items counts the listings that hold queue items; RecvLast is the
	// newest receipt among them and ItemsUntil the earliest Until of
	// those listings (recent.go: until then all of them count).
	Items      int
	RecvLast   int64
	ItemsUntil int64
	// Lands counts its landing group listings, LandChunks the chunk
	// listings among them; LandTo is the last
	// sequence they hold, LandMax their latest landing time and
	// LandFront the latest landing time of the first of them (which
	// retention drops first).
	Lands      int
	LandChunks int
	LandTo     uint64
	LandMax    int64
	LandFront  int64
}

// listsRefStride is how many numbers listsRef is in its JSON form.
const listsRefStride = 17

func (r listsRef) name() string { return listsBlob(r.N) }

func listsBlob(n uint64) string { return "ls:" + strconv.FormatUint(n, 10) }

func (r *listsRef) MarshalJSON() ([]byte, error) {
	b2i := func(b bool) int64 {
		if b {
			return 1
		}
		return 0
	}
	v := [listsRefStride]int64{int64(r.N), int64(r.Sum), int64(r.Spill), int64(r.MaxSeq), int64(r.Low), r.Oldest,
		r.Until, b2i(r.Runs), int64(r.Items), r.RecvLast, r.ItemsUntil, int64(r.Lands), int64(r.LandTo), r.LandMax,
		r.LandFront, int64(r.Chunks), int64(r.LandChunks)}
	return numbersJSON(v[:]), nil
}

func (r *listsRef) UnmarshalJSON(raw []byte) error {
	v, err := readFlat(raw, "listings record", listsRefStride)
	if err != nil {
		return err
	}
	if len(v) != listsRefStride {
		return fmt.Errorf("listings record: %d values, want %d", len(v), listsRefStride)
	}
	*r = listsRef{N: uint64(v[0]), Sum: uint32(v[1]), Spill: int(v[2]), MaxSeq: uint64(v[3]), Low: uint64(v[4]),
		Oldest: v[5], Until: v[6], Runs: v[7] != 0, Items: int(v[8]), RecvLast: v[9], ItemsUntil: v[10],
		Lands: int(v[11]), LandTo: uint64(v[12]), LandMax: v[13], LandFront: v[14], Chunks: int(v[15]),
		LandChunks: int(v[16])}
	return nil
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// summarize is the listsRef of rec, and false when a time of it has no
// Unix nanosecond form (the listings then stay in the document).
func summarize(rec *listsRecord) (listsRef, bool) {
	var r listsRef
	ok := true
	at := func(t time.Time) int64 {
		ns, fits := listingTime(t)
		ok = ok && fits && !t.IsZero()
		return ns
	}
	spill := func(maxSeq, low uint64, until, itemsUntil time.Time, items int, recvLast int64, runs int) {
		u := at(until)
		if r.Spill == 0 {
			r.Low, r.Oldest, r.Until = low, u, u
		}
		r.Spill++
		r.MaxSeq = max(r.MaxSeq, maxSeq)
		r.Oldest, r.Until = min(r.Oldest, u), max(r.Until, u)
		r.Runs = r.Runs || runs > 0
		if items > 0 {
			iu := at(itemsUntil)
			if r.Items == 0 || iu < r.ItemsUntil {
				r.ItemsUntil = iu
			}
			r.Items++
			r.RecvLast = max(r.RecvLast, recvLast)
		}
	}
	for _, p := range rec.SpillPages {
		spill(p.MaxSeq, p.Low, p.until(), p.Until, p.Items, p.RecvLast, p.Runs)
	}
	for _, c := range rec.Spilled {
		spill(c.MaxSeq, c.N, c.until(), c.Until, c.Items, c.RecvLast, c.Runs)
	}
	r.Chunks, r.LandChunks = len(rec.Spilled), len(rec.LandChunks)
	for _, g := range slices.Concat(rec.LandPages, rec.LandChunks) {
		if r.Lands == 0 {
			r.LandFront = g.Max
		}
		r.Lands++
		r.LandTo = g.To
		r.LandMax = max(r.LandMax, g.Max)
	}
	return r, ok
}

// outside is the record whose listings are not in d's lists (nil: all of
// them are).
func (d *document) outside() *listsRef {
	if d.listsIn != nil {
		return nil
	}
	return d.Lists
}

// listingCount is how many listings d's four lists hold.
func (d *document) listingCount() int {
	return len(d.Spilled) + len(d.SpillPages) + len(d.LandPages) + len(d.LandChunks)
}

// putListsBack puts the listings of rec in front of d's lists (which hold
// only what was added since it was written).
func (d *document) putListsBack(rec *listsRecord) {
	d.SpillPages = slices.Concat(rec.SpillPages, d.SpillPages)
	d.Spilled = slices.Concat(rec.Spilled, d.Spilled)
	d.LandPages = slices.Concat(rec.LandPages, d.LandPages)
	d.LandChunks = slices.Concat(rec.LandChunks, d.LandChunks)
	d.listsIn = rec
}

// putBackChecked puts the listings record b back into d's lists when b
// is the record d names (its checksum), and reports whether it did.
func (d *document) putBackChecked(b []byte) bool {
	rec, ok := decodeLists(d.Lists, b)
	if ok {
		d.putListsBack(rec)
	}
	return ok
}

// decodeLists reads an "ls:{n}" record, checked against the checksum ref
// keeps: false when the bytes are not that record.
func decodeLists(ref *listsRef, b []byte) (*listsRecord, bool) {
	if b == nil || crc32.Checksum(b, castagnoli) != ref.Sum {
		return nil, false
	}
	var rec listsRecord
	if unmarshalRecord(b, &rec) != nil {
		return nil, false
	}
	return &rec, true
}

// wholeLists puts d's listings record back into its lists if it has one
// and it is at hand (read in this step, or remembered), and reports
// whether d's lists are now whole. When they are not, the step's loads
// name the record to read (lands.need) and the decision is void.
func (d *document) wholeLists() bool {
	ref := d.outside()
	if ref == nil {
		return true
	}
	ll := d.loads
	if ll == nil {
		// Outside a decision, reads put the record back first
		// (readListed): nothing here may decide on a part.
		return false
	}
	name := ref.name()
	if b, ok := ll.lists[name]; ok && d.putBackChecked(b) {
		return true
	}
	if b, ok := ll.remembered.get(d.Scope, name); ok {
		if d.putBackChecked(b) {
			return true
		}
		ll.remembered.forget(d.Scope, name)
	}
	if ll.need == "" {
		ll.need = name
	}
	return false
}

// storeLists is the last step of a write on d's listings: they stay as
// they are while there are few, or while the tail beside a record is
// short; otherwise they move, whole, into a new record. It returns
// errNeedLanding when that needs the record in force and it is not at
// hand.
func (d *document) storeLists(blobs *blobSet) error {
	if d.Lists == nil && d.listingCount() <= listsKeep {
		return nil // every short scope: nothing to move
	}
	if ref := d.outside(); ref != nil {
		if d.listingCount() <= listsTail && len(d.SpillPages)+len(d.LandPages) == 0 {
			return nil
		}
		if !d.wholeLists() {
			return &errNeedLanding{name: ref.name()}
		}
	}
	if in := d.listsIn; in != nil && d.tailOnly(in) {
		return nil
	}
	rec := &listsRecord{Spilled: d.Spilled, SpillPages: d.SpillPages, LandPages: d.LandPages, LandChunks: d.LandChunks}
	ref, fits := summarize(rec)
	if d.listingCount() <= listsKeep || !fits {
		if d.Lists != nil {
			blobs.set(d.Lists.name(), nil)
		}
		d.Lists, d.listsIn = nil, nil
		return nil
	}
	b, err := marshalRecord(rec)
	if err != nil {
		return fmt.Errorf("ledger: encode listings record: %w", err)
	}
	if d.Lists != nil {
		blobs.set(d.Lists.name(), nil)
	}
	d.ListsN++
	ref.N, ref.Sum = d.ListsN, crc32.Checksum(b, castagnoli)
	blobs.set(ref.name(), b)
	if d.loads != nil {
		d.loads.wrote, d.loads.wroteBytes = ref.name(), b
	}
	d.Lists, d.listsIn = &ref, nil
	d.Spilled, d.SpillPages, d.LandPages, d.LandChunks = nil, nil, nil, nil
	return nil
}

// tailOnly takes the listings of in, the record put back, out of d's
// lists again when they are still the front of them, unchanged, and what
// follows is a short tail of chunks; false leaves d as it is.
func (d *document) tailOnly(in *listsRecord) bool {
	if !slices.Equal(in.SpillPages, d.SpillPages) || !slices.Equal(in.LandPages, d.LandPages) ||
		len(d.Spilled) < len(in.Spilled) || len(d.LandChunks) < len(in.LandChunks) ||
		!slices.Equal(in.Spilled, d.Spilled[:len(in.Spilled)]) || !slices.Equal(in.LandChunks, d.LandChunks[:len(in.LandChunks)]) {
		return false
	}
	spilled, lands := d.Spilled[len(in.Spilled):], d.LandChunks[len(in.LandChunks):]
	if len(spilled)+len(lands) > listsTail {
		return false
	}
	d.Spilled, d.LandChunks = spilled, lands
	d.SpillPages, d.LandPages = nil, nil
	d.listsIn = nil
	return true
}

// refTime is the time a listsRef holds as ns.
func refTime(ns int64) time.Time { return time.Unix(0, ns).UTC() }

// rememberedLists holds the listings records a ledger wrote or read
// lately, by scope and name, so that the step that needs one of them
// again need not read it. Every use checks the bytes against the
// document's checksum (putBackChecked).
type rememberedLists struct{ memo[[]byte] }

func newRememberedLists() *rememberedLists {
	return &rememberedLists{memo[[]byte]{max: listsRemembered}}
}

func listsKey(scope, name string) string { return scope + "\x00" + name }

// A nil memory remembers nothing (a step decided outside a ledger).
func (r *rememberedLists) get(scope, name string) ([]byte, bool) {
	if r == nil {
		return nil, false
	}
	return r.memo.get(listsKey(scope, name))
}

func (r *rememberedLists) put(scope, name string, b []byte) {
	if r != nil && b != nil {
		r.memo.put(listsKey(scope, name), b)
	}
}

func (r *rememberedLists) forget(scope, name string) {
	if r != nil {
		r.memo.forget(listsKey(scope, name))
	}
}

// readWholeLists puts d's listings record back into its lists, for a read
// of d outside a decision. It returns false when the store no longer holds
// the record the document names: the document moved on, read it again.
func (l *Ledger) readWholeLists(ctx context.Context, d *document) (bool, error) {
	ref := d.outside()
	if ref == nil {
		return true, nil
	}
	name := ref.name()
	if b, ok := l.lists.get(d.Scope, name); ok {
		if d.putBackChecked(b) {
			return true, nil
		}
		l.lists.forget(d.Scope, name)
	}
	b, err := l.store.ReadBlob(ctx, d.Scope, name)
	if err != nil || !d.putBackChecked(b) {
		return false, err
	}
	l.lists.put(d.Scope, name, b)
	return true, nil
}

// readListed reads a scope's document with its listings whole.
func (l *Ledger) readListed(ctx context.Context, scope string) (*document, error) {
	for try := 0; ; try++ {
		d, err := l.read(ctx, scope)
		if err != nil {
			return nil, err
		}
		ok, err := l.readWholeLists(ctx, d)
		if err != nil {
			return nil, err
		}
		if ok {
			return d, nil
		}
		if try >= spillTries {
			return nil, fmt.Errorf("%w: scope %q: listings record %s does not match the document", ErrCorrupt, scope, d.Lists.name())
		}
	}
}
