package storetest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// longRuns is how many deliveries, each under a run of its own, the
// long-runs case makes on one scope: enough that most runs leave the
// document (issue #34), whatever the ledger's threshold, as long as it
// keeps fewer.
const longRuns = 120

// longRunID is a run id of 40,000 bytes, past bolt's largest key.
var longRunID = "agent:" + strings.Repeat("x", 40000)

// testLongScopeRuns: the runs of a conversation's finished deliveries
// leave its document, and every step that names one still finds it, from
// several processes at once: an expired content hold finds its event's
// run, a run ended by hand is refused to Begin and
// to a replayed take, a cancelled one to a claim, a live one takes claims
// and heartbeats under its token and refuses another, a replayed event is
// delivered again under its own run, the conversation lists every run,
// and once retention passes the runs' records go and their ids may begin
// afresh.
func testLongScopeRuns(t *testing.T, newStore NewStore) {
	e := setup(t, newStore, ledger.Options{Retention: 24 * time.Hour})
	const scope = "long-runs"
	taken := map[string]ledger.Taken{}
	var entry = map[string]string{}
	for i := range longRuns {
		ev := fmt.Sprintf("ev-%03d", i)
		q := enqueue(t, e, scope, ev, false)
		entry[ev] = q.Item.EntryID
		tk := must(e.l.Queue().TakeDelivery(e.ctx, scope, q.Item.EntryID, testLease))
		if !tk.OK {
			t.Fatalf("take %s: %+v", ev, tk)
		}
		taken[ev] = tk
		if i == 6 {
			// Its content is held for it, and the gateway stops
			// before it confirms the hold (see "Content claims").
			h := must(e.l.ClaimContent(e.ctx, ledger.ContentClaim{Source: "src", Digest: "long-runs", EventID: ev,
				RunID: "src:" + ev, Scope: scope, Lease: testLease}))
			if h.Status != ledger.ContentHeld {
				t.Fatalf("content hold: %s", h.Status)
			}
		}
		if i == 0 {
			noErr(t, e.l.End(e.ctx, scope, "src:"+ev, "done by hand"))
		}
		if i == 1 {
			// An agent's own run under an id longer than any store
			// key may be, ended: it leaves with the others.
			run := must(e.l.Begin(e.ctx, scope, ledger.RunOptions{RunID: longRunID, Mode: ledger.ModeIndependent}))
			noErr(t, run.End(e.ctx, "done"))
		}
		must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: tk, Status: ledger.DeliveryDelivered}))
		e.clock.Advance(time.Second)
	}
	var doc struct {
		Runs map[string]json.RawMessage `json:"runs"`
	}
	if err := json.Unmarshal(must(e.store.Read(e.ctx, scope)), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Runs) > longRuns/3 || doc.Runs["src:ev-000"] != nil || doc.Runs["src:ev-001"] != nil || doc.Runs[longRunID] != nil {
		t.Fatalf("the document still holds %d of %d runs, the oldest among them", len(doc.Runs), longRuns)
	}
	if must(e.store.ReadBlob(e.ctx, scope, runRecord("src:ev-010"))) == nil {
		t.Fatal("a run that left the document has no record")
	}
	if run := must(e.l.Begin(e.ctx, scope, ledger.RunOptions{RunID: longRunID})); run.CanWrite || run.Reason != ledger.ReasonRunEnded {
		t.Fatalf("the ended run of a long id begins again: may write %v, %s", run.CanWrite, run.Reason)
	}

	// The same content under another id, long after the hold ran out:
	// the first event's run is found, though it left the document.
	if h := must(e.l.ClaimContent(e.ctx, ledger.ContentClaim{Source: "src", Digest: "long-runs", EventID: "copy",
		RunID: "src:copy", Scope: scope, Lease: testLease})); h.Status != ledger.ContentReplay || h.By != "ev-006" {
		t.Fatalf("content of a recorded event whose run left the document: %s by %q", h.Status, h.By)
	}

	// Several processes at once, each on its own ledger.
	procs := make([]*ledger.Ledger, 6)
	for i := range procs {
		procs[i] = ledger.New(e.store, ledger.Options{Clock: e.clock.Now, ReplayCache: -1, Retention: 24 * time.Hour})
	}
	noErr(t, e.l.Cancel(e.ctx, scope, "src:ev-003"))
	live := taken["ev-001"].Run
	var wg sync.WaitGroup
	errs := make(chan error, 4*len(procs))
	for p, l := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			run, err := l.Begin(e.ctx, scope, ledger.RunOptions{RunID: "src:ev-000", Mode: ledger.ModeIndependent})
			if err != nil || run.CanWrite || run.Reason != ledger.ReasonRunEnded {
				errs <- fmt.Errorf("begin of the ended run: %v", err)
				if run != nil {
					errs <- fmt.Errorf("begin of the ended run: may write %v, %s", run.CanWrite, run.Reason)
				}
			}
			c, err := l.Claim(e.ctx, ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "reply", Payload: p},
				RunID: live.ID, Token: live.Token, Conflict: ledger.ConflictNone})
			if err != nil || !c.Acquired() {
				errs <- fmt.Errorf("claim under the live run's token: %s %s %v", c.Status, c.Reason, err)
			}
			c, err = l.Claim(e.ctx, ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "reply", Payload: -1 - p},
				RunID: "src:ev-003", Token: taken["ev-003"].Run.Token, Conflict: ledger.ConflictNone})
			if err != nil || c.Status != ledger.StatusRefused || c.Reason != ledger.ReasonRunCancelled {
				errs <- fmt.Errorf("claim under the cancelled run: %s %s %v", c.Status, c.Reason, err)
			}
			alive, err := l.Heartbeat(e.ctx, scope, "src:ev-002", taken["ev-002"].Run.Token)
			if err != nil || !alive {
				errs <- fmt.Errorf("heartbeat of a live run: %v %v", alive, err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	stale := must(e.l.Claim(e.ctx, ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "reply", Payload: "stale"},
		RunID: "src:ev-004", Token: taken["ev-004"].Run.Token - 1, Conflict: ledger.ConflictNone}))
	wantStatus(t, "claim under a spilled run with another token", stale.Result, ledger.StatusRefused, ledger.ReasonSuperseded)

	// A replayed event is taken again under its own run: the same run's
	// next delivery, and none for the run ended by hand.
	must(e.l.Queue().ReplayDelivery(e.ctx, scope, entry["ev-005"]))
	again := must(e.l.Queue().TakeDelivery(e.ctx, scope, entry["ev-005"], testLease))
	if !again.OK || again.Run == nil || again.Run.ID != "src:ev-005" || again.Run.Delivery != 2 || again.Run.Token <= taken["ev-005"].Run.Token {
		t.Fatalf("replayed take: taken %v, run %+v", again.OK, again.Run)
	}
	must(e.l.Queue().FinishDelivery(e.ctx, ledger.Finish{Taken: again, Status: ledger.DeliveryDelivered}))
	must(e.l.Queue().ReplayDelivery(e.ctx, scope, entry["ev-000"]))
	if tk := must(e.l.Queue().TakeDelivery(e.ctx, scope, entry["ev-000"], testLease)); tk.OK {
		t.Fatalf("the replayed event of a run ended by hand was taken, run %+v", tk.Run)
	}
	if q := must(e.l.Queue().FindDelivery(e.ctx, scope, "src", "ev-000")); q.Status != ledger.DeliveryDead {
		t.Fatalf("the replayed event of a run ended by hand is %s, want dead", q.Status)
	}

	conv := must(e.l.Views().Conversation(e.ctx, scope))
	fenced := map[string]ledger.Reason{}
	for _, r := range conv.Runs {
		fenced[r.ID] = r.Fenced
	}
	if len(conv.Runs) != longRuns+1 || fenced[longRunID] != ledger.ReasonRunEnded || fenced["src:ev-000"] != ledger.ReasonRunEnded || fenced["src:ev-003"] != ledger.ReasonRunCancelled ||
		fenced["src:ev-010"] != "" {
		t.Fatalf("the conversation lists %d runs, want %d: ended %q, cancelled %q", len(conv.Runs), longRuns+1, fenced["src:ev-000"], fenced["src:ev-003"])
	}
	// The pages list every run their entries and deliveries name, as the
	// whole conversation does: every delivery's.
	_, pagedRuns, named, _ := conversationPages(t, e, scope, 5)
	if len(named) < longRuns {
		t.Fatalf("the conversation's pages name %d runs, want the %d deliveries' at least", len(named), longRuns)
	}
	for id := range named {
		if r, ok := pagedRuns[id]; !ok || r.Fenced != fenced[id] {
			t.Fatalf("the conversation's pages list run %.60s: %v, fenced %q; want fenced %q", id, ok, r.Fenced, fenced[id])
		}
	}

	// Retention passes while later events keep the conversation alive:
	// a write retires the records, and the ended run's id is free again,
	// as a run pruned from the document is.
	for i := range 5 {
		e.clock.Advance(6 * time.Hour)
		enqueue(t, e, scope, fmt.Sprint("late-", i), false)
	}
	for _, id := range []string{"src:ev-010", "src:ev-050"} {
		if b := must(e.store.ReadBlob(e.ctx, scope, runRecord(id))); b != nil {
			t.Fatalf("run %s is still kept past retention: %s", id, b)
		}
	}
	run := must(e.l.Begin(e.ctx, scope, ledger.RunOptions{RunID: "src:ev-000", Mode: ledger.ModeIndependent}))
	if !run.CanWrite || run.Delivery != 1 {
		t.Fatalf("a run id past retention begins afresh: %+v", run)
	}
	old := 0
	for _, r := range must(e.l.Views().Conversation(e.ctx, scope)).Runs {
		if strings.HasPrefix(r.ID, "src:ev-") {
			old++
		}
	}
	if old != 1 {
		t.Fatalf("past retention the conversation lists %d runs of the first deliveries, want 1 (the one begun again)", old)
	}
}

// runRecord is the name of a spilled run's record (ledger/spillruns.go).
func runRecord(id string) string {
	h := sha256.Sum256([]byte(id))
	return "r:" + hex.EncodeToString(h[:16])
}
