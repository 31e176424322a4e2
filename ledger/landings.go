package ledger

import (
	"fmt"
	"strconv"
	"time"
)

// The landing list grows by one per write, so a scope with thousands of
// effects within retention kept a list of thousands in its document, and
// every write of the scope decoded and encoded all of it (issue #34). Yet
// a decision reads it only to map a new run's contextAt to the writes that
// run has seen (seqAt), and a run's context is nearly always newer than
// all but the last few landings.
//
// So the document keeps the newest landings (Landings, landTail to
// 2*landTail of them) and moves older ones out, in the step that writes
// it, into side records of the scope:
//
//   - "l:{n}" holds landTail landings as chunk n; the document lists the
//     chunk (LandChunks) with its last sequence and its latest time;
//   - "lp:{n}" holds the listings of landPage chunks, n the first of them
//     (chunks are numbered in order, so a page's chunks are n to
//     n+count-1); the document lists the page (LandPages) the same way.
//
// seqAt walks past a chunk or page whose latest landing is no later than
// the context, which is the usual case, without reading it. Otherwise it
// needs the record: the decision asks for it (landLoads.need), transactFind
// reads it and decides again. Records are written once under a number
// that is never reused, so a record read is the record in force as long
// as the document lists it.
//
// Retention prunes the landing list only from its front, and only whole
// records; the latest cutoff applied (LandCut) stands for the landings a
// list kept whole would have lost, so that seqAt answers as it did before
// any landing moved out.
//
// Pages fold too, level by level, as spilled chunk listings do
// (spillpages.go): once the document lists more than landPage pages of one
// level, the oldest landPage of them fold into a page of the next,
// "lp{level}:{n}" (n its first chunk), whose record lists them; so the page
// list stays short however many writes retention keeps (it grew by one
// listing per 512 writes). Every fold takes exactly landPage of the level
// below, so a page of level L spans landPage^(L+1) chunks and the pages
// under it are known from its listing alone, which dropping one needs. Such
// documents are format 5.

// landTail is 16: the document keeps 16 to 31 landings, the writes of the
// last few events (an event's accept, take and finish, and its agent's
// claims and settles), enough for the context of a run begun for an event
// that did not wait long; each landing kept is some 50 bytes that every
// write of the scope moves (32 to 63 of them were 2.4 KB of a 10.9 KB
// document after 10,000 effects). An older context reads the record that
// holds it.
const (
	landTail = 16
	landPage = 16
)

// landGroup is a chunk or page of landings as the document lists it.
type landGroup struct {
	N     uint64 `json:"n"`               // the chunk, or a page's first chunk
	Count int    `json:"count,omitempty"` // a page's chunks
	To    uint64 `json:"to"`              // the last sequence in it
	Max   int64  `json:"max"`             // its latest landing time, Unix nanoseconds
	// Level is a page's: 0 lists chunks, n lists pages of level n-1.
	Level int `json:"level,omitempty"`
}

func (g landGroup) latest() time.Time { return time.Unix(0, g.Max).UTC() }

func landBlob(n uint64) string { return "l:" + strconv.FormatUint(n, 10) }

func landPageBlob(n uint64) string { return "lp:" + strconv.FormatUint(n, 10) }

// pageBlob names the record of page g.
func (g landGroup) pageBlob() string {
	if g.Level == 0 {
		return landPageBlob(g.N)
	}
	return "lp" + strconv.Itoa(g.Level) + ":" + strconv.FormatUint(g.N, 10)
}

// under lists the pages a page above level 0 folded, as it listed them
// then: landPage of them, each spanning an equal share of its chunks.
func (g landGroup) under() []landGroup {
	out := make([]landGroup, 0, landPage)
	span := g.Count / landPage
	for i := range landPage {
		out = append(out, landGroup{N: g.N + uint64(i*span), Count: span, Level: g.Level - 1})
	}
	return out
}

// landLoads holds the landing records a decision read, by record name.
// They never change under a name, so they outlive the retries of one
// transactFind. need names a record seqAt needed and did not have: the
// decision that asked is void.
type landLoads struct {
	chunks map[string][]landing
	pages  map[string][]landGroup
	need   string
	// lists are the listings records read (listsout.go), remembered
	// those the ledger keeps from earlier steps, and wrote and
	// wroteBytes the one this try writes, to remember once it landed.
	lists      map[string][]byte
	remembered *rememberedLists
	wrote      string
	wroteBytes []byte
}

// load decodes a record read for name.
func (ll *landLoads) load(scope, name string, raw []byte) error {
	if ll.chunks == nil {
		ll.chunks, ll.pages = map[string][]landing{}, map[string][]landGroup{}
	}
	if len(name) > 2 && name[:2] == "lp" {
		var p []landGroup
		if err := unmarshalRecord(raw, &p); err != nil {
			return fmt.Errorf("%w: scope %q: landing page %s: %w", ErrCorrupt, scope, name, err)
		}
		ll.pages[name] = p
		return nil
	}
	var c []landing
	if err := unmarshalRecord(raw, &c); err != nil {
		return fmt.Errorf("%w: scope %q: landing chunk %s: %w", ErrCorrupt, scope, name, err)
	}
	ll.chunks[name] = c
	return nil
}

// errNeedLanding: seqAt needs a landing record the decision has not read.
type errNeedLanding struct{ name string }

func (e *errNeedLanding) Error() string {
	return fmt.Sprintf("ledger: decision needs landing record %s", e.name)
}

// landedOut reports whether landings have moved out of the document.
func (d *document) landedOut() bool {
	if r := d.outside(); r != nil && r.Lands > 0 {
		return true
	}
	return len(d.LandPages)+len(d.LandChunks) > 0
}

// landPagesOfPages reports whether the document lists a landing page above
// level 0.
func (d *document) landPagesOfPages() bool {
	for _, p := range d.LandPages {
		if p.Level > 0 {
			return true
		}
	}
	return false
}

// landWalk is seqAt's walk in sequence order.
type landWalk struct {
	t       time.Time
	s       uint64
	pruning bool // still within the front retention has cut off
	cut     time.Time
}

// step takes one landing; false: the walk stops before it.
func (w *landWalk) step(l landing) bool {
	if w.pruning {
		if l.At.Before(w.cut) {
			w.s = l.Seq
			return true
		}
		w.pruning = false
	}
	if l.At.After(w.t) {
		return false
	}
	w.s = l.Seq
	return true
}

// skip reports whether the walk goes past a whole group, and if so takes it.
func (w *landWalk) skip(g landGroup) bool {
	latest := g.latest()
	switch {
	case !latest.After(w.t):
		if w.pruning && !latest.Before(w.cut) {
			w.pruning = false
		}
	case w.pruning && latest.Before(w.cut):
	default:
		return false
	}
	w.s = g.To
	return true
}

// chunks walks listed chunks; true: the walk ended (or needs a record).
func (w *landWalk) chunks(lands *landLoads, cs []landGroup) bool {
	for _, c := range cs {
		if w.skip(c) {
			continue
		}
		ls, ok := lands.chunks[landBlob(c.N)]
		if !ok {
			lands.need = landBlob(c.N)
			return true
		}
		for _, l := range ls {
			if !w.step(l) {
				return true
			}
		}
	}
	return false
}

// pages walks listed pages, down through their levels; true: the walk
// ended (or needs a record).
func (w *landWalk) pages(lands *landLoads, ps []landGroup) bool {
	for _, p := range ps {
		if w.skip(p) {
			continue
		}
		gs, ok := lands.pages[p.pageBlob()]
		if !ok {
			lands.need = p.pageBlob()
			return true
		}
		if p.Level > 0 {
			if w.pages(lands, gs) {
				return true
			}
			continue
		}
		if w.chunks(lands, gs) {
			return true
		}
	}
	return false
}

// seqAt is the sequence up to which a run whose context was captured at t
// has seen the scope: the longest run of writes, in sequence order, each
// stamped no later than t. It walks by sequence and stops at the first
// write stamped after t, so a write that landed later but on an instance
// whose clock is behind can never make an earlier, unseen write count as
// seen. When the walk needs a landing record lands does not hold, it names
// it in lands.need and the decision must not use the answer.
func (d *document) seqAt(t time.Time, lands *landLoads) uint64 {
	w := landWalk{t: t, s: d.LandedBase, pruning: d.landedOut() && !d.LandCut.IsZero(), cut: d.LandCut}
	if r := d.outside(); r != nil && r.Lands > 0 && !w.skip(landGroup{To: r.LandTo, Max: r.LandMax}) && !d.wholeLists() {
		// The walk stops within the landings the listings record
		// lists (its answer is void until the record is read).
		return w.s
	}
	if w.pages(lands, d.LandPages) {
		return w.s
	}
	if w.chunks(lands, d.LandChunks) {
		return w.s
	}
	for _, l := range d.Landings {
		if !w.step(l) {
			break
		}
	}
	return w.s
}

// moveLandings moves the oldest landings out of the document once it
// holds 2*landTail of them, and folds the oldest landPage chunk listings
// into a page once it lists more than landPage chunks.
func (d *document) moveLandings(blobs *blobSet) error {
	for len(d.Landings) >= 2*landTail {
		part := d.Landings[:landTail]
		d.LandN++
		g := landGroup{N: d.LandN, To: part[len(part)-1].Seq, Max: latestLanding(part)}
		b, err := marshalRecord(part)
		if err != nil {
			return fmt.Errorf("ledger: encode landing chunk: %w", err)
		}
		blobs.set(landBlob(g.N), b)
		d.LandChunks = append(d.LandChunks, g)
		d.Landings = append([]landing(nil), d.Landings[landTail:]...)
	}
	if r := d.outside(); r != nil && r.LandChunks+len(d.LandChunks) > landPage && !d.wholeLists() {
		return nil // the step is void: the record is read first
	}
	for len(d.LandChunks) > landPage {
		part := d.LandChunks[:landPage]
		p := landGroup{N: part[0].N, Count: len(part), To: part[len(part)-1].To}
		for i, c := range part {
			if i == 0 || c.Max > p.Max {
				p.Max = c.Max
			}
		}
		b, err := marshalRecord([]landGroup(part)) // a page record keeps the object form (listings.go)
		if err != nil {
			return fmt.Errorf("ledger: encode landing page: %w", err)
		}
		blobs.set(landPageBlob(p.N), b)
		d.LandPages = append(d.LandPages, p)
		d.LandChunks = append([]landGroup(nil), d.LandChunks[landPage:]...)
	}
	pages, err := foldLevels(d.LandPages, landPage, func(p landGroup) int { return p.Level },
		func(part []landGroup, level int) (landGroup, error) {
			p := landGroup{N: part[0].N, To: part[len(part)-1].To, Level: level}
			for i, q := range part {
				p.Count += q.Count
				if i == 0 || q.Max > p.Max {
					p.Max = q.Max
				}
			}
			b, err := marshalRecord(part)
			if err != nil {
				return p, fmt.Errorf("ledger: encode landing page: %w", err)
			}
			blobs.set(p.pageBlob(), b)
			return p, nil
		})
	if err != nil {
		return err
	}
	d.LandPages = pages
	return nil
}

func latestLanding(ls []landing) int64 {
	var latest int64
	for i, l := range ls {
		if n := l.At.UnixNano(); i == 0 || n > latest {
			latest = n
		}
	}
	return latest
}

// dropLandGroup deletes the records of a chunk, or of a page with every
// page and chunk under it.
func dropLandGroup(g landGroup, page bool, blobs *blobSet) {
	if !page {
		blobs.set(landBlob(g.N), nil)
		return
	}
	blobs.set(g.pageBlob(), nil)
	if g.Level > 0 {
		for _, q := range g.under() {
			dropLandGroup(q, true, blobs)
		}
		return
	}
	for i := range g.Count {
		blobs.set(landBlob(g.N+uint64(i)), nil)
	}
}

// dropLandings deletes every landing record the document lists (it expired).
func (d *document) dropLandings(blobs *blobSet) {
	for _, p := range d.LandPages {
		dropLandGroup(p, true, blobs)
	}
	for _, c := range d.LandChunks {
		dropLandGroup(c, false, blobs)
	}
}

// pruneLandings drops the front of the landing list that retention no
// longer requires: landings stamped before the cutoff, up to the first one
// that is not. Moved-out landings go only as whole records; LandCut keeps
// the cutoff for the rest (see seqAt).
func (d *document) pruneLandings(cutoff time.Time, blobs *blobSet) {
	if d.landedOut() {
		if cutoff.After(d.LandCut) {
			d.LandCut = cutoff
		}
		if r := d.outside(); r != nil && r.Lands > 0 && (!refTime(r.LandFront).Before(d.LandCut) || !d.wholeLists()) {
			// The oldest landings are the record's: none goes while
			// its first group stays (or the step is void until the
			// record is read).
			return
		}
		for len(d.LandPages) > 0 && d.LandPages[0].latest().Before(d.LandCut) {
			d.LandedBase = d.LandPages[0].To
			dropLandGroup(d.LandPages[0], true, blobs)
			d.LandPages = d.LandPages[1:]
		}
		if len(d.LandPages) > 0 {
			return
		}
		for len(d.LandChunks) > 0 && d.LandChunks[0].latest().Before(d.LandCut) {
			d.LandedBase = d.LandChunks[0].To
			dropLandGroup(d.LandChunks[0], false, blobs)
			d.LandChunks = d.LandChunks[1:]
		}
		if len(d.LandChunks) > 0 {
			return
		}
		cutoff = d.LandCut
		d.LandCut = time.Time{}
		d.LandPages, d.LandChunks = nil, nil
	}
	n := 0
	for n < len(d.Landings) && d.Landings[n].At.Before(cutoff) {
		d.LandedBase = d.Landings[n].Seq
		n++
	}
	d.Landings = d.Landings[n:]
}
