package ledger

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"
)

// listingFixtures are lists with every field of every listing set, each
// to a value of its own, so that a value written in one place and read
// from another shows.
func listingFixtures(at time.Time) (spillChunkList, spillPageList, landGroupList) {
	chunks := spillChunkList{
		{N: 3, Count: 256, MaxSeq: 8448, Until: at, First: 1001, Last: 1002, Items: 4, RecvFirst: 1003, RecvLast: 1004,
			Runs: 5, RunsUntil: at.Add(time.Second)},
		{N: 4, Count: 16, Until: at.Add(time.Minute)}, // no runs, no items, no bounds
	}
	pages := spillPageList{
		{N: 9, Chunks: 8, Low: 1, Count: 2048, MaxSeq: 2048, Until: at, First: 2001, Last: 2002, Items: 6,
			RecvFirst: 2003, RecvLast: 2004, Level: 1, Runs: 7, RunsUntil: at.Add(2 * time.Second)},
		{N: 10, Chunks: 8, Low: 17, Count: 128, Until: at.Add(time.Hour)},
	}
	groups := landGroupList{
		{N: 1, Count: 256, To: 4096, Max: at.UnixNano(), Level: 1},
		{N: 257, To: 4112, Max: at.UnixNano() + 1},
	}
	return chunks, pages, groups
}

// TestListingsRoundTripFlat: each list is written as one array of
// numbers, shorter than the objects, and reads back as it was.
func TestListingsRoundTripFlat(t *testing.T) {
	chunks, pages, groups := listingFixtures(time.Date(2026, 12, 6, 8, 8, 20, 760_000_001, time.UTC))
	for _, c := range []struct {
		name       string
		list, back any
		objects    any
	}{
		{"spilled chunks", chunks, new(spillChunkList), []spillChunk(chunks)},
		{"spill pages", pages, new(spillPageList), []spillPage(pages)},
		{"landing groups", groups, new(landGroupList), []landGroup(groups)},
	} {
		raw, err := marshalRecord(c.list)
		if err != nil {
			t.Fatal(err)
		}
		if bytes.ContainsAny(raw, `{"`) {
			t.Errorf("%s: %s is not the flat form", c.name, raw)
		}
		old, err := json.Marshal(c.objects)
		if err != nil {
			t.Fatal(err)
		}
		if len(raw) >= len(old) {
			t.Errorf("%s: the flat form takes %d bytes, the objects %d", c.name, len(raw), len(old))
		}
		if err := unmarshalRecord(raw, c.back); err != nil {
			t.Fatalf("%s: %s: %v", c.name, raw, err)
		}
		if got := reflect.ValueOf(c.back).Elem().Interface(); !reflect.DeepEqual(got, c.list) {
			t.Errorf("%s: wrote %+v, read back %+v", c.name, c.list, got)
		}
	}
}

// TestListingsReadTheObjectForm: a document or record written before
// format 10 lists objects with RFC 3339 times, and they read as they were.
func TestListingsReadTheObjectForm(t *testing.T) {
	chunks, pages, groups := listingFixtures(time.Date(2026, 12, 6, 8, 8, 20, 760_000_001, time.UTC))
	for _, c := range []struct {
		name    string
		objects any
		back    any
		want    any
	}{
		{"spilled chunks", []spillChunk(chunks), new(spillChunkList), chunks},
		{"spill pages", []spillPage(pages), new(spillPageList), pages},
		{"landing groups", []landGroup(groups), new(landGroupList), groups},
	} {
		raw, err := json.Marshal(c.objects)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(raw, []byte(`{"n":`)) {
			t.Fatalf("%s: %s is not the object form", c.name, raw)
		}
		if err := unmarshalRecord(raw, c.back); err != nil {
			t.Fatalf("%s: %s: %v", c.name, raw, err)
		}
		got := reflect.ValueOf(c.back).Elem().Interface()
		if !reflect.DeepEqual(got, c.want) {
			t.Errorf("%s: objects %s read back as %+v", c.name, raw, got)
		}
	}
}

// TestListingsKeepTimesNanosecondsCannotHold: a time outside what Unix
// nanoseconds hold, or the epoch, whose 0 the flat form reads as no time,
// keeps its list in the object form, and every time reads back.
func TestListingsKeepTimesNanosecondsCannotHold(t *testing.T) {
	for _, at := range []time.Time{
		time.Date(1500, 1, 2, 3, 4, 5, 6, time.UTC),
		time.Date(2300, 1, 2, 3, 4, 5, 6, time.UTC),
		time.Unix(0, 0).UTC(),
	} {
		chunks, pages, _ := listingFixtures(time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC))
		chunks[1].Until, pages[1].RunsUntil = at, at
		for _, c := range []struct {
			name       string
			list, back any
		}{
			{"spilled chunks", chunks, new(spillChunkList)},
			{"spill pages", pages, new(spillPageList)},
		} {
			raw, err := marshalRecord(c.list)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(raw, []byte(`{"n":`)) {
				t.Errorf("%v, %s: %s is not the object form", at, c.name, raw)
			}
			if err := unmarshalRecord(raw, c.back); err != nil {
				t.Fatal(err)
			}
			if got := reflect.ValueOf(c.back).Elem().Interface(); !reflect.DeepEqual(got, c.list) {
				t.Errorf("%v, %s: wrote %+v, read back %+v", at, c.name, c.list, got)
			}
		}
	}
}

// TestListingsRefuseAPartialListing: a flat list whose numbers do not
// make whole listings is refused, naming the list, and the document that
// holds it reads as corrupt.
func TestListingsRefuseAPartialListing(t *testing.T) {
	var l spillChunkList
	err := unmarshalRecord([]byte(`[1,2,3]`), &l)
	if err == nil || !strings.Contains(err.Error(), "spilled chunk list: 3 values, not a multiple of 11") {
		t.Fatalf("a partial chunk listing: %v", err)
	}
	raw := []byte(`{"format":10,"scope":"s","seq":1,"token":1,"landChunks":[1,16,1796545551298000000,0]}`)
	if _, err := decodeDocument("s", raw, time.Now()); err == nil || !strings.Contains(err.Error(), "landing group list") {
		t.Fatalf("a document with a partial landing listing: %v", err)
	}
}

// TestDocumentWithListingsIsFormat10: a document that lists anything its
// history moved out is format 10 (an older build would fail on the flat
// lists); one that lists nothing writes no list at all.
func TestDocumentWithListingsIsFormat10(t *testing.T) {
	now := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	chunks, pages, groups := listingFixtures(now)
	for _, c := range []struct {
		name string
		set  func(d *document)
	}{
		{"spilled chunks", func(d *document) { d.Spilled = chunks }},
		{"spill pages", func(d *document) { d.SpillPages = pages }},
		{"landing chunks", func(d *document) { d.LandChunks = groups[1:] }},
		{"landing pages", func(d *document) { d.LandPages = groups[:1] }},
	} {
		d := newDocument("s", now)
		w, err := d.finish(now, time.Hour, &blobSet{})
		if err != nil || !bytes.Contains(w.Doc, []byte(`"format":1,`)) {
			t.Fatalf("%s: before: %s, %v", c.name, w.Doc, err)
		}
		for _, key := range []string{"spilled", "spillPages", "landChunks", "landPages"} {
			if bytes.Contains(w.Doc, []byte(`"`+key+`"`)) {
				t.Errorf("%s: a document listing nothing writes %q: %s", c.name, key, w.Doc)
			}
		}
		c.set(d)
		if w, err = d.finish(now, time.Hour, &blobSet{}); err != nil || !bytes.Contains(w.Doc, []byte(`"format":10,`)) {
			t.Fatalf("%s: %s, %v; want format 10", c.name, w.Doc, err)
		}
		back, err := decodeDocument("s", w.Doc, now)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range [][2]any{{back.Spilled, d.Spilled}, {back.SpillPages, d.SpillPages},
			{back.LandChunks, d.LandChunks}, {back.LandPages, d.LandPages}} {
			if !reflect.DeepEqual(l[0], l[1]) {
				t.Errorf("%s: wrote %+v, read back %+v", c.name, l[1], l[0])
			}
		}
	}
}

// TestWaitListingsRoundTripFlat: parked chunk listings without hashes are
// written as numbers, times as differences (some negative: clocks and
// orders differ), in under two thirds of the objects' bytes, and read
// back as they were; with hashes, or times whose differences overflow,
// they keep the object form, which is read too.
func TestWaitListingsRoundTripFlat(t *testing.T) {
	at := time.Date(2026, 12, 6, 8, 8, 20, 760_000_001, time.UTC).UnixNano()
	l := waitChunkList{
		{N: 7, Count: 8, First: waitKey{ContextAt: at, ReceivedAt: at + 5}, Drop: at + 3_600_000_000_000, Recv: at + 9,
			Embedded: 3, Marked: true},
		{N: 40, Count: 64, First: waitKey{ContextAt: at - 2_000_000, ReceivedAt: at + 1}, Drop: at - 1, Recv: at + 70,
			Page: 8, Marked: true, Level: 1},
		{N: 41, Count: 1, First: waitKey{ContextAt: at + 1_000, ReceivedAt: at}, Drop: at, Recv: 0},
	}
	raw, err := marshalRecord(l)
	if err != nil {
		t.Fatal(err)
	}
	objects, err := json.Marshal([]waitChunkRef(l))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.ContainsAny(raw, `{"`) || 3*len(raw) > 2*len(objects) {
		t.Errorf("%d bytes against the objects' %d: %s", len(raw), len(objects), raw)
	}
	var back waitChunkList
	if err := unmarshalRecord(raw, &back); err != nil || !reflect.DeepEqual(back, l) {
		t.Fatalf("read back %+v, %v; want %+v", back, err, l)
	}
	var fromObjects waitChunkList
	if err := unmarshalRecord(objects, &fromObjects); err != nil || !reflect.DeepEqual(fromObjects, l) {
		t.Fatalf("the object form reads as %+v, %v", fromObjects, err)
	}
	for name, odd := range map[string]waitChunkList{
		"hashes":   {{N: 1, Count: 8, First: waitKey{ContextAt: at}, Entries: "AAAABBBB", Runs: "CCCCDDDD"}},
		"overflow": {{N: 1, First: waitKey{ContextAt: math.MinInt64 + 1}, Drop: math.MaxInt64}},
	} {
		raw, err := marshalRecord(odd)
		if err != nil {
			t.Fatal(err)
		}
		var back waitChunkList
		if !bytes.Contains(raw, []byte(`{"n":1`)) || unmarshalRecord(raw, &back) != nil || !reflect.DeepEqual(back, odd) {
			t.Errorf("%s: written %s, read back %+v", name, raw, back)
		}
	}
}
