package ledger

import (
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"
)

// listedDocument is a document whose four lists hold listingFixtures and
// more, in the order a scope writes them: pages before chunks, each list
// oldest first, every time a listing may carry distinct.
func listedDocument(at time.Time) *document {
	chunks, pages, groups := listingFixtures(at)
	d := newDocument("s", at)
	d.SpillPages = pages
	d.Spilled = append(chunks, spillChunk{N: 11, Count: 16, MaxSeq: 9000, Until: at.Add(-time.Hour),
		Items: 2, RecvFirst: at.Add(-2 * time.Hour).UnixNano(), RecvLast: at.Add(3 * time.Hour).UnixNano()})
	d.LandPages = groups[:1]
	// Landing times need not grow with sequences (clocks differ): the
	// record's latest is not its last group's.
	d.LandChunks = landGroupList{{N: 257, To: 4112, Max: at.Add(10 * time.Minute).UnixNano()},
		{N: 258, To: 4128, Max: at.Add(time.Minute).UnixNano()}}
	d.LandedBase = 100
	d.LandCut = at.Add(-time.Hour)
	d.Landings = []landing{{Seq: 4129, At: at.Add(2 * time.Minute)}, {Seq: 4130, At: at.Add(3 * time.Minute)}}
	d.Spill = 11
	d.Moved = map[string]uint64{"old": 2, "new": 10}
	return d
}

// question is one thing a step asks of a document's listings.
type question struct {
	name string
	ask  func(d *document) string
}

// questions are what steps ask of a document's listings, at times and
// sequences around every bound the fixtures hold.
func questions(at time.Time) []question {
	qs := []question{
		{"chunks, landed out, runs", func(d *document) string {
			return fmt.Sprint(d.hasSpilledChunks(), d.landedOut(), d.spilledRuns())
		}},
		{"moved kept", func(d *document) string {
			cp := *d
			cp.Moved = map[string]uint64{"gone": 0, "old": 2, "new": 10}
			cp.pruneMoved()
			return fmt.Sprint(cp.Moved)
		}},
	}
	for _, seq := range []uint64{0, 2047, 2048, 8447, 8448, 8999, 9000, 9001} {
		qs = append(qs, question{fmt.Sprintf("spilled after %d", seq), func(d *document) string { return fmt.Sprint(d.spilledAfter(seq)) }})
	}
	for _, off := range []time.Duration{-3 * time.Hour, -time.Hour, -time.Hour + 1, -30 * time.Minute, 0, 1, time.Minute,
		time.Hour, time.Hour + 1, 2 * time.Hour, 4 * time.Hour} {
		t := at.Add(off)
		qs = append(qs,
			question{fmt.Sprintf("retirable at %s", off), func(d *document) string { return fmt.Sprint(d.retirable(t)) }},
			question{fmt.Sprintf("received at %s", off), func(d *document) string { return d.newestReceived(t).String() }})
		if off >= 0 {
			// Older contexts walk the fixtures' page of pages,
			// whose records they do not hold.
			qs = append(qs, question{fmt.Sprintf("seq at %s", off), func(d *document) string { return fmt.Sprint(d.seqAt(t, d.loads)) }})
		}
	}
	return qs
}

// The listings that move into a record answer every question a step asks
// of them as they did in the document: from the record's summary while
// the record stays out, and from the record itself once it is put back.
func TestListingsRecordAnswersAsTheDocument(t *testing.T) {
	at := time.Date(2026, 12, 6, 8, 8, 20, 760_000_001, time.UTC)
	records := map[string][]landing{}
	for n := uint64(1); n <= 258; n++ {
		records[landBlob(n)] = []landing{{Seq: 16 * n, At: at.Add(-time.Duration(300-n) * time.Minute)}}
	}
	records[landBlob(257)] = []landing{{Seq: 4112, At: at.Add(5 * time.Minute)}}
	records[landBlob(258)] = []landing{{Seq: 4128, At: at.Add(time.Minute)}}
	loads := func() *landLoads { return &landLoads{chunks: records, pages: map[string][]landGroup{}} }
	qs := questions(at)
	want := make([]string, len(qs))
	for i, q := range qs {
		d := listedDocument(at)
		d.loads = loads()
		want[i] = q.ask(d)
		if d.loads.need != "" {
			t.Fatalf("%s: the whole document needs record %s: the fixture is not whole", q.name, d.loads.need)
		}
	}

	moving := listedDocument(at)
	moving.loads = &landLoads{}
	var blobs blobSet
	w, err := moving.finish(at, time.Hour, &blobs)
	if err != nil {
		t.Fatal(err)
	}
	if moving.Lists == nil || moving.listingCount() != 0 || moving.Format != format11 {
		t.Fatalf("finish kept %d listings in the document (record %v, format %d)", moving.listingCount(), moving.Lists, moving.Format)
	}
	name := moving.Lists.name()
	rec := blobs.m[name]
	if rec == nil || moving.loads.wrote != name {
		t.Fatalf("finish named %s and wrote %q; its records: %v", name, moving.loads.wrote, reflect.ValueOf(blobs.m).MapKeys())
	}
	wantExpiry := at.Add(time.Hour).Add(time.Hour) // the listings' latest until, plus retention
	if !moving.ExpiresAt.Equal(wantExpiry) {
		t.Errorf("the document expires at %s, want %s (its listings' latest end of retention)", moving.ExpiresAt, wantExpiry)
	}

	// Read back as a store hands it over, each question on its own: the
	// record stays out, and a question the summary cannot answer asks
	// for the record instead of answering.
	fromSummary := 0
	for i, q := range qs {
		out, err := decodeDocument("s", w.Doc, at)
		if err != nil {
			t.Fatal(err)
		}
		out.loads = loads()
		got := q.ask(out)
		if out.listsIn != nil {
			t.Fatalf("%s: answered with a record it was not given", q.name)
		}
		if out.loads.need == name {
			continue
		}
		fromSummary++
		if got != want[i] {
			t.Errorf("%s, record out: %s; in the document: %s", q.name, got, want[i])
		}
		// With the record at hand, the same.
		in, err := decodeDocument("s", w.Doc, at)
		if err != nil {
			t.Fatal(err)
		}
		in.loads = loads()
		in.loads.lists = map[string][]byte{name: rec}
		if got := q.ask(in); got != want[i] || in.loads.need != "" {
			t.Errorf("%s, record at hand: %s (asked for %q); in the document: %s", q.name, got, in.loads.need, want[i])
		}
	}
	// Those that ask for it: a receipt bound once a listing with items
	// passed retention (retirement deletes it after that write), and a
	// context within the record's newest landings.
	if fromSummary*3 < len(qs)*2 {
		t.Fatalf("only %d of %d questions answered from the summary", fromSummary, len(qs))
	}
	in, err := decodeDocument("s", w.Doc, at)
	if err != nil {
		t.Fatal(err)
	}
	in.loads = &landLoads{lists: map[string][]byte{name: rec}}
	if !in.wholeLists() {
		t.Fatalf("the record written was not put back")
	}
	whole := listedDocument(at)
	if !reflect.DeepEqual(in.Spilled, whole.Spilled) || !reflect.DeepEqual(in.SpillPages, whole.SpillPages) ||
		!reflect.DeepEqual(in.LandChunks, whole.LandChunks) || !reflect.DeepEqual(in.LandPages, whole.LandPages) {
		t.Errorf("the lists put back differ from those moved out")
	}
}

// The questions the summary cannot answer ask for the record, and the
// answers given meanwhile are void: the step says which record it needs.
func TestListingsRecordAskedForWhenNeeded(t *testing.T) {
	at := time.Date(2026, 12, 6, 8, 8, 20, 760_000_001, time.UTC)
	d := listedDocument(at)
	d.loads = &landLoads{}
	var blobs blobSet
	w, err := d.finish(at, time.Hour, &blobs)
	if err != nil {
		t.Fatal(err)
	}
	name := d.Lists.name()
	for _, c := range []struct {
		what string
		ask  func(d *document)
	}{
		{"a context older than the record's landings", func(d *document) { d.seqAt(at.Add(-time.Hour), d.loads) }},
		{"retention past the record's oldest landings", func(d *document) { d.pruneLandings(at.Add(2*time.Minute), &blobSet{}) }},
		{"a receipt bound past a listing's retention", func(d *document) { d.newestReceived(at.Add(-30 * time.Minute)) }},
	} {
		out, err := decodeDocument("s", w.Doc, at)
		if err != nil {
			t.Fatal(err)
		}
		out.loads = &landLoads{}
		c.ask(out)
		if out.loads.need != name {
			t.Errorf("%s: the step asked for %q, want %s", c.what, out.loads.need, name)
		}
	}
	// A tail grown past its bound is stored only with the record.
	out, err := decodeDocument("s", w.Doc, at)
	if err != nil {
		t.Fatal(err)
	}
	out.loads = &landLoads{}
	for i := range listsTail + 1 {
		out.Spilled = append(out.Spilled, spillChunk{N: uint64(20 + i), Count: 16, Until: at})
	}
	var need *errNeedLanding
	if _, err := out.finish(at, time.Hour, &blobSet{}); !errors.As(err, &need) || need.name != name {
		t.Fatalf("a full tail stored without its record: %v", err)
	}
	// Bytes that are not the record named (another scope's, an earlier
	// incarnation's) are never put back.
	out.loads.lists = map[string][]byte{name: []byte(`{"spilled":[]}`)}
	if out.wholeLists() {
		t.Fatalf("a record whose checksum is not the document's was put back")
	}
}
