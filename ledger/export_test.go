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
