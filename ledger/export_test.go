package ledger

import (
	"context"
	"fmt"
)

// ReplayCacheLen reports how many committed entries l remembers.
func ReplayCacheLen(l *Ledger) int { return l.replays.len() }

// KeepWaitingInDocument makes l leave waiting events and runs in their
// documents, as a ledger did before it parked them (waits.go) and spilled
// runs (spillruns.go).
func KeepWaitingInDocument(l *Ledger) { l.noPark = true }

// JSONStringLen is jsonStringLen, for its test against encoding/json.
var JSONStringLen = jsonStringLen

// The sizes of parked chunks and of their pages (waits.go).
const (
	WaitChunk = waitChunk
	WaitPage  = waitPage
	WaitHead  = waitHead
)

// SpillListing is what a test reads of a document's listing of a spilled
// chunk or page, whichever form the listing has (listings.go).
type SpillListing struct {
	N           uint64
	Level, Runs int
}

// Listings is what a test reads of a scope's listings: the document's
// format, the chunks and pages of spilled entries, how many landing chunks
// and pages are listed, and the listings record the document names, if
// any (listsout.go), whose listings are read with the document's.
type Listings struct {
	Format                int
	Chunks, Pages         []SpillListing
	LandChunks, LandPages int
	Record                string
}

// ReadListings reads the listings of scope's document in st.
func ReadListings(ctx context.Context, st Store, scope string) (Listings, error) {
	raw, err := st.Read(ctx, scope)
	if err != nil {
		return Listings{}, err
	}
	var d document
	if err := unmarshalDocument(raw, &d); err != nil {
		return Listings{}, err
	}
	out := Listings{Format: d.Format}
	if d.Lists != nil {
		out.Record = d.Lists.name()
		b, err := st.ReadBlob(ctx, scope, out.Record)
		if err != nil {
			return Listings{}, err
		}
		rec, ok := decodeLists(d.Lists, b)
		if !ok {
			return Listings{}, fmt.Errorf("listings record %s does not match the document", out.Record)
		}
		d.putListsBack(rec)
	}
	for _, c := range d.Spilled {
		out.Chunks = append(out.Chunks, SpillListing{N: c.N, Runs: c.Runs})
	}
	for _, p := range d.SpillPages {
		out.Pages = append(out.Pages, SpillListing{N: p.N, Level: p.Level, Runs: p.Runs})
	}
	out.LandChunks, out.LandPages = len(d.LandChunks), len(d.LandPages)
	return out, nil
}

// SpillPageRecord decodes the record of a page of pages: the pages it
// lists.
func SpillPageRecord(raw []byte) ([]SpillListing, error) {
	var pages []spillPage
	if err := unmarshalRecord(raw, &pages); err != nil {
		return nil, err
	}
	out := make([]SpillListing, 0, len(pages))
	for _, p := range pages {
		out = append(out, SpillListing{N: p.N, Level: p.Level, Runs: p.Runs})
	}
	return out, nil
}

// RememberListings makes l remember b as scope's listings record name, as
// if it had written or read it (listsout.go).
func RememberListings(l *Ledger, scope, name string, b []byte) { l.lists.put(scope, name, b) }

// WaitListing is what a test reads of a document's listing of parked
// chunks, in either form (listings.go).
type WaitListing struct {
	N             uint64
	Count, Page   int
	Entries, Runs string
	Marked        bool
	Level         int
}

// WaitListings decodes the parked chunk listings of the document raw.
func WaitListings(raw []byte) ([]WaitListing, error) {
	var d document
	if err := unmarshalDocument(raw, &d); err != nil {
		return nil, err
	}
	out := make([]WaitListing, 0, len(d.Waits))
	for _, c := range d.Waits {
		out = append(out, WaitListing{N: c.N, Count: c.Count, Page: c.Page, Entries: c.Entries, Runs: c.Runs, Marked: c.Marked, Level: c.Level})
	}
	return out, nil
}
