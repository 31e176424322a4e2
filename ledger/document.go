package ledger

import (
	"fmt"
	"sort"
	"time"
)

// formatVersion is written into every document that has spilled entries
// (spill.go), format3 into one that has moved landings out (landings.go)
// or folded chunk listings into pages (spillpages.go), and format4 into
// one whose spilled records hold queue items (spill.go: an older build
// would take a spilled event for a new one), and format5 into one that
// lists pages of pages (spillpages.go, landings.go), and format6 into one
// that has parked waiting events (waits.go), and format7 into one that has
// spilled runs (spillruns.go), and format8 into one that lists a page of
// parked chunks (waits.go: an older build would read a page as a chunk),
// and format9 into one that lists parked chunks whose ids are marker
// records instead of hashes (waits.go: an older build would take every id
// for one that is not parked), and format10 into one that lists spilled
// chunks, spill pages or landing records at all, since it writes those
// listings as arrays (listings.go), and format11 into one whose listings
// moved into a record of their own (listsout.go: an older build would take
// the few it keeps for all), and format12 into one that lists a page of
// pages of parked chunks (waits.go: an older build would take its pages
// for chunks when it lists them again) or lists parked chunks as numbers
// (listings.go); so that a build that would not read them refuses it. A
// document that did none of these is still written as format 1, which
// every build reads. Formats 3, 4, 5 and 7 are read but
// no longer written: each marks something a document lists (finish).
const (
	formatVersion = 2
	format1       = 1
	format3       = 3
	format4       = 4
	format5       = 5
	format6       = 6
	format7       = 7
	format8       = 8
	format9       = 9
	format10      = 10
	format11      = 11
	format12      = 12
)

// document is the whole state of one scope. It is the JSON every store
// keeps, identical across stores.
type document struct {
	Format    int                  `json:"format"`
	Scope     string               `json:"scope"`
	Seq       uint64               `json:"seq"`   // bumped each time a write lands (committed or ambiguous)
	Token     uint64               `json:"token"` // last fencing token handed out
	ExpiresAt time.Time            `json:"expiresAt,omitzero"`
	Holder    string               `json:"holder,omitempty"` // exclusive-mode lease holder
	Runs      map[string]*runState `json:"runs,omitempty"`
	Entries   map[string]*Entry    `json:"entries,omitempty"`
	// Queue holds the scope's queued deliveries, keyed by their deliver
	// entry's id (see queue.go). Their bodies live in blobs.
	Queue map[string]*QueueItem `json:"queue,omitempty"`
	// LandedBase and Landings map a contextAt to the writes a run has
	// seen: Landings lists, in sequence order, each write's sequence and
	// the landing instance's time; LandedBase is the last sequence pruned
	// from its front.
	LandedBase uint64    `json:"landedBase,omitempty"`
	Landings   []landing `json:"landings,omitempty"`
	// Escalations are the loop breaker's records (see caps.go), oldest
	// first.
	Escalations []*Escalation `json:"escalations,omitempty"`
	// Spill counts every change to the scope's spilled records, and
	// Spilled lists their chunks, oldest first (see spill.go).
	Spill   uint64         `json:"spill,omitempty"`
	Spilled spillChunkList `json:"spilled,omitempty"`
	// SpillPages lists the pages the oldest chunk listings folded into,
	// oldest first (see spillpages.go).
	SpillPages spillPageList `json:"spillPages,omitempty"`
	// Moved maps an entry that moved back from the spilled records into
	// Entries to the Spill counter at that moment: the copies the chunks
	// up to that one hold are out of date (see spill.go).
	Moved map[string]uint64 `json:"moved,omitempty"`
	// LandN numbers the landing records, LandPages and LandChunks list
	// them, oldest first, and LandCut is the latest retention cutoff
	// applied while they exist (see landings.go).
	LandN      uint64        `json:"landN,omitempty"`
	LandPages  landGroupList `json:"landPages,omitempty"`
	LandChunks landGroupList `json:"landChunks,omitempty"`
	LandCut    time.Time     `json:"landCut,omitzero"`
	// ListsN numbers the records the four lists above move into once
	// they are long, and Lists names the one in force with what steps
	// ask of it; while it is set the lists hold only what was added
	// since (see listsout.go).
	ListsN uint64    `json:"listsN,omitempty"`
	Lists  *listsRef `json:"lists,omitempty"`
	// WaitN numbers the records of parked waiting events, and Waits
	// lists them in scope order (see waits.go).
	WaitN uint64        `json:"waitN,omitempty"`
	Waits waitChunkList `json:"waits,omitempty"`
	// WaitLast bounds the keys the chunks hold (the last parked event's),
	// and WaitUntil is when the document may expire for their sake: both
	// hold while any chunk is listed, whichever goes first.
	WaitLast  waitKey `json:"waitLast,omitzero"`
	WaitUntil int64   `json:"waitUntil,omitempty"`

	// markWaits and assumed are not part of the document but one step's
	// own state: markWaits says the store checks Write.Absent, so park
	// lists a chunk's ids as marker records (waits.go), and assumed
	// collects the marker names a decision took as absent, for the write
	// to check.
	markWaits bool     `json:"-"`
	assumed   []string `json:"-"`
	// loads are the records this step read (landings.go, listsout.go),
	// and listsIn the listings record put back into the lists.
	loads   *landLoads   `json:"-"`
	listsIn *listsRecord `json:"-"`
}

// landing is one write joining the scope's history.
type landing struct {
	Seq uint64    `json:"seq"`
	At  time.Time `json:"at"`
}

// blobSet collects the side records one decision writes beside the
// document (nil: delete), for Write.Blobs. It is not part of the document.
type blobSet struct{ m map[string][]byte }

func (b *blobSet) set(name string, data []byte) {
	if b.m == nil {
		b.m = map[string][]byte{}
	}
	b.m[name] = data
}

// drop deletes the item's blobs with the write.
func (b *blobSet) drop(q *QueueItem) {
	if q.Inline {
		// Attempts live in the item; the event blob only with keep_body.
		if q.Blob != "" {
			b.set(eventBlob(q.Blob), nil)
		}
		return
	}
	if !q.carriesEvent() {
		b.set(eventBlob(q.Blob), nil)
	}
	for n := 1; n <= q.Attempts; n++ {
		if !q.heldRecord(n) {
			b.set(attemptBlob(q.Blob, n), nil)
		}
	}
	for n := 1; n <= q.Trials; n++ {
		b.set(trialBlob(q.Blob, n), nil)
	}
}

type runState struct {
	ID         string    `json:"id"`
	Mode       Mode      `json:"mode"`
	Token      uint64    `json:"token"`
	Delivery   int       `json:"delivery"`
	ContextAt  time.Time `json:"contextAt"`
	SeenSeq    uint64    `json:"seenSeq"`
	Acks       []string  `json:"acks,omitempty"` // entry id#attempt the run has acknowledged
	LeaseUntil time.Time `json:"leaseUntil,omitzero"`
	LastActive time.Time `json:"lastActive"`
	Wrote      bool      `json:"wrote,omitempty"`
	Ended      bool      `json:"ended,omitempty"`
	Cancelled  bool      `json:"cancelled,omitempty"`
	EndedAt    time.Time `json:"endedAt,omitzero"`
	EndReason  string    `json:"endReason,omitempty"`
	LostLease  bool      `json:"lostLease,omitempty"`
	// LeaseTTL is the run's own lease TTL (exclusive mode), kept so that
	// heartbeats and claims renew the lease by it. Zero: the ledger's.
	LeaseTTL time.Duration `json:"leaseTtl,omitempty"`
}

func newDocument(scope string, now time.Time) *document {
	return &document{
		Format:  format1,
		Scope:   scope,
		Token:   uint64(now.UnixMilli()),
		Runs:    map[string]*runState{},
		Entries: map[string]*Entry{},
		Queue:   map[string]*QueueItem{},
	}
}

// decodeDocument reads a stored document. A missing or expired document is
// a fresh one.
func decodeDocument(scope string, raw []byte, now time.Time) (*document, error) {
	return decodeDocumentBlobs(scope, raw, now, nil)
}

// decodeDocumentBlobs is decodeDocument for a decision that will write:
// the blobs of an expired document's queue go into blobs, for deletion.
func decodeDocumentBlobs(scope string, raw []byte, now time.Time, blobs *blobSet) (*document, error) {
	if raw == nil {
		return newDocument(scope, now), nil
	}
	var d document
	if err := unmarshalDocument(raw, &d); err != nil {
		return nil, fmt.Errorf("%w: scope %q: %w", ErrCorrupt, scope, err)
	}
	if d.Format != format1 && d.Format != formatVersion && d.Format != format3 && d.Format != format4 && d.Format != format5 && d.Format != format6 && d.Format != format7 && d.Format != format8 && d.Format != format9 && d.Format != format10 && d.Format != format11 && d.Format != format12 {
		return nil, fmt.Errorf("%w: scope %q: format %d, this build reads up to %d", ErrCorrupt, scope, d.Format, format12)
	}
	for id, e := range d.Entries {
		if e == nil {
			return nil, fmt.Errorf("%w: scope %q: entry %q is null", ErrCorrupt, scope, id)
		}
	}
	for id, r := range d.Runs {
		if r == nil {
			return nil, fmt.Errorf("%w: scope %q: run %q is null", ErrCorrupt, scope, id)
		}
	}
	if !d.ExpiresAt.IsZero() && !now.Before(d.ExpiresAt) && !d.mustKeep() {
		fresh := newDocument(scope, now)
		if d.Token >= fresh.Token {
			fresh.Token = d.Token
		}
		// The spill counter never goes back: a process that saw it may
		// hold records read under it.
		fresh.Spill = d.Spill
		// Nor do landing record numbers: a record is never rewritten.
		fresh.LandN = d.LandN
		fresh.WaitN = d.WaitN
		fresh.ListsN = d.ListsN
		// A store may still hold the expired document's blobs (its clock
		// is not the ledger's): the next write deletes them.
		if blobs != nil {
			for _, q := range d.Queue {
				blobs.drop(q)
			}
			for _, c := range d.Spilled {
				blobs.set(chunkBlob(c.N), nil)
				if c.Runs > 0 {
					// Its runs' own records go with the
					// scope's other records, as a page's
					// chunks do.
					blobs.set(runListBlob(c.N), nil)
				}
			}
			// A page's chunks are not listed here, nor what the
			// listings record lists: they go with the scope's
			// other records when the store expires it.
			if d.Lists != nil {
				blobs.set(d.Lists.name(), nil)
			}
			for _, p := range d.SpillPages {
				blobs.set(spillPageBlob(p.N), nil)
			}
			d.dropLandings(blobs)
			// Parked events' own blobs, and the chunks of a page
			// of them, go with the scope's other records when the
			// store expires it, as a spill page's do.
			for _, c := range d.Waits {
				blobs.set(c.record(), nil)
			}
		}
		return fresh, nil
	}
	if d.Runs == nil {
		d.Runs = map[string]*runState{}
	}
	if d.Entries == nil {
		d.Entries = map[string]*Entry{}
	}
	if d.Queue == nil {
		d.Queue = map[string]*QueueItem{}
	}
	d.adoptLegacyLandings()
	return &d, nil
}

// mustKeep reports whether the document holds an entry whose outcome is
// unknown: ambiguous, or pending with no permission to redeliver (which
// reads as ambiguous once abandoned). Such a document never expires, even
// one written with an expiry by an older build.
func (d *document) mustKeep() bool {
	for _, e := range d.Entries {
		if e.State == StateAmbiguous || (e.State == StatePending && !e.Redeliverable) {
			return true
		}
	}
	return false
}

// land records that an entry's outcome is now part of the scope's history,
// so runs whose context predates it see the scope as changed.
func (d *document) land(e *Entry, now time.Time) {
	d.Seq++
	e.LandedSeq = d.Seq
	d.Landings = append(d.Landings, landing{Seq: d.Seq, At: now})
}

// adoptLegacyLandings rebuilds the landing list of a document written
// before it existed, from its entries' sequences and settle times.
func (d *document) adoptLegacyLandings() {
	if d.Seq == 0 || len(d.Landings) > 0 || d.LandedBase != 0 || d.landedOut() {
		return
	}
	for _, e := range d.Entries {
		if e.LandedSeq != 0 {
			d.Landings = append(d.Landings, landing{Seq: e.LandedSeq, At: e.SettledAt})
		}
	}
	sort.Slice(d.Landings, func(i, j int) bool { return d.Landings[i].Seq < d.Landings[j].Seq })
}

// prune drops what retention no longer requires: settled entries,
// redeliverable claims that expired a retention period ago (nobody is
// working on them and a new attempt may start anyway) unless a queued
// delivery still stands for them, and finished or idle runs. Ambiguous
// entries, and pending ones that will read as ambiguous, stay until resolved.
func (d *document) prune(now time.Time, retention time.Duration, blobs *blobSet) {
	cutoff := now.Add(-retention)
	for id, e := range d.Entries {
		settled := (e.State == StateCommitted || e.State == StateFailed) && e.SettledAt.Before(cutoff)
		expired := e.State == StatePending && e.Redeliverable && e.Deadline().Before(cutoff) && d.Queue[id] == nil
		if settled || expired {
			delete(d.Entries, id)
		}
	}
	d.pruneQueue(now, retention, blobs)
	d.pruneEscalations(cutoff)
	// Only a front of the landing list may go: the mapping is by order.
	d.pruneLandings(cutoff, blobs)
	for id, r := range d.Runs {
		if runGone(r, cutoff) {
			delete(d.Runs, id)
			if d.Holder == id {
				d.Holder = ""
			}
		}
	}
}

// finish computes the document's own expiry and the store hints for a write.
func (d *document) finish(now time.Time, retention time.Duration, blobs *blobSet) (*Write, error) {
	// The receipt bound first: it may put the listings back, which the
	// listings' own step then stores.
	received := d.newestReceived(now.Add(-retention))
	if err := d.storeLists(blobs); err != nil {
		return nil, err
	}
	var expires, review time.Time
	keep := false
	later := func(t time.Time) {
		if t.After(expires) {
			expires = t
		}
	}
	earlier := func(t time.Time) {
		if review.IsZero() || t.Before(review) {
			review = t
		}
	}
	for _, e := range d.Entries {
		switch e.State {
		case StateAmbiguous:
			keep = true
			earlier(e.SettledAt)
		case StatePending:
			later(e.Deadline().Add(retention))
			if !e.Redeliverable {
				// Abandoned, it reads as ambiguous: it must outlive
				// any retention, like an ambiguous entry.
				keep = true
				earlier(e.Deadline())
			}
		default:
			later(e.SettledAt.Add(retention))
		}
	}
	for _, c := range d.Spilled {
		later(c.until().Add(retention))
	}
	for _, p := range d.SpillPages {
		later(p.until().Add(retention))
	}
	if r := d.outside(); r != nil && r.Spill > 0 {
		later(refTime(r.Until).Add(retention))
	}
	if len(d.Waits) > 0 {
		later(time.Unix(0, d.WaitUntil))
	}
	for _, r := range d.Runs {
		later(r.LastActive.Add(retention))
		later(r.LeaseUntil.Add(retention))
		if r.Ended || r.Cancelled {
			later(r.EndedAt.Add(retention))
		}
	}
	if !expires.After(now) {
		// Nothing left needs the document past now, but the write itself is
		// news: keep it for one retention period.
		expires = now.Add(retention)
	}
	for _, e := range d.Escalations {
		later(e.LastAt.Add(retention))
		if e.Open() {
			// An open escalation waits for an operator: the review index
			// lists its scope (Escalations) until it is dismissed.
			earlier(e.OpenedAt)
		}
	}
	due := d.queueTimes(now, retention, later)
	for _, q := range d.Queue {
		// Dead and rejected deliveries wait for an operator: the review
		// index lists them (ListDeliveries) until replayed or dropped.
		if q.Status == DeliveryDead || q.Status == DeliveryRejected {
			earlier(q.FinishedAt)
		}
	}
	w := &Write{ReviewAt: review, DueAt: due}
	w.ReceivedAt = received
	if blobs != nil {
		w.Blobs = blobs.m
	}
	if keep {
		d.ExpiresAt = time.Time{}
	} else {
		d.ExpiresAt = expires
		w.TTL = expires.Sub(now)
	}
	d.Format = format1
	switch {
	case d.waitLevels() || d.waitsFlat():
		d.Format = format12
	case d.Lists != nil:
		d.Format = format11
	case d.listsCompactly():
		d.Format = format10
	case d.waitMarked():
		d.Format = format9
	case d.waitPages():
		d.Format = format8
	case len(d.Waits) > 0:
		d.Format = format6
	case d.Spill != 0:
		d.Format = formatVersion
	}
	doc, err := marshalDocument(d)
	if err != nil {
		return nil, fmt.Errorf("ledger: encode scope %q: %w", d.Scope, err)
	}
	w.Doc = doc
	return w, nil
}

// history lists the entries oldest first.
func (d *document) history() []Entry {
	out := make([]Entry, 0, len(d.Entries))
	for _, e := range d.Entries {
		out = append(out, *e)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].ClaimedAt.Equal(out[j].ClaimedAt) {
			return out[i].ClaimedAt.Before(out[j].ClaimedAt)
		}
		return out[i].ID < out[j].ID
	})
	return out
}
