package ledger

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// refLandings is the landing list kept whole, as every build before issue
// #34 kept it: the answers moved-out landings must reproduce.
type refLandings struct {
	base     uint64
	landings []landing
}

func (r *refLandings) seqAt(t time.Time) uint64 {
	s := r.base
	for _, l := range r.landings {
		if l.At.After(t) {
			break
		}
		s = l.Seq
	}
	return s
}

func (r *refLandings) prune(cutoff time.Time) {
	n := 0
	for n < len(r.landings) && r.landings[n].At.Before(cutoff) {
		r.base = r.landings[n].Seq
		n++
	}
	r.landings = r.landings[n:]
}

// TestMovedLandingsMapContextsAsAWholeList grows a scope by thousands of
// writes stamped by instances whose clocks disagree by seconds, prunes it
// by their retention cutoffs, moves landings out as a write does, stores
// and reloads the document each time, and asks seqAt for contexts old and
// new: every answer must be the whole list's, reading only records the
// document lists, and the records left must be exactly those it lists.
func TestMovedLandingsMapContextsAsAWholeList(t *testing.T) {
	// Fifteen seconds' retention, one write every 200 ms on average,
	// keeps about 75 landings (150 with the skew below): chunks come and
	// go with no page; at 100 ms a write, three minutes keep about
	// 1,800: pages come and go; forty minutes of 40,000 writes keep
	// about 24,000: pages of pages come and go.
	for seed := uint64(1); seed <= 8; seed++ {
		retention, gap := 15*time.Second, 400
		if seed%2 == 1 {
			gap = 200
			retention = 3 * time.Minute
		}
		wantPages := seed%2 == 1
		writes, wantLevels := 3000, seed > 6
		if wantLevels {
			retention, writes, wantPages = 40*time.Minute, 40_000, true
		}
		rng := rand.New(rand.NewPCG(seed, 34))
		start := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
		now := start
		// Instances take turns in runs of writes; one's clock is 20 s
		// behind, so whole records can be older than landings before them.
		behind := false
		skew := func() time.Duration {
			d := time.Duration(rng.IntN(10_000)-5_000) * time.Millisecond
			if behind {
				d -= 20 * time.Second
			}
			return d
		}
		d := newDocument("s", start)
		var ref refLandings
		records := map[string][]byte{}
		apply := func(b *blobSet) {
			for name, v := range b.m {
				if v == nil {
					delete(records, name)
				} else {
					records[name] = v
				}
			}
		}
		moved, read, paged, leveled, pruned := 0, 0, 0, 0, 0
		for w := range writes {
			now = now.Add(time.Duration(rng.IntN(gap)) * time.Millisecond)
			if rng.IntN(60) == 0 {
				behind = !behind
			}
			at := now.Add(skew())
			d.Seq++
			d.Landings = append(d.Landings, landing{Seq: d.Seq, At: at})
			ref.landings = append(ref.landings, landing{Seq: d.Seq, At: at})

			var blobs blobSet
			cutoff := now.Add(skew()).Add(-retention)
			d.pruneLandings(cutoff, &blobs)
			ref.prune(cutoff)
			if err := d.moveLandings(&blobs); err != nil {
				t.Fatal(err)
			}
			apply(&blobs)
			if d.landedOut() {
				moved++
			}
			if len(d.LandPages) > 0 {
				paged++
			}
			if d.landPagesOfPages() {
				leveled++
			}
			for name, v := range blobs.m {
				if v == nil && strings.HasPrefix(name, "l") {
					pruned++
				}
			}
			raw, err := marshalDocument(d)
			if err != nil {
				t.Fatal(err)
			}
			if d, err = decodeDocument("s", raw, now); err != nil {
				t.Fatal(err)
			}

			if w%7 != 0 || (wantLevels && w%70 != 0) {
				continue
			}
			for range 5 {
				// Contexts from before the scope began to just after now.
				q := start.Add(-10 * time.Second).Add(time.Duration(rng.Int64N(int64(now.Sub(start) + 20*time.Second))))
				lands := &landLoads{}
				var got uint64
				for try := 0; ; try++ {
					lands.need = ""
					got = d.seqAt(q, lands)
					if lands.need == "" {
						break
					}
					b, ok := records[lands.need]
					if !ok || try > 2 {
						t.Fatalf("seed %d write %d: seqAt needs %s, which the store does not hold (try %d)", seed, w, lands.need, try)
					}
					if err := lands.load("s", lands.need, b); err != nil {
						t.Fatal(err)
					}
					read++
				}
				if want := ref.seqAt(q); got != want {
					t.Fatalf("seed %d write %d: seqAt(%s) = %d; the whole list says %d", seed, w, q.Sub(start), got, want)
				}
			}
		}
		if moved == 0 || read == 0 || (paged == 0) == wantPages || (leveled == 0) == wantLevels || pruned == 0 {
			t.Fatalf("seed %d: moved out after %d writes, paged after %d, pages of pages after %d, %d records read, %d pruned: the test misses a path",
				seed, moved, paged, leveled, read, pruned)
		}
		listed := map[string]bool{}
		var list func(p landGroup)
		list = func(p landGroup) {
			listed[p.pageBlob()] = true
			if p.Level > 0 {
				for _, q := range p.under() {
					list(q)
				}
				return
			}
			for i := range p.Count {
				listed[landBlob(p.N+uint64(i))] = true
			}
		}
		for _, p := range d.LandPages {
			list(p)
		}
		for _, c := range d.LandChunks {
			listed[landBlob(c.N)] = true
		}
		for name := range records {
			if !listed[name] {
				t.Errorf("seed %d: record %s is left behind", seed, name)
			}
		}
		for name := range listed {
			if records[name] == nil {
				t.Errorf("seed %d: record %s is listed but missing", seed, name)
			}
		}
		if len(d.Landings) >= 2*landTail || len(d.LandChunks) > landPage {
			t.Errorf("seed %d: the document keeps %d landings and lists %d chunks", seed, len(d.Landings), len(d.LandChunks))
		}
		if wantLevels && d.landPagesOfPages() {
			// Written, so many listings move into a record of
			// their own (a copy: finish takes them out of d).
			cp := *d
			var out blobSet
			w, err := cp.finish(now, retention, &out)
			if err != nil || !strings.Contains(string(w.Doc), `"format":11`) || cp.Lists == nil || out.m[cp.Lists.name()] == nil {
				t.Fatalf("seed %d: a document listing landing pages of pages: %.100s, %v; want format 11 and its listings record", seed, w.Doc, err)
			}
		}
		perLevel := map[int]int{}
		for _, p := range d.LandPages {
			perLevel[p.Level]++
		}
		for level, n := range perLevel {
			if n > landPage {
				t.Errorf("seed %d: the document lists %d landing pages of level %d", seed, n, level)
			}
		}
	}
}

// TestMovedLandingsDocumentIsFormat10: an older build must refuse a
// document whose landings it would not find (format 3 and later) or whose
// listings it would not read (format 10); one that moved none stays
// format 1.
func TestMovedLandingsDocumentIsFormat10(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	d := newDocument("s", now)
	for range 2 * landTail {
		d.Seq++
		d.Landings = append(d.Landings, landing{Seq: d.Seq, At: now})
	}
	var blobs blobSet
	w, err := d.finish(now, time.Hour, &blobs)
	if err != nil || !strings.Contains(string(w.Doc), `"format":1`) {
		t.Fatalf("before moving: %s, %v; want format 1", w.Doc, err)
	}
	if err := d.moveLandings(&blobs); err != nil {
		t.Fatal(err)
	}
	if w, err = d.finish(now, time.Hour, &blobs); err != nil || !strings.Contains(string(w.Doc), `"format":10`) || w.Blobs[landBlob(1)] == nil {
		t.Fatalf("after moving: %s, %v; want format 10 and chunk l:1 written", w.Doc, err)
	}
}
