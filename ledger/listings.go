package ledger

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// A long scope's document lists the records its history moved into
// (spilled chunks and their pages, landing chunks and pages), and every
// step of the scope moves those listings with the document (issue #34).
// As JSON objects with named fields and RFC 3339 times a spilled chunk's
// listing took 113 bytes, so that at 10,000 settled effects the listings
// were about 3 KB of a 10 KB document. Each of the four lists is
// therefore written as one flat JSON array of integers, a fixed number
// per listing in a fixed order (the stride, below), times in Unix
// nanoseconds, zero for none: about half the bytes, and no time to parse
// (docs/performance.md, "Listings as numbers"). The document that holds
// such lists is format 10, so that an older build refuses it rather than
// fail on numbers where it expects objects.
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

// flatCodec maps one kind of listing to its numbers and back.
type flatCodec[T any] struct {
	what   string // for errors: "spilled chunk list: ..."
	stride int
	// write is t's stride numbers (the rest zero), and false when a time
	// of t needs the object form. An array, returned by value: the
	// numbers of a listing cost no allocation.
	write func(t T) ([maxStride]int64, bool)
	read  func(v []int64) T
}

// maxStride is the largest stride.
const maxStride = spillPageStride

var (
	spillChunkCodec = flatCodec[spillChunk]{what: "spilled chunk", stride: spillChunkStride,
		write: func(c spillChunk) ([maxStride]int64, bool) {
			until, ok1 := listingTime(c.Until)
			runsUntil, ok2 := listingTime(c.RunsUntil)
			return [maxStride]int64{int64(c.N), int64(c.Count), int64(c.MaxSeq), until, c.First, c.Last,
				int64(c.Items), c.RecvFirst, c.RecvLast, int64(c.Runs), runsUntil}, ok1 && ok2
		},
		read: func(v []int64) spillChunk {
			return spillChunk{N: uint64(v[0]), Count: int(v[1]), MaxSeq: uint64(v[2]), Until: fromListingTime(v[3]),
				First: v[4], Last: v[5], Items: int(v[6]), RecvFirst: v[7], RecvLast: v[8], Runs: int(v[9]),
				RunsUntil: fromListingTime(v[10])}
		}}
	spillPageCodec = flatCodec[spillPage]{what: "spill page", stride: spillPageStride,
		write: func(p spillPage) ([maxStride]int64, bool) {
			until, ok1 := listingTime(p.Until)
			runsUntil, ok2 := listingTime(p.RunsUntil)
			return [maxStride]int64{int64(p.N), int64(p.Chunks), int64(p.Low), int64(p.Count), int64(p.MaxSeq), until,
				p.First, p.Last, int64(p.Items), p.RecvFirst, p.RecvLast, int64(p.Level), int64(p.Runs), runsUntil}, ok1 && ok2
		},
		read: func(v []int64) spillPage {
			return spillPage{N: uint64(v[0]), Chunks: int(v[1]), Low: uint64(v[2]), Count: int(v[3]), MaxSeq: uint64(v[4]),
				Until: fromListingTime(v[5]), First: v[6], Last: v[7], Items: int(v[8]), RecvFirst: v[9], RecvLast: v[10],
				Level: int(v[11]), Runs: int(v[12]), RunsUntil: fromListingTime(v[13])}
		}}
	// A landing group's time is Unix nanoseconds already: it always has
	// the flat form.
	landGroupCodec = flatCodec[landGroup]{what: "landing group", stride: landGroupStride,
		write: func(g landGroup) ([maxStride]int64, bool) {
			return [maxStride]int64{int64(g.N), int64(g.To), g.Max, int64(g.Count), int64(g.Level)}, true
		},
		read: func(v []int64) landGroup {
			return landGroup{N: uint64(v[0]), To: uint64(v[1]), Max: v[2], Count: int(v[3]), Level: int(v[4])}
		}}
)

// marshalList writes l in the flat form, or, when a time needs it, in the
// object form (l's element type has no encoding of its own).
func marshalList[T any](l []T, c flatCodec[T]) ([]byte, error) {
	out := make([]byte, 0, 2+len(l)*c.stride*8)
	out = append(out, '[')
	for i, x := range l {
		v, ok := c.write(x)
		if !ok {
			return marshalRecord(l)
		}
		for j, n := range v[:c.stride] {
			if i > 0 || j > 0 {
				out = append(out, ',')
			}
			out = strconv.AppendInt(out, n, 10)
		}
	}
	return append(out, ']'), nil
}

// unmarshalList reads l in either form.
func unmarshalList[T any](raw []byte, c flatCodec[T], l *[]T) error {
	if isObjectList(raw) {
		return unmarshalRecord(raw, l)
	}
	v, err := readFlat(raw, c.what, c.stride)
	if err != nil {
		return err
	}
	out := make([]T, 0, len(v)/c.stride)
	for ; len(v) > 0; v = v[c.stride:] {
		out = append(out, c.read(v))
	}
	*l = out
	return nil
}

func (l spillChunkList) MarshalJSON() ([]byte, error) {
	return marshalList([]spillChunk(l), spillChunkCodec)
}

func (l *spillChunkList) UnmarshalJSON(raw []byte) error {
	return unmarshalList(raw, spillChunkCodec, (*[]spillChunk)(l))
}

func (l spillPageList) MarshalJSON() ([]byte, error) {
	return marshalList([]spillPage(l), spillPageCodec)
}

func (l *spillPageList) UnmarshalJSON(raw []byte) error {
	return unmarshalList(raw, spillPageCodec, (*[]spillPage)(l))
}

func (l landGroupList) MarshalJSON() ([]byte, error) {
	return marshalList([]landGroup(l), landGroupCodec)
}

func (l *landGroupList) UnmarshalJSON(raw []byte) error {
	return unmarshalList(raw, landGroupCodec, (*[]landGroup)(l))
}

// listsCompactly reports whether d lists a record its history moved out
// (format 10).
func (d *document) listsCompactly() bool { return d.hasSpilledChunks() || d.landedOut() }

// The parked chunk listings (waits.go) are the biggest list a long
// backlog leaves in its document: some 145 bytes a listing as objects,
// 1.5 KB of every document written behind 1,000 waiting events, which a
// conversation that never parked does not carry. Written as numbers, ten
// a listing (waitRefStride), with each listing's times as differences
// (its first key's contextAt from the previous listing's, its other times
// from its own contextAt), they take about half. A list whose listings
// carry id hashes (documents of a store that does not check
// Write.Absent), or whose differences do not fit, keeps the object form.
// Documents that list parked chunks as numbers are format 12.

// waitRefStride is how many numbers a parked chunk listing is: n, count,
// contextAt (from the previous listing's), receivedAt, drop and recv (from
// its own contextAt), embedded, page, marked, level.
const waitRefStride = 10

// waitChunkList is the document's list of parked chunk listings.
type waitChunkList []waitChunkRef

// flatWaits is l's numbers, and false when l needs the object form.
func flatWaits(l waitChunkList) ([]int64, bool) {
	out := make([]int64, 0, len(l)*waitRefStride)
	var prev int64
	for _, c := range l {
		if c.Entries != "" || c.Runs != "" {
			return nil, false
		}
		at := c.First.ContextAt
		d1, ok1 := diff(at, prev)
		d2, ok2 := diff(c.First.ReceivedAt, at)
		d3, ok3 := diff(c.Drop, at)
		d4, ok4 := diff(c.Recv, at)
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return nil, false
		}
		marked := int64(0)
		if c.Marked {
			marked = 1
		}
		out = append(out, int64(c.N), int64(c.Count), d1, d2, d3, d4, int64(c.Embedded), int64(c.Page), marked, int64(c.Level))
		prev = at
	}
	return out, true
}

// diff is a-b, and false when it overflows.
func diff(a, b int64) (int64, bool) {
	d := a - b
	return d, (d < a) == (b > 0)
}

func (l waitChunkList) MarshalJSON() ([]byte, error) {
	v, ok := flatWaits(l)
	if !ok {
		return marshalRecord([]waitChunkRef(l))
	}
	return numbersJSON(v), nil
}

// numbersJSON is v as a JSON array.
func numbersJSON(v []int64) []byte {
	out := make([]byte, 0, 2+len(v)*12)
	out = append(out, '[')
	for i, n := range v {
		if i > 0 {
			out = append(out, ',')
		}
		out = strconv.AppendInt(out, n, 10)
	}
	return append(out, ']')
}

func (l *waitChunkList) UnmarshalJSON(raw []byte) error {
	if isObjectList(raw) {
		return unmarshalRecord(raw, (*[]waitChunkRef)(l))
	}
	v, err := readFlat(raw, "parked chunk", waitRefStride)
	if err != nil {
		return err
	}
	out := make(waitChunkList, 0, len(v)/waitRefStride)
	var prev int64
	for ; len(v) > 0; v = v[waitRefStride:] {
		at := prev + v[2]
		out = append(out, waitChunkRef{N: uint64(v[0]), Count: int(v[1]),
			First: waitKey{ContextAt: at, ReceivedAt: at + v[3]}, Drop: at + v[4], Recv: at + v[5],
			Embedded: int(v[6]), Page: int(v[7]), Marked: v[8] != 0, Level: int(v[9])})
		prev = at
	}
	*l = out
	return nil
}

// waitsFlat reports whether d may list its parked chunks as numbers: none
// carries hashes. (A list whose differences overflow keeps the object
// form, which a format 12 reader reads too.)
func (d *document) waitsFlat() bool {
	return len(d.Waits) > 0 && !slices.ContainsFunc(d.Waits, func(c waitChunkRef) bool { return c.Entries != "" || c.Runs != "" })
}
