package ledger

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

// SpillListings decodes the listings of the document raw: its chunks and
// its pages.
func SpillListings(raw []byte) (chunks, pages []SpillListing, err error) {
	var d document
	if err := unmarshalDocument(raw, &d); err != nil {
		return nil, nil, err
	}
	for _, c := range d.Spilled {
		chunks = append(chunks, SpillListing{N: c.N, Runs: c.Runs})
	}
	for _, p := range d.SpillPages {
		pages = append(pages, SpillListing{N: p.N, Level: p.Level, Runs: p.Runs})
	}
	return chunks, pages, nil
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
