package ledger

import (
	"bytes"
	"fmt"
	"strconv"
	"time"
)

// A long scope's document lists the records its history moved into
// (spilled chunks and their pages, landing chunks and pages), and every
// step of the scope moves those listings with the document (issue #34).
// As JSON objects with named fields and RFC 3339 times a spilled chunk's
// listing took some 115 bytes, so that at 10,000 settled effects the
// listings were about 3 KB of a 10 KB document. Each of the four lists is
// therefore written as one flat JSON array of integers, a fixed number per
// listing in a fixed order (the stride, below), times in Unix
// nanoseconds, zero for none: about half the bytes, and cheaper to decode
// than the objects and their times. The document that holds such lists is
// format 10, so that an older build refuses it rather than fail on
// numbers where it expects objects.
//
// Both forms are read: documents written before keep their objects until
// the list is written again. A time that Unix nanoseconds cannot hold
// (outside the years 1678 to 2261, or the epoch itself, whose 0 means no
// time) makes its list keep the object form, which holds any time. The
// records of pages (sp:{n}, lp:{n}) keep the object form: they are read
// only when a decision walks the history.

// Values per listing in the flat form.
const (
	spillChunkStride = 11 // n, count, maxSeq, until, first, last, items, recvFirst, recvLast, runs, runsUntil
	spillPageStride  = 14 // n, chunks, low, count, maxSeq, until, first, last, items, recvFirst, recvLast, level, runs, runsUntil
	landGroupStride  = 5  // n, to, max, count, level
)

// spillChunkList, spillPageList and landGroupList are the document's lists
// with the flat JSON form.
type (
	spillChunkList []spillChunk
	spillPageList  []spillPage
	landGroupList  []landGroup
)

// listingTime is t as the flat form holds it, and whether it can.
func listingTime(t time.Time) (int64, bool) {
	if t.IsZero() {
		return 0, true
	}
	if y := t.Year(); y < 1678 || y > 2261 {
		return 0, false
	}
	ns := t.UnixNano()
	return ns, ns != 0
}

// fromListingTime is the time the flat form holds as ns.
func fromListingTime(ns int64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, ns).UTC()
}

// flatWriter writes a flat list.
type flatWriter struct{ out []byte }

func newFlatWriter(values int) *flatWriter {
	w := &flatWriter{out: make([]byte, 0, 2+values*8)}
	w.out = append(w.out, '[')
	return w
}

func (w *flatWriter) int(v int64) {
	if len(w.out) > 1 {
		w.out = append(w.out, ',')
	}
	w.out = strconv.AppendInt(w.out, v, 10)
}

func (w *flatWriter) bytes() []byte { return append(w.out, ']') }

// isObjectList reports whether raw, a JSON array, is in the object form
// (or empty, which both forms read alike).
func isObjectList(raw []byte) bool {
	raw = bytes.TrimLeft(raw, " \t\r\n")
	if len(raw) == 0 || raw[0] != '[' {
		return true // null, or not a list: the object form's decoder says what is wrong
	}
	raw = bytes.TrimLeft(raw[1:], " \t\r\n")
	return len(raw) == 0 || raw[0] == '{' || raw[0] == ']'
}

// readFlat decodes the flat form of a list whose listings have stride
// values each.
func readFlat(raw []byte, what string, stride int) ([]int64, error) {
	// Sized from the commas, so that decoding does not grow it.
	vals := make([]int64, 0, bytes.Count(raw, []byte{','})+1)
	if err := unmarshalRecord(raw, &vals); err != nil {
		return nil, fmt.Errorf("%s list: %w", what, err)
	}
	if len(vals)%stride != 0 {
		return nil, fmt.Errorf("%s list: %d values, not a multiple of %d", what, len(vals), stride)
	}
	return vals, nil
}

// MarshalJSON writes the flat form, unless a time needs the object form.
func (l spillChunkList) MarshalJSON() ([]byte, error) {
	w := newFlatWriter(len(l) * spillChunkStride)
	for _, c := range l {
		until, ok1 := listingTime(c.Until)
		runsUntil, ok2 := listingTime(c.RunsUntil)
		if !ok1 || !ok2 {
			return marshalRecord([]spillChunk(l))
		}
		for _, v := range [spillChunkStride]int64{int64(c.N), int64(c.Count), int64(c.MaxSeq), until, c.First, c.Last,
			int64(c.Items), c.RecvFirst, c.RecvLast, int64(c.Runs), runsUntil} {
			w.int(v)
		}
	}
	return w.bytes(), nil
}

// UnmarshalJSON reads either form.
func (l *spillChunkList) UnmarshalJSON(raw []byte) error {
	if isObjectList(raw) {
		return unmarshalRecord(raw, (*[]spillChunk)(l))
	}
	v, err := readFlat(raw, "spilled chunk", spillChunkStride)
	if err != nil {
		return err
	}
	out := make(spillChunkList, 0, len(v)/spillChunkStride)
	for ; len(v) > 0; v = v[spillChunkStride:] {
		out = append(out, spillChunk{N: uint64(v[0]), Count: int(v[1]), MaxSeq: uint64(v[2]), Until: fromListingTime(v[3]),
			First: v[4], Last: v[5], Items: int(v[6]), RecvFirst: v[7], RecvLast: v[8], Runs: int(v[9]),
			RunsUntil: fromListingTime(v[10])})
	}
	*l = out
	return nil
}

// MarshalJSON writes the flat form, unless a time needs the object form.
func (l spillPageList) MarshalJSON() ([]byte, error) {
	w := newFlatWriter(len(l) * spillPageStride)
	for _, p := range l {
		until, ok1 := listingTime(p.Until)
		runsUntil, ok2 := listingTime(p.RunsUntil)
		if !ok1 || !ok2 {
			return marshalRecord([]spillPage(l))
		}
		for _, v := range [spillPageStride]int64{int64(p.N), int64(p.Chunks), int64(p.Low), int64(p.Count), int64(p.MaxSeq), until,
			p.First, p.Last, int64(p.Items), p.RecvFirst, p.RecvLast, int64(p.Level), int64(p.Runs), runsUntil} {
			w.int(v)
		}
	}
	return w.bytes(), nil
}

// UnmarshalJSON reads either form.
func (l *spillPageList) UnmarshalJSON(raw []byte) error {
	if isObjectList(raw) {
		return unmarshalRecord(raw, (*[]spillPage)(l))
	}
	v, err := readFlat(raw, "spill page", spillPageStride)
	if err != nil {
		return err
	}
	out := make(spillPageList, 0, len(v)/spillPageStride)
	for ; len(v) > 0; v = v[spillPageStride:] {
		out = append(out, spillPage{N: uint64(v[0]), Chunks: int(v[1]), Low: uint64(v[2]), Count: int(v[3]), MaxSeq: uint64(v[4]),
			Until: fromListingTime(v[5]), First: v[6], Last: v[7], Items: int(v[8]), RecvFirst: v[9], RecvLast: v[10],
			Level: int(v[11]), Runs: int(v[12]), RunsUntil: fromListingTime(v[13])})
	}
	*l = out
	return nil
}

// MarshalJSON writes the flat form: a landing group's time is Unix
// nanoseconds already, so it always can.
func (l landGroupList) MarshalJSON() ([]byte, error) {
	w := newFlatWriter(len(l) * landGroupStride)
	for _, g := range l {
		for _, v := range [landGroupStride]int64{int64(g.N), int64(g.To), g.Max, int64(g.Count), int64(g.Level)} {
			w.int(v)
		}
	}
	return w.bytes(), nil
}

// UnmarshalJSON reads either form.
func (l *landGroupList) UnmarshalJSON(raw []byte) error {
	if isObjectList(raw) {
		return unmarshalRecord(raw, (*[]landGroup)(l))
	}
	v, err := readFlat(raw, "landing group", landGroupStride)
	if err != nil {
		return err
	}
	out := make(landGroupList, 0, len(v)/landGroupStride)
	for ; len(v) > 0; v = v[landGroupStride:] {
		out = append(out, landGroup{N: uint64(v[0]), To: uint64(v[1]), Max: v[2], Count: int(v[3]), Level: int(v[4])})
	}
	*l = out
	return nil
}

// listsCompactly reports whether d lists a record its history moved out
// (format 10).
func (d *document) listsCompactly() bool {
	return len(d.Spilled) > 0 || len(d.SpillPages) > 0 || len(d.LandChunks) > 0 || len(d.LandPages) > 0
}
