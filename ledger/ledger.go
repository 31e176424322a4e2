package ledger

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode"
)

// Ledger is the API over a Store. It is safe for concurrent use. All its
// state lives in the store, but for bounded memories of entries it saw
// committed (see Options.ReplayCache), which only ever answers "replayed",
// of the spill counters it saw (a hint of what to read first), and of the
// listings records it wrote or read, each checked against the document
// that names it before use (listsout.go).
type Ledger struct {
	store   Store
	opts    Options
	replays *replayCache
	spills  *spillCounters
	lists   *rememberedLists
	// noPark keeps waiting events and runs in the document (waits.go,
	// spillruns.go), for the tests that compare both layouts.
	noPark bool
}

// New returns a ledger over store. Zero options take the defaults.
func New(store Store, opts Options) *Ledger {
	opts = opts.withDefaults()
	return &Ledger{store: store, opts: opts, replays: newReplayCache(opts.ReplayCache, opts.Retention),
		spills: newSpillCounters(), lists: newRememberedLists()}
}

// replayed answers a claim for an entry this process saw committed, without
// the store, when it remembers one.
func (l *Ledger) replayed(in claimInput) (Claim, bool) {
	e, ok := l.replays.get(in.key.scope, in.key.id, l.now())
	if !ok {
		return Claim{}, false
	}
	return claimFrom(in.key.scope, decision{result: Result{Status: StatusReplayed, Value: e.Value, Entry: e}}), true
}

// rememberReplay keeps the entry of a claim the store answered "replayed",
// under the key's id: an entry stored under its format 1 id is then found
// by the next claim's lookup too. rerun is what the document said of the
// entry (document.rerunnable): such an entry is not kept.
func (l *Ledger) rememberReplay(k resolvedKey, dec decision, rerun bool) {
	if dec.result.Status == StatusReplayed && !rerun {
		l.replays.remember(k.scope, k.id, dec.result.Entry, l.now())
	}
}

// Options returns the options in force, defaults filled in.
func (l *Ledger) Options() Options { return l.opts }

func (l *Ledger) now() time.Time { return l.opts.Clock() }

func (l *Ledger) observe(ev Event) {
	if l.opts.Observe != nil {
		l.opts.Observe(ev)
	}
}

// transact runs decide on the scope's document and writes it back when
// decide says it changed.
func (l *Ledger) transact(ctx context.Context, scope string, decide func(d *document, now time.Time) (bool, error)) error {
	return l.transactBlobs(ctx, scope, func(d *document, now time.Time, _ *blobSet) (bool, error) { return decide(d, now) })
}

// transactBlobs is transact for decisions that also write blobs beside the
// document; whatever retention drops, blobs included, is deleted with it.
func (l *Ledger) transactBlobs(ctx context.Context, scope string, decide func(d *document, now time.Time, blobs *blobSet) (bool, error)) error {
	return l.transactFind(ctx, scope, lookup{}, func(d *document, now time.Time, blobs *blobSet, _ *spillView) (bool, error) {
		return decide(d, now, blobs)
	})
}

// transactEntry is transact for a decision about one entry, which may have
// been spilled out of the document: ids are the entry's ids (see lookup).
func (l *Ledger) transactEntry(ctx context.Context, scope string, lk lookup, decide func(d *document, now time.Time, blobs *blobSet) (bool, error)) error {
	return l.transactFind(ctx, scope, lk, func(d *document, now time.Time, blobs *blobSet, _ *spillView) (bool, error) {
		return decide(d, now, blobs)
	})
}

func (l *Ledger) read(ctx context.Context, scope string) (*document, error) {
	if scope == "" {
		return nil, fmt.Errorf("%w: scope is empty", ErrInvalid)
	}
	raw, err := l.store.Read(ctx, scope)
	if err != nil {
		return nil, err
	}
	return decodeDocument(scope, raw, l.now())
}

// ClaimRequest is the first phase of an effect: ask for the right to
// perform it.
type ClaimRequest struct {
	Key Key
	// RunID and Token fence the claim on a run; leave both empty for an
	// effect that belongs to no run.
	RunID string
	Token uint64
	// Summary is shown to other runs that conflict with this write.
	Summary  string
	Conflict ConflictMode // default any
	// Ack says the caller has re-read the scope: the writes that would
	// conflict now are acknowledged and the claim goes on.
	Ack bool
	// PendingTTL overrides the ledger's pending TTL for this claim.
	PendingTTL time.Duration
	// Redeliverable says that if this attempt is abandoned, a new attempt
	// may start instead of the entry turning ambiguous.
	Redeliverable bool
	// MaxAttempts overrides the ledger's limit for this key.
	MaxAttempts int
}

// Claim is a granted (or refused) first phase.
type Claim struct {
	Result
	Scope          string
	EntryID        string
	Attempt        int
	IdempotencyKey string
	FencingToken   uint64
	Deadline       time.Time
}

// Acquired reports whether the caller now owns the attempt.
func (c Claim) Acquired() bool { return c.Status == StatusClaimed }

func (l *Ledger) claimInput(req ClaimRequest) (claimInput, error) {
	k, err := resolveKey(req.Key)
	if err != nil {
		return claimInput{}, err
	}
	conflict := req.Conflict
	switch conflict {
	case "":
		conflict = ConflictAny
	case ConflictAny, ConflictSameIntent, ConflictNone:
	default:
		return claimInput{}, fmt.Errorf("%w: conflict mode %q (want any, same-intent or none)", ErrInvalid, conflict)
	}
	if req.PendingTTL < 0 || req.MaxAttempts < 0 {
		return claimInput{}, fmt.Errorf("%w: pending TTL and max attempts must not be negative", ErrInvalid)
	}
	return claimInput{
		key: k, runID: req.RunID, token: req.Token, summary: req.Summary, conflict: conflict, ack: req.Ack,
		pendingTTL: req.PendingTTL, redeliverable: req.Redeliverable, maxAttempts: req.MaxAttempts,
	}, nil
}

func claimFrom(scope string, dec decision) Claim {
	// The entry belongs to a document decoded for this call alone and
	// dropped after it, so the claim may keep it without a copy.
	c := Claim{Result: dec.result, Scope: scope}
	if e := dec.result.Entry; e != nil {
		c.EntryID = e.ID
		c.Attempt = e.Attempt
		c.IdempotencyKey = e.IdempotencyKey()
		c.FencingToken = e.Token
		c.Deadline = e.Deadline()
	}
	return c
}

// Claim asks for the right to perform an effect. Unless the result is
// StatusClaimed the caller must not perform it; when it is, the caller must
// Settle the claim.
func (l *Ledger) Claim(ctx context.Context, req ClaimRequest) (Claim, error) {
	in, err := l.claimInput(req)
	if err != nil {
		return Claim{}, err
	}
	if c, ok := l.replayed(in); ok {
		l.observe(Event{Type: eventType(c.Result), Scope: c.Scope, EntryID: c.EntryID, Intent: in.key.intent, RunID: req.RunID})
		return c, nil
	}
	var dec decision
	var rerun bool
	lk := lookupFor(in.key)
	lk.waits = true
	if in.runID != "" {
		lk.runs = []string{in.runID}
	}
	lk.replayed = replayedFrom(l.opts.Retention, &dec, &rerun)
	err = l.transactFind(ctx, in.key.scope, lk, func(d *document, now time.Time, _ *blobSet, v *spillView) (bool, error) {
		if d.parkedEntry(lk.ids...) || d.parkedRun(in.runID) {
			return false, errNeedAllWaits
		}
		in := in
		in.key.id = in.key.idIn(d)
		rerun = d.rerunnable(in.key.id)
		if r := d.Runs[in.runID]; r != nil && in.conflict != ConflictNone && !v.chunks && d.spilledAfter(r.SeenSeq) {
			// The run's context predates writes that left the
			// document: the conflict check reads them.
			return false, &errNeedChunks{counter: d.Spill}
		}
		var derr error
		dec, derr = decideClaim(d, in, now, l.opts)
		return dec.changed, derr
	})
	if err != nil {
		return Claim{}, err
	}
	l.rememberReplay(in.key, dec, rerun)
	c := claimFrom(in.key.scope, dec)
	l.observe(Event{Type: eventType(c.Result), Scope: c.Scope, EntryID: c.EntryID, Intent: in.key.intent, RunID: req.RunID, Reason: c.Reason})
	if dec.escalated {
		l.observe(Event{Type: "escalation", Scope: c.Scope, EntryID: dec.escalation.EntryID, Intent: in.key.intent,
			RunID: req.RunID, Reason: ReasonRateLimited, EscalationID: dec.escalation.ID})
	}
	return c, nil
}

func eventType(r Result) string {
	if r.Status == StatusRefused {
		return "refused"
	}
	return string(r.Status)
}

// ClaimRef names one attempt, for settling it from anywhere.
type ClaimRef struct {
	Scope   string
	EntryID string
	Attempt int
}

// Ref returns the reference to settle this claim with.
func (c Claim) Ref() ClaimRef {
	return ClaimRef{Scope: c.Scope, EntryID: c.EntryID, Attempt: c.Attempt}
}

// Settle records the outcome of a claimed attempt: OutcomeCommitted with
// the effect's value, OutcomeNotApplied (known not to have happened), or
// OutcomeUnknown (ambiguous). A settle for an attempt that was abandoned
// and replaced is flagged LateSettle and changes nothing; a committed
// settle after the attempt was resolved not_applied commits it, flagged
// LateSettle (see the package documentation).
func (l *Ledger) Settle(ctx context.Context, ref ClaimRef, outcome Outcome, value any, effectErr error) (Result, error) {
	if ref.Scope == "" || ref.EntryID == "" {
		return Result{}, fmt.Errorf("%w: a claim reference needs scope and entry id", ErrInvalid)
	}
	raw, errText, err := settleInput(outcome, value, effectErr)
	if err != nil {
		return Result{}, err
	}
	var res Result
	var rerun bool
	err = l.transactEntry(ctx, ref.Scope, lookup{ids: []string{ref.EntryID}, lazy: true, waits: true}, func(d *document, now time.Time, _ *blobSet) (bool, error) {
		if d.parkedEntry(ref.EntryID) {
			return false, errNeedAllWaits
		}
		var changed bool
		var derr error
		// d is decoded for this call alone: res may keep its entry.
		res, changed, derr = decideSettle(d, ref.EntryID, ref.Attempt, outcome, raw, errText, now)
		rerun = d.rerunnable(ref.EntryID)
		return changed, derr
	})
	if err != nil {
		return Result{}, err
	}
	return l.settled(ref, outcome, res, effectErr, rerun), nil
}

// settled follows a settle whose write landed (or whose document already
// said so): a committed entry may answer this process's later claims for it
// from memory, unless the document said it is rerunnable, and observers
// hear of the outcome.
func (l *Ledger) settled(ref ClaimRef, outcome Outcome, res Result, effectErr error, rerun bool) Result {
	if !rerun {
		l.replays.remember(ref.Scope, ref.EntryID, res.Entry, l.now())
	}
	res.Err = effectErr
	ev := Event{Type: string(outcome), Scope: ref.Scope, EntryID: ref.EntryID, LateSettle: res.LateSettle}
	if res.Entry != nil {
		ev.Intent, ev.RunID = res.Entry.Intent, res.Entry.RunID
	}
	if res.LateSettle {
		ev.Type = "late_settle"
	}
	l.observe(ev)
	return res
}

// settleInput checks a settle's outcome and turns its value and error into
// what the document keeps: the encoded value (committed outcomes only) and
// the error's text.
func settleInput(outcome Outcome, value any, effectErr error) (raw []byte, errText string, err error) {
	switch outcome {
	case OutcomeCommitted, OutcomeNotApplied, OutcomeUnknown:
	default:
		return nil, "", fmt.Errorf("%w: outcome %q (want committed, not_applied or unknown)", ErrInvalid, outcome)
	}
	if outcome == OutcomeCommitted {
		if raw, err = encodeValue(value); err != nil {
			return nil, "", err
		}
	}
	if effectErr != nil {
		errText = effectErr.Error()
	}
	return raw, errText, nil
}

func encodeValue(v any) ([]byte, error) {
	switch t := v.(type) {
	case nil:
		return []byte("null"), nil
	case json.RawMessage:
		if !json.Valid(t) {
			return nil, fmt.Errorf("%w: value is not valid JSON", ErrInvalid)
		}
		// Marshal copies the caller's buffer, which it may reuse, and
		// compacts it as the stored document does, so that a replay from
		// memory and one from the store say the same bytes.
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil, fmt.Errorf("%w: value is not JSON-encodable: %v", ErrInvalid, err)
	}
	return b, nil
}

// OnceOptions tune a single Once call.
type OnceOptions struct {
	Summary  string
	Conflict ConflictMode
	Ack      bool
	// Wait makes an in-flight result wait up to this long for the other
	// attempt to settle, then report what it came to.
	Wait          time.Duration
	PendingTTL    time.Duration
	Redeliverable bool
}

// Once performs effect at most once for key. Concurrent callers get
// in_flight; later callers get the stored value, replayed.
func (l *Ledger) Once(ctx context.Context, key Key, effect Effect, opts ...OnceOptions) (Result, error) {
	var o OnceOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	return l.once(ctx, ClaimRequest{Key: key, Summary: o.Summary, Conflict: o.Conflict, Ack: o.Ack,
		PendingTTL: o.PendingTTL, Redeliverable: o.Redeliverable}, o.Wait, effect)
}

func (l *Ledger) once(ctx context.Context, req ClaimRequest, wait time.Duration, effect Effect) (Result, error) {
	return RunEffect(ctx, l, req, effect, LoopOptions{Clock: l.opts.Clock, Classify: l.opts.Classify,
		Reconcile: l.opts.Reconcile, Wait: wait, WaitInterval: l.opts.WaitInterval})
}

// Reconciled records what a reconciler found about the ambiguous attempt
// ref names. It is fenced on the attempt: ErrNotAmbiguous when the entry
// has been settled or claimed again meanwhile.
func (l *Ledger) Reconciled(ctx context.Context, ref ClaimRef, outcome Outcome) (Entry, error) {
	if ref.Scope == "" || ref.EntryID == "" {
		return Entry{}, fmt.Errorf("%w: a claim reference needs scope and entry id", ErrInvalid)
	}
	var entry Entry
	err := l.transactEntry(ctx, ref.Scope, lookup{ids: []string{ref.EntryID}, lazy: true}, func(d *document, now time.Time, _ *blobSet) (bool, error) {
		e, derr := decideResolve(d, ref.EntryID, ref.Attempt, outcome, "reconciler", now)
		if derr != nil {
			return false, derr
		}
		entry = *e
		return true, nil
	})
	if err != nil {
		return Entry{}, err
	}
	l.observe(Event{Type: "reconciled", Scope: ref.Scope, EntryID: ref.EntryID, Intent: entry.Intent})
	return entry, nil
}

// CheckResult says whether an effect is done, without changing anything.
type CheckResult struct {
	Done   bool
	Status Status // replayed (done), in_flight, ambiguous, failed, or "" when never claimed
	Entry  *Entry
}

// Check reports whether key's effect has already happened.
func (l *Ledger) Check(ctx context.Context, key Key) (CheckResult, error) {
	k, err := resolveKey(key)
	if err != nil {
		return CheckResult{}, err
	}
	d, err := l.readFull(ctx, k.scope)
	if err != nil {
		return CheckResult{}, err
	}
	e := d.Entries[k.idIn(d)]
	if e == nil {
		if e, err = l.lookupSpilled(ctx, d, lookupFor(k).ids); err != nil || e == nil {
			return CheckResult{}, err
		}
	}
	cp := *e
	res := CheckResult{Entry: &cp}
	switch {
	case e.State == StateCommitted:
		res.Done, res.Status = true, StatusReplayed
	case e.State == StatePending && !l.now().Before(e.Deadline()) && !e.Redeliverable:
		res.Status = StatusAmbiguous
	default:
		res.Status = statusOf(e)
	}
	return res, nil
}

// History returns a scope's entries, oldest first.
func (vw Views) History(ctx context.Context, scope string) ([]Entry, error) {
	l := vw.l
	d, err := l.readWhole(ctx, scope)
	if err != nil {
		return nil, err
	}
	return d.history(), nil
}

// Resolution is what an operator found about an ambiguous entry, for
// Resolve. It names the entry one of two ways: by its effect (Scope,
// Intent and Payload, as the claim named it) or by Scope and EntryID, as
// Ambiguous lists it; never both. Its fields are those of the admin API's
// resolve request.
type Resolution struct {
	Scope   string
	EntryID string
	Intent  string
	Payload any
	// Outcome is OutcomeCommitted (it happened) or OutcomeNotApplied (it
	// did not; a later claim may try again).
	Outcome Outcome
	// Who, when set, names the operator resolving by EntryID (1 to 64
	// printable characters): the entry's ResolvedBy then reads "operator:"
	// followed by Who instead of "operator". SettledAt says when, either
	// way.
	Who string
}

// Resolve records what an operator found about an ambiguous entry, and
// returns the entry as it now is. An entry that is not ambiguous (nor
// pending past its TTL) is refused with ErrNotAmbiguous.
func (l *Ledger) Resolve(ctx context.Context, r Resolution) (Entry, error) {
	if r.EntryID == "" {
		if r.Who != "" {
			return Entry{}, fmt.Errorf("%w: who is for an operator resolving by entry id", ErrInvalid)
		}
		k, err := resolveKey(Key{Scope: r.Scope, Intent: r.Intent, Payload: r.Payload})
		if err != nil {
			return Entry{}, err
		}
		return l.resolveEntry(ctx, k.scope, lookupFor(k), k.idIn, r.Outcome, "operator")
	}
	if r.Intent != "" || r.Payload != nil {
		return Entry{}, fmt.Errorf("%w: name the entry by entry id or by intent and payload, not both", ErrInvalid)
	}
	if r.Scope == "" {
		return Entry{}, fmt.Errorf("%w: scope and entry id are required", ErrInvalid)
	}
	by := "operator"
	if r.Who != "" {
		if len(r.Who) > 64 || strings.IndexFunc(r.Who, func(c rune) bool { return !unicode.IsPrint(c) }) >= 0 {
			return Entry{}, fmt.Errorf("%w: who must be 1 to 64 printable characters", ErrInvalid)
		}
		by += ":" + r.Who
	}
	return l.resolveEntry(ctx, r.Scope, lookup{ids: []string{r.EntryID}, lazy: true}, func(*document) string { return r.EntryID }, r.Outcome, by)
}

// resolveEntry resolves the entry that idIn names in the scope's document.
// lk looks the entry up among those spilled out of it, so that a settled
// entry is refused as not ambiguous however old, not as unknown.
func (l *Ledger) resolveEntry(ctx context.Context, scope string, lk lookup, idIn func(*document) string, outcome Outcome, by string) (Entry, error) {
	if outcome != OutcomeCommitted && outcome != OutcomeNotApplied {
		return Entry{}, fmt.Errorf("%w: outcome must be %q or %q, got %q", ErrInvalid, OutcomeCommitted, OutcomeNotApplied, outcome)
	}
	var out Entry
	err := l.transactEntry(ctx, scope, lk, func(d *document, now time.Time, _ *blobSet) (bool, error) {
		e, derr := decideResolve(d, idIn(d), 0, outcome, by, now)
		if derr != nil {
			return false, derr
		}
		out = *e
		return true, nil
	})
	if err != nil {
		return Entry{}, err
	}
	l.observe(Event{Type: "resolved", Scope: scope, EntryID: out.ID, Intent: out.Intent})
	return out, nil
}

// Ambiguous lists entries whose outcome is unknown (including pending
// attempts past their TTL that will read as abandoned), up to limit scopes.
func (vw Views) Ambiguous(ctx context.Context, limit int) ([]Entry, error) {
	l := vw.l
	if limit <= 0 {
		limit = 100
	}
	now := l.now()
	scopes, err := l.store.ScopesToReview(ctx, now, limit)
	if err != nil {
		return nil, err
	}
	var out []Entry
	for _, s := range scopes {
		d, err := l.read(ctx, s)
		if err != nil {
			return nil, err
		}
		for _, e := range d.history() {
			abandoned := e.State == StatePending && !now.Before(e.Deadline()) && !e.Redeliverable
			if e.State == StateAmbiguous || abandoned {
				out = append(out, e)
			}
		}
	}
	return out, nil
}

func newRunID() string {
	var b [12]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails on supported platforms
	return "run_" + hex.EncodeToString(b[:])
}
