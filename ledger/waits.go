package ledger

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Events waiting under order: scope (issue #34). Behind an agent that
// hangs, a conversation's events wait in its document: each with its queue
// item, its deliver entry and its run, about 900 bytes, which every accept,
// take and finish of the scope decoded and encoded again. A thousand of
// them made each webhook cost fifteen to twenty times what it cost behind
// ten. So the waiting events that no decision of the queue's fast path can
// touch are parked in records of their own, "w:{n}", in chunks written in
// scope order, and the document lists each chunk (Waits) with what the
// decisions need to know about it without reading it:
//
//   - First, the scope-order key of its first event (waitKey). The chunks hold no
//     event ordered before the document's own head: at every write, while
//     chunks are listed, the document keeps a queued or delivering event
//     ordered before the first chunk's First (otherwise the write reads
//     that chunk back in first). So the head of the scope, the one event
//     the order rule lets go, is always in the document, and every parked
//     event is held back by it: none is ever due, none changes the due
//     time, none is in flight.
//   - Entries and Runs, short hashes of its events' entry and run ids, so
//     that a decision about one event (a duplicate delivery of a parked
//     one, a claim or an end of its run) knows it must read the chunks
//     first. On a store that checks Write.Absent (memory, bolt, Postgres,
//     Redis) a chunk is Marked instead: each of its events has two marker
//     records, "wk:{entry id}" and "wq:{run id hash}", written with the
//     chunk and deleted with it, and a decision about an id the document
//     does not hold takes its marker as absent and lets the write check
//     (a marker that exists makes it decide again with every chunk read
//     back). A thousand waiting events then list no hashes at all (8 KB
//     that every step moved). Documents written with hashes are still
//     read.
//   - Count, the newest receipt and Drop, so that the scope's depth and
//     the received index stay as they were, and a chunk comes back before
//     retention would have dropped anything in it. The document's expiry
//     covers every chunk's events (WaitUntil), and the key of the last
//     parked event (WaitLast) is where the next chunk may start.
//
// Past the first waitHead listings, every waitPage chunk listings in a row
// fold into a page (foldWaits): a record "wp:{n}" that holds them, listed
// in their place with what they say together, so that every question above
// is asked of a page without reading it, and a thousand waiting events
// cost the document some 10 KB of listings instead of 16 (8 KB of it the
// hashes, which a page keeps, and which marked chunks do without). A write
// reads a page back and lists its chunks in its place (expand) only when
// it must read one of them: the head reaches it, or retention drops an
// event in it. Documents with a page are format 8: an older build would
// read a page as a chunk. Pages fold the same way, every waitPage of one
// level in a row into a page of the next (Level), so that each level lists
// fewer than waitPage: 10,000 waiting events listed 156 pages, 18 KB of
// the document that every step moved, and now list some twenty listings.
// A page of pages read back lists its pages in its place, one level per
// read. Documents with one are format 12.
//
// Only the steps of a delivery and of its agent decide on the document as
// it is (Enqueue, TakeDelivery, FinishDelivery, Begin, Claim, BeginClaim,
// Settle, Heartbeat and the ends of a run: transactFind with
// lookup.waits), each asking for every chunk (errNeedAllWaits) when an id
// it names hashes like a parked one or has a marker. Every other decision,
// and every read that lists a scope's items or entries (readFull), first
// reads every chunk and puts its events back, so it decides and answers
// exactly as it did when nothing was parked. A decision that writes after
// that lists again the chunks whose events it left as they were (refold)
// and parks the rest anew.
//
// What may be parked is narrow (parkable): a queued event under order:
// scope, never taken, replayed or tried, without debounce or pause, whose
// run is its own, independent, live and holds no lease, and whose intent
// no cap weighs. None of the fast path's decisions reads such an event:
// supersede and debounce look only at items of supersede-mode runs and
// debounced items, the conflict rule skips redeliverable claims past their
// deadline (a queued event's claim is recorded already run out), and the
// order rule needs only the head.

const (
	// waitChunk is how many events one chunk holds; the document keeps
	// at least waitKeep of the events after the last chunk in scope
	// order, and parks them once there are waitKeep+waitChunk, so that
	// an event arriving slightly out of order still finds its place
	// among the document's (an event ordered before the last chunk's
	// last stays in the document until the chunks before it drain).
	// Each step of the scope moves the events in the document, about
	// waitChunk/2 at its head and waitKeep+waitChunk/2 at its tail on
	// average: with pages, small chunks cost the listing little, and 8
	// and 4 moved the fewest bytes per step of the sizes measured
	// (docs/performance.md).
	waitChunk = 8
	waitKeep  = 4
	// waitPage is how many chunk listings fold into a page, and
	// waitHead how many listings at the head never fold (foldWaits).
	waitPage = 8
	waitHead = 2
	// waitHashLen is the length of the id hashes a chunk lists: 24
	// bits in base64, so that a thousand parked events cost 8 KB of
	// hashes, and a lookup of an id that is not parked meets a false
	// match once in some 16,000 lookups, which only makes that decision
	// read the chunks.
	waitHashLen = 4
)

// waitKey is an event's place in scope order (orderedBefore) without its
// last tie-break: its contextAt and receipt in Unix nanoseconds (parkable
// events have times that fit). Short names: the document lists one per
// chunk. Keys that tie compare as neither before the other, so every
// test on them errs on the side of keeping an event in the document: an
// event whose key is before a chunk's first is before all its events, and
// one after the last parked key is after all of them.
type waitKey struct {
	ContextAt  int64 `json:"c"`
	ReceivedAt int64 `json:"r"`
}

func keyOf(q *QueueItem) waitKey {
	return waitKey{ContextAt: q.ContextAt.UnixNano(), ReceivedAt: q.ReceivedAt.UnixNano()}
}

func (a waitKey) before(b waitKey) bool {
	if a.ContextAt != b.ContextAt {
		return a.ContextAt < b.ContextAt
	}
	return a.ReceivedAt < b.ReceivedAt
}

// nanosFit reports whether t is exact in Unix nanoseconds.
func nanosFit(t time.Time) bool {
	return t.After(time.Unix(0, math.MinInt64)) && t.Before(time.Unix(0, math.MaxInt64))
}

// waitChunkRef is one chunk of parked events as the document lists it,
// with short names and times in Unix nanoseconds: the document lists one
// per waitChunk events.
type waitChunkRef struct {
	N     uint64  `json:"n"`
	Count int     `json:"c"`
	First waitKey `json:"f"`
	// Drop is the earliest time retention would drop one of its events
	// or runs (prune): the first write after it reads the chunk back.
	Drop int64 `json:"d"`
	// Recv is the newest ReceivedAt of its items.
	Recv int64 `json:"r"`
	// Entries and Runs are the hashes of its events' entry and run ids.
	Entries string `json:"e,omitempty"`
	Runs    string `json:"h,omitempty"`
	// Embedded counts its items that carry their event record
	// (embedsEvent counts them as it counts the document's).
	Embedded int `json:"m,omitempty"`
	// Page, when not zero, makes this listing a page: its record
	// "wp:{N}" lists Page chunks in scope order, and the fields above
	// are theirs together (the first's First, the earliest Drop, the
	// newest Recv, the hashes one after another, the counts summed), so
	// that every question asked of the listings is asked of a page
	// without reading it.
	Page int `json:"p,omitempty"`
	// Marked: the chunk's events have marker records (waitMarkEntry,
	// waitMarkRun) and it lists no hashes; a page is Marked when one of
	// its chunks is.
	Marked bool `json:"k,omitempty"`
	// Level is a page's: 0 when its record lists chunks, n when it lists
	// pages of level n-1 (foldWaits).
	Level int `json:"l,omitempty"`
}

// waitRecord is one parked event, as a "w:{n}" record lists it.
type waitRecord struct {
	Entry *Entry     `json:"entry"`
	Item  *QueueItem `json:"item"`
	Run   *runState  `json:"run"`
}

func waitBlob(n uint64) string { return "w:" + strconv.FormatUint(n, 10) }

func waitPageBlob(n uint64) string { return "wp:" + strconv.FormatUint(n, 10) }

// record is the name of the record c stands for.
func (c waitChunkRef) record() string {
	if c.Page > 0 {
		return waitPageBlob(c.N)
	}
	return waitBlob(c.N)
}

// waitMarkEntry and waitMarkRun name the marker records of a parked
// event of a Marked chunk: they exist exactly while the chunk is listed.
// A run id may be longer than a store key, so its marker is named by its
// hash, as its spilled record is.
func waitMarkEntry(id string) string { return waitMarkEntryPrefix + id }

func waitMarkRun(id string) string {
	h := sha256.Sum256([]byte(id))
	return waitMarkRunPrefix + hex.EncodeToString(h[:16])
}

// The prefixes of the two kinds of marker record.
const (
	waitMarkEntryPrefix = "wk:"
	waitMarkRunPrefix   = "wq:"
)

// waitMarkData is what a marker holds: its existence is all it says.
var waitMarkData = []byte{'1'}

// setMarks writes (data) or deletes (nil) the markers of recs.
func setMarks(recs []waitRecord, data []byte, blobs *blobSet) {
	for _, r := range recs {
		blobs.set(waitMarkEntry(r.Entry.ID), data)
		blobs.set(waitMarkRun(r.Run.ID), data)
	}
}

// presentMarks reports whether the store found a marker that a decision
// took as absent.
func presentMarks(p *PresentError) bool {
	for name := range p.Blobs {
		if strings.HasPrefix(name, waitMarkEntryPrefix) || strings.HasPrefix(name, waitMarkRunPrefix) {
			return true
		}
	}
	return false
}

// waitHash is the first 24 bits of id's SHA-256, in base64: ids that
// differ in one character (src:e1, src:e2) hash apart.
func waitHash(id string) string {
	s := sha256.Sum256([]byte(id))
	return base64.RawStdEncoding.EncodeToString(s[:3])
}

// hashListed reports whether list, a run of waitHashLen-byte hashes,
// holds h.
func hashListed(list, h string) bool {
	for i := 0; i+waitHashLen <= len(list); i += waitHashLen {
		if list[i:i+waitHashLen] == h {
			return true
		}
	}
	return false
}

// parkedEntry reports whether an entry of one of ids may be parked.
// Each id is hashed once, and only when some chunk may hold it: a scope
// with no parked events pays nothing.
//
// An id that a Marked listing may hold is taken as not parked when the
// store checks Write.Absent (its marker goes to d.assumed, for the write
// to check), and as maybe parked when it does not.
func (d *document) parkedEntry(ids ...string) bool {
	if len(d.Waits) == 0 {
		return false
	}
	for _, id := range ids {
		if d.Entries[id] != nil {
			continue
		}
		// Hashed only when a listing has hashes: on a store that
		// checks, every listing is marked and none has.
		var h string
		marked := false
		for _, c := range d.Waits {
			if c.Entries != "" {
				if h == "" {
					h = waitHash(id)
				}
				if hashListed(c.Entries, h) {
					return true
				}
			}
			marked = marked || c.Marked
		}
		if marked && !d.assume(waitMarkEntry(id)) {
			return true
		}
	}
	return false
}

// assume takes the marker name as absent, for the write to check; it
// reports false when the store does not check.
func (d *document) assume(name string) bool {
	if !d.markWaits {
		return false
	}
	if !slices.Contains(d.assumed, name) {
		d.assumed = append(d.assumed, name)
	}
	return true
}

// parkedRun reports whether run id may be parked.
func (d *document) parkedRun(id string) bool {
	if id == "" || len(d.Waits) == 0 || d.Runs[id] != nil {
		return false
	}
	var h string // as in parkedEntry
	marked := false
	for _, c := range d.Waits {
		if c.Runs != "" {
			if h == "" {
				h = waitHash(id)
			}
			if hashListed(c.Runs, h) {
				return true
			}
		}
		marked = marked || c.Marked
	}
	return marked && !d.assume(waitMarkRun(id))
}

// parkedCount is how many events the chunks hold.
func (d *document) parkedCount() int {
	n := 0
	for _, c := range d.Waits {
		n += c.Count
	}
	return n
}

// errNeedWaits: the decision needs these chunks and pages read first.
type errNeedWaits struct{ ns, pages []uint64 }

func (e *errNeedWaits) Error() string {
	return fmt.Sprintf("ledger: decision needs %d chunks and %d pages of parked events", len(e.ns), len(e.pages))
}

// errNeedAllWaits: a decision of the fast path met a parked event (or a
// hash that may be one): it must decide with every chunk read back.
var errNeedAllWaits = errors.New("ledger: decision needs every parked event")

// waitLoads are the chunks and pages read so far by one decision's tries.
// Neither is ever rewritten, so a copy read once stays good while it is
// listed. The zero value holds none; readWaits makes the maps on its
// first read, so a step that reads no parked record allocates nothing.
type waitLoads struct {
	chunks map[uint64][]waitRecord
	pages  map[uint64][]waitChunkRef
}

// missing lists what of cs is not loaded yet: the chunks, and the pages
// (the chunks of a page not read yet are not known yet).
func (w waitLoads) missing(cs []waitChunkRef) *errNeedWaits {
	var need errNeedWaits
	var walk func(cs []waitChunkRef)
	walk = func(cs []waitChunkRef) {
		for _, c := range cs {
			if c.Page > 0 {
				if refs, ok := w.pages[c.N]; ok {
					walk(refs)
				} else {
					need.pages = append(need.pages, c.N)
				}
			} else if _, ok := w.chunks[c.N]; !ok {
				need.ns = append(need.ns, c.N)
			}
		}
	}
	walk(cs)
	if len(need.ns)+len(need.pages) == 0 {
		return nil
	}
	return &need
}

// unparkAll puts every parked event back into d (for a decision, or a
// read, that may look at any of them). The chunks' and pages' records go
// with the next write; a write that still finds events to park writes
// fresh ones.
func (d *document) unparkAll(w waitLoads, blobs *blobSet) error {
	if need := w.missing(d.Waits); need != nil {
		return need
	}
	var put func(cs []waitChunkRef)
	put = func(cs []waitChunkRef) {
		for _, c := range cs {
			if c.Page > 0 {
				put(w.pages[c.N])
			} else {
				d.putBack(w.chunks[c.N])
				if c.Marked && blobs != nil {
					setMarks(w.chunks[c.N], nil, blobs)
				}
			}
			if blobs != nil {
				blobs.set(c.record(), nil)
			}
		}
	}
	put(d.Waits)
	d.noWaits()
	return nil
}

// unparkAt puts chunk i back into d and deletes its record with the write.
func (d *document) unparkAt(i int, w waitLoads, blobs *blobSet) error {
	c := d.Waits[i]
	recs, ok := w.chunks[c.N]
	if !ok {
		return &errNeedWaits{ns: []uint64{c.N}}
	}
	d.putBack(recs)
	blobs.set(waitBlob(c.N), nil)
	if c.Marked {
		setMarks(recs, nil, blobs)
	}
	d.Waits = append(d.Waits[:i:i], d.Waits[i+1:]...)
	if len(d.Waits) == 0 {
		d.noWaits()
	}
	return nil
}

// expand lists the chunks of page i in its place, and deletes its record
// with the write.
func (d *document) expand(i int, w waitLoads, blobs *blobSet) error {
	p := d.Waits[i]
	refs, ok := w.pages[p.N]
	if !ok {
		return &errNeedWaits{pages: []uint64{p.N}}
	}
	blobs.set(waitPageBlob(p.N), nil)
	d.Waits = slices.Concat(d.Waits[:i:i], refs, d.Waits[i+1:])
	return nil
}

// foldWaits folds every waitPage chunk listings in a row, past the first
// waitHead listings, into a page, and then every waitPage pages of one
// level in a row into a page of the next: a chunk listing with hashes is
// some 260 bytes of the document, half of them its hashes, and a page of
// waitPage chunks lists their hashes and the rest once (issue #34: a
// thousand waiting events listed 16 KB, which every step of the scope
// moved; a marked listing, written as numbers, is some 60). The first listings
// stay as they are, so that the next chunks to read back as the head
// drains are listed without reading a page; a page read back at the head
// lists its chunks before the next page, so they do not fold again.
func (d *document) foldWaits(blobs *blobSet) error {
	// Level -1 is the chunks'; pages then fold the same way, level by
	// level, so that the listings stay few however many events wait.
	for level := -1; ; level++ {
		folded, higher := 0, false
		for i := waitHead; i < len(d.Waits); i++ {
			higher = higher || waitLevel(d.Waits[i]) >= level
			if i+waitPage > len(d.Waits) {
				continue
			}
			part := d.Waits[i : i+waitPage]
			if j := slices.IndexFunc(part, func(c waitChunkRef) bool { return waitLevel(c) != level }); j >= 0 {
				i += j
				continue
			}
			if err := d.foldWaitRun(i, level+1, blobs); err != nil {
				return err
			}
			folded++
		}
		if !higher && folded == 0 {
			return nil
		}
	}
}

// waitLevel is a listing's level: -1 for a chunk, a page's Level.
func waitLevel(c waitChunkRef) int {
	if c.Page == 0 {
		return -1
	}
	return c.Level
}

// foldWaitRun folds the waitPage listings from i into one page of level
// level: its record lists them, and its listing says what they say
// together.
func (d *document) foldWaitRun(i, level int, blobs *blobSet) error {
	part := d.Waits[i : i+waitPage]
	d.WaitN++
	p := waitChunkRef{N: d.WaitN, Page: len(part), First: part[0].First, Drop: part[0].Drop, Level: level}
	var entries, runs strings.Builder
	for _, c := range part {
		p.Count += c.Count
		p.Drop = min(p.Drop, c.Drop)
		p.Recv = max(p.Recv, c.Recv)
		p.Embedded += c.Embedded
		p.Marked = p.Marked || c.Marked
		entries.WriteString(c.Entries)
		runs.WriteString(c.Runs)
	}
	p.Entries, p.Runs = entries.String(), runs.String()
	b, err := marshalRecord(part)
	if err != nil {
		return fmt.Errorf("ledger: encode a page of parked chunks: %w", err)
	}
	blobs.set(waitPageBlob(p.N), b)
	d.Waits = slices.Concat(d.Waits[:i:i], []waitChunkRef{p}, d.Waits[i+waitPage:])
	return nil
}

// noWaits clears what the document kept about its chunks once none is
// listed.
func (d *document) noWaits() {
	d.Waits, d.WaitLast, d.WaitUntil = nil, waitKey{}, 0
}

func (d *document) putBack(recs []waitRecord) {
	for _, r := range recs {
		if r.Entry != nil && d.Entries[r.Entry.ID] == nil {
			e := *r.Entry
			d.Entries[e.ID] = &e
		}
		if r.Item != nil && d.Queue[r.Item.EntryID] == nil {
			q := *r.Item
			d.Queue[q.EntryID] = &q
		}
		if r.Run != nil && d.Runs[r.Run.ID] == nil {
			run := *r.Run
			d.Runs[run.ID] = &run
		}
	}
}

// parkedAs remembers the chunks a decision put back (unparkAll), so that
// those it left as they were go back out as they were (refold) instead of
// being written again.
type parkedAs struct {
	chunks []waitChunkRef
	last   waitKey
	until  int64
}

func (d *document) parkedState() parkedAs {
	return parkedAs{chunks: append([]waitChunkRef(nil), d.Waits...), last: d.WaitLast, until: d.WaitUntil}
}

// refold lists again, and keeps, every chunk of was whose events the
// decision left exactly as the chunk holds them and that may still be
// parked; the others stay in the document, and their records go.
func (d *document) refold(was parkedAs, w waitLoads, o Options, blobs *blobSet) {
	if len(was.chunks) == 0 {
		return
	}
	runs := d.runUses()
	same := func(stored, cur any) bool {
		a, err1 := marshalRecord(stored)
		b, err2 := marshalRecord(cur)
		return err1 == nil && err2 == nil && bytes.Equal(a, b)
	}
	// kept reports whether chunk c's events are still as it holds them.
	kept := func(c waitChunkRef) bool {
		recs, ok := w.chunks[c.N]
		for _, r := range recs {
			q, e, run := d.Queue[r.Item.EntryID], d.Entries[r.Entry.ID], d.Runs[r.Run.ID]
			if !ok || q == nil || e == nil || run == nil || !d.parkable(q, runs, o) ||
				!same(r.Item, q) || !same(r.Entry, e) || !same(r.Run, run) {
				return false
			}
		}
		return ok
	}
	// keep parks c's events again under its record.
	keep := func(c waitChunkRef) {
		for _, r := range w.chunks[c.N] {
			delete(d.Queue, r.Item.EntryID)
			delete(d.Entries, r.Entry.ID)
			delete(d.Runs, r.Run.ID)
			if c.Marked {
				// Its markers stay, as its record does.
				delete(blobs.m, waitMarkEntry(r.Entry.ID))
				delete(blobs.m, waitMarkRun(r.Run.ID))
			}
		}
		delete(blobs.m, waitBlob(c.N))
	}
	// again is what lists c's kept events again: c itself when all of
	// them are kept (a page's record stays too), otherwise the kept
	// listings under it, in its place.
	var again func(c waitChunkRef) []waitChunkRef
	again = func(c waitChunkRef) []waitChunkRef {
		if c.Page == 0 {
			if kept(c) {
				keep(c)
				return []waitChunkRef{c}
			}
			return nil
		}
		refs := w.pages[c.N]
		var out []waitChunkRef
		whole := len(refs) > 0
		for _, r := range refs {
			back := again(r)
			whole = whole && len(back) == 1 && back[0].N == r.N
			out = append(out, back...)
		}
		if whole {
			delete(blobs.m, waitPageBlob(c.N))
			return []waitChunkRef{c}
		}
		return out
	}
	var back []waitChunkRef
	for _, c := range was.chunks {
		back = append(back, again(c)...)
	}
	if len(back) > 0 {
		// The bounds of every chunk there was still bound those kept.
		d.Waits, d.WaitLast, d.WaitUntil = back, was.last, was.until
	}
}

// runUses counts the entries and items that name each run.
func (d *document) runUses() map[string]int {
	runs := map[string]int{}
	for _, e := range d.Entries {
		if e.RunID != "" {
			runs[e.RunID]++
		}
	}
	for _, q := range d.Queue {
		runs[q.RunID]++
	}
	return runs
}

// headBefore reports whether d holds a queued or delivering event ordered
// before k: the head the order rule lets go is then in the document.
func (d *document) headBefore(k waitKey) bool {
	for _, q := range d.Queue {
		if (q.Status == DeliveryQueued || q.Status == DeliveryDelivering) && keyOf(q).before(k) {
			return true
		}
	}
	return false
}

// restoreWaits prunes the document for a write, as prune does, with the
// chunks that hold an event or run retention drops now read back first
// (so that prune drops them exactly as it would have in the document:
// once, in the same pass), and then reads chunks back, first first, until
// the document holds the scope's head. A chunk read back from the middle
// stays in the document: its events are before the last parked one.
func (d *document) restoreWaits(w waitLoads, now time.Time, retention time.Duration, blobs *blobSet) error {
	nowN := now.UnixNano()
	// The pages that hold such a chunk are listed in full first.
	var pages []uint64
	for _, c := range d.Waits {
		if _, ok := w.pages[c.N]; c.Page > 0 && c.Drop < nowN && !ok {
			pages = append(pages, c.N)
		}
	}
	if len(pages) > 0 {
		return &errNeedWaits{pages: pages}
	}
	for i := 0; i < len(d.Waits); i++ {
		if d.Waits[i].Page > 0 && d.Waits[i].Drop < nowN {
			if err := d.expand(i, w, blobs); err != nil {
				return err
			}
			i-- // its first chunk is at i now
		}
	}
	var dropping []waitChunkRef
	for _, c := range d.Waits {
		if c.Drop < nowN {
			dropping = append(dropping, c)
		}
	}
	if need := w.missing(dropping); need != nil {
		return need // all at once: one read, one try
	}
	for i := 0; i < len(d.Waits); {
		if d.Waits[i].Drop >= nowN {
			i++
			continue
		}
		if err := d.unparkAt(i, w, blobs); err != nil {
			return err
		}
	}
	d.prune(now, retention, blobs)
	for len(d.Waits) > 0 && !d.headBefore(d.Waits[0].First) {
		if d.Waits[0].Page > 0 {
			if err := d.expand(0, w, blobs); err != nil {
				return err
			}
			continue
		}
		if err := d.unparkAt(0, w, blobs); err != nil {
			return err
		}
	}
	return nil
}

// parkable reports whether q may be parked (see the file comment); runs
// counts the entries and items that name each run.
func (d *document) parkable(q *QueueItem, runs map[string]int, o Options) bool {
	if !nanosFit(q.ContextAt) || !nanosFit(q.ReceivedAt) {
		return false
	}
	if Order(q.Order) != OrderScope || q.Status != DeliveryQueued || q.Attempts != 0 || q.Replays != 0 ||
		q.Trials != 0 || q.Quiet != 0 || q.CoverCount != 0 || q.Parked || q.Inline || len(q.Records) > 0 {
		return false
	}
	if _, moved := d.Moved[q.EntryID]; moved {
		return false // a spilled chunk holds an older copy: see spill.go
	}
	e := d.Entries[q.EntryID]
	if e == nil || e.State != StatePending || !e.Redeliverable || e.PendingTTL != 0 || (e.RunID != "" && e.RunID != q.RunID) {
		return false
	}
	own := 1 // its item
	if e.RunID != "" {
		own++
	}
	if _, capped := capFor(o, e.Intent); capped {
		return false
	}
	r := d.Runs[q.RunID]
	if r == nil || r.Mode != ModeIndependent || r.Ended || r.Cancelled || r.Wrote || r.ID == d.Holder ||
		!r.LeaseUntil.IsZero() || len(r.Acks) > 0 || runs[r.ID] != own {
		return false
	}
	return true
}

// park moves the waiting events after the last chunk, but the newest
// waitKeep and the first waitKeep of the scope, into chunks of waitChunk.
func (d *document) park(now time.Time, retention time.Duration, o Options, blobs *blobSet) error {
	var open []*QueueItem
	for _, q := range d.Queue {
		if q.Status == DeliveryQueued || q.Status == DeliveryDelivering {
			open = append(open, q)
		}
	}
	if len(open) < waitKeep+waitChunk {
		return nil
	}
	sort.Slice(open, func(i, j int) bool { return orderedBefore(open[i], open[j]) })
	runs := d.runUses()
	var cands []*QueueItem
	from := 0
	if len(d.Waits) == 0 {
		from = waitKeep // the head stays, and a few after it
	}
	for _, q := range open[from:] {
		if len(d.Waits) > 0 && !d.WaitLast.before(keyOf(q)) {
			continue
		}
		if d.parkable(q, runs, o) {
			cands = append(cands, q)
		}
	}
	for len(cands) >= waitKeep+waitChunk {
		part := cands[:waitChunk]
		cands = cands[waitChunk:]
		d.WaitN++
		c := waitChunkRef{N: d.WaitN, Count: len(part), First: keyOf(part[0]), Marked: d.markWaits}
		d.WaitLast = keyOf(part[len(part)-1])
		recs := make([]waitRecord, len(part))
		var entries, runIDs strings.Builder
		for i, q := range part {
			e, r := d.Entries[q.EntryID], d.Runs[q.RunID]
			recs[i] = waitRecord{Entry: e, Item: q, Run: r}
			if !c.Marked {
				entries.WriteString(waitHash(e.ID))
				runIDs.WriteString(waitHash(r.ID))
			}
			drop := q.dropAt(retention)
			idle := r.LastActive
			if r.LeaseUntil.After(idle) {
				idle = r.LeaseUntil
			}
			idle = idle.Add(retention)
			if idle.Before(drop) {
				drop = idle
			}
			if i == 0 || drop.UnixNano() < c.Drop {
				c.Drop = drop.UnixNano()
			}
			for _, t := range []time.Time{q.dropAt(retention), e.Deadline().Add(retention), r.LastActive.Add(retention), r.LeaseUntil.Add(retention)} {
				d.WaitUntil = max(d.WaitUntil, t.UnixNano())
			}
			c.Recv = max(c.Recv, q.ReceivedAt.UnixNano())
			if q.carriesEvent() {
				c.Embedded++
			}
		}
		c.Entries, c.Runs = entries.String(), runIDs.String()
		b, err := marshalRecord(recs)
		if err != nil {
			return fmt.Errorf("ledger: encode parked events: %w", err)
		}
		blobs.set(waitBlob(c.N), b)
		if c.Marked {
			setMarks(recs, waitMarkData, blobs)
		}
		for _, q := range part {
			delete(d.Entries, q.EntryID)
			delete(d.Runs, q.RunID)
			delete(d.Queue, q.EntryID)
		}
		d.Waits = append(d.Waits, c)
	}
	return nil
}

// decodeWaits decodes a chunk record.
func decodeWaits(scope string, n uint64, b []byte) ([]waitRecord, error) {
	var recs []waitRecord
	if err := unmarshalRecord(b, &recs); err != nil {
		return nil, fmt.Errorf("%w: scope %q: parked events %d: %w", ErrCorrupt, scope, n, err)
	}
	for _, r := range recs {
		if r.Entry == nil || r.Item == nil || r.Run == nil {
			return nil, fmt.Errorf("%w: scope %q: parked events %d: a record lacks its entry, item or run", ErrCorrupt, scope, n)
		}
	}
	return recs, nil
}

// decodeWaitPage decodes a page record.
func decodeWaitPage(scope string, n uint64, b []byte) ([]waitChunkRef, error) {
	// Either form: a page's listings are written as the document's are.
	var refs waitChunkList
	if err := unmarshalRecord(b, &refs); err != nil {
		return nil, fmt.Errorf("%w: scope %q: page of parked chunks %d: %w", ErrCorrupt, scope, n, err)
	}
	if len(refs) == 0 {
		return nil, fmt.Errorf("%w: scope %q: page of parked chunks %d lists none", ErrCorrupt, scope, n)
	}
	return refs, nil
}

// readWaits reads the chunks and pages need names into w, in one store
// call. gone reports that one of them is missing: the document that
// listed it is not the scope's any more.
func (l *Ledger) readWaits(ctx context.Context, scope string, need *errNeedWaits, w *waitLoads) (gone bool, err error) {
	refs := make([]waitChunkRef, 0, len(need.ns)+len(need.pages))
	for _, n := range need.ns {
		refs = append(refs, waitChunkRef{N: n})
	}
	for _, n := range need.pages {
		refs = append(refs, waitChunkRef{N: n, Page: 1})
	}
	bs, err := readRecords(ctx, l, scope, "parked chunks", refs, waitChunkRef.record)
	if err != nil {
		return false, err
	}
	if w.chunks == nil {
		w.chunks, w.pages = map[uint64][]waitRecord{}, map[uint64][]waitChunkRef{}
	}
	for i, b := range bs {
		c := refs[i]
		switch {
		case b == nil:
			// Gone meanwhile: the document no longer lists it, and
			// the next try reads the one that does.
			gone = true
		case c.Page > 0:
			if w.pages[c.N], err = decodeWaitPage(scope, c.N, b); err != nil {
				return false, err
			}
		default:
			if w.chunks[c.N], err = decodeWaits(scope, c.N, b); err != nil {
				return false, err
			}
		}
	}
	return gone, nil
}

// readFull reads a scope's document with its parked events put back, for
// the reads that list its items or entries. It changes nothing.
func (l *Ledger) readFull(ctx context.Context, scope string) (*document, error) {
	d, err := l.readListed(ctx, scope)
	if err != nil || len(d.Waits) == 0 {
		return d, err
	}
	var w waitLoads
	for try := 0; ; try++ {
		need := w.missing(d.Waits)
		if need == nil {
			if err := d.unparkAll(w, nil); err != nil {
				return nil, err
			}
			return d, nil
		}
		if try >= 2*spillTries {
			return nil, fmt.Errorf("%w: scope %q: parked events kept moving", ErrContention, scope)
		}
		// Pages first, then the chunks they list: two reads at most
		// while nothing moves.
		gone, err := l.readWaits(ctx, scope, need, &w)
		if err != nil {
			return nil, err
		}
		if gone {
			// A record went between the reads: read the document
			// again.
			if d, err = l.readListed(ctx, scope); err != nil {
				return nil, err
			}
		}
	}
}

// waitMarked reports whether d lists a Marked chunk or page.
func (d *document) waitMarked() bool {
	return slices.ContainsFunc(d.Waits, func(c waitChunkRef) bool { return c.Marked })
}

// waitLevels reports whether d lists a page of pages of parked chunks.
func (d *document) waitLevels() bool {
	return slices.ContainsFunc(d.Waits, func(c waitChunkRef) bool { return c.Page > 0 && c.Level > 0 })
}

// waitPages reports whether d lists a page of parked chunks.
func (d *document) waitPages() bool {
	return slices.ContainsFunc(d.Waits, func(c waitChunkRef) bool { return c.Page > 0 })
}
