package tool_test

import (
	"context"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	"github.com/replyonce/gateway/ledger/tool"
	"github.com/replyonce/gateway/stores/memory"
)

// The loop breaker's real refusal, from a ledger with a cap, in process
// and over the ledger API: the model is told rate_limited, the loop must
// stop and a person must look, and the effect does not run.
func TestRateLimitedFromARealCap(t *testing.T) {
	caps := map[string]ledger.Cap{"reply": {Max: 3, Window: 5 * time.Minute}}
	inproc := ledger.New(memory.New(nil), ledger.Options{Caps: caps})
	srv := httptest.NewServer(ledgerapi.NewHandler(ledger.New(memory.New(nil), ledger.Options{Caps: caps}), "tok", nil))
	defer srv.Close()
	client, err := ledgerapi.NewClient(srv.URL, "tok", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	backends := map[string]ledgerapi.Ledger{"in-process": ledgerapi.InProcess(inproc), "ledger-api": ledgerapi.Remote(client)}
	for name, l := range backends {
		t.Run(name, func(t *testing.T) {
			var sent atomic.Int32
			reply := replyTool(t, &sent, nil)
			var got []tool.Outcome
			for _, to := range []string{"m1", "m2", "m3", "m4"} {
				run, err := l.Begin(context.Background(), "thread", ledger.RunOptions{RunID: to})
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, call(t, reply, run, `{"to":"`+to+`","text":"hi"}`))
			}
			for i, o := range got[:3] {
				if o.Status != tool.StatusExecuted {
					t.Fatalf("reply %d: %s, want executed", i+1, o.Status)
				}
			}
			last := got[3]
			if last.Status != tool.StatusRateLimited || flagsOf(last) != (flags{isError: true, terminal: true, escalate: true}) {
				t.Fatalf("reply past the cap: %s %+v, want rate_limited, an error, terminal, escalated", last.Status, flagsOf(last))
			}
			if sent.Load() != 3 {
				t.Fatalf("%d replies sent, want 3", sent.Load())
			}
		})
	}
}
