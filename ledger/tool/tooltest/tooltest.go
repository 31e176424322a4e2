package tooltest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	"github.com/replyonce/gateway/ledger/tool"
)

// Backend begins runs on one kind of ledger.
type Backend struct {
	Name string
	// Begin starts a fresh run on scope.
	Begin func(t *testing.T, scope string) tool.Run
	// Resume begins runID again as a new delivery, which fences the
	// earlier one.
	Resume func(t *testing.T, scope, runID string) tool.Run
	// Ref is a handle on a run begun elsewhere, as an agent builds one
	// from the gateway's Replyonce-* headers.
	Ref func(scope, runID string, token uint64) tool.Run
}

// RefOf returns the scope, id and fencing token of a run the Backends
// began, which is what the gateway forwards to an agent.
func RefOf(run tool.Run) (scope, runID string, token uint64) {
	switch r := run.(type) {
	case *ledger.Run:
		return r.Scope, r.ID, r.Token
	case *ledgerapi.Run:
		return r.Scope, r.ID, r.Token
	}
	panic(fmt.Sprintf("tooltest: RefOf(%T): not a run of the Backends", run))
}

// NewStore gives a fresh, empty store for one ledger. The caller chooses
// the adapter, so that this package, which the SDK adapters' modules
// import, depends on no store adapter.
type NewStore func(t *testing.T) ledger.Store

// Backends are the in-process ledger over a store from newStore, and the
// same ledger over another store from newStore, served by the ledger API
// on an httptest server and reached with its Go client.
func Backends(t *testing.T, newStore NewStore) []Backend {
	t.Helper()
	inproc := ledger.New(newStore(t), ledger.Options{})
	remoteLedger := ledger.New(newStore(t), ledger.Options{})
	srv := httptest.NewServer(ledgerapi.NewHandler(remoteLedger, "test-token", nil))
	t.Cleanup(srv.Close)
	client, err := ledgerapi.NewClient(srv.URL, "test-token", srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	begin := func(t *testing.T, scope, runID string, l interface {
		begin(context.Context, string, ledger.RunOptions) (tool.Run, error)
	}) tool.Run {
		t.Helper()
		r, err := l.begin(context.Background(), scope, ledger.RunOptions{RunID: runID})
		if err != nil {
			t.Fatalf("begin %s: %v", scope, err)
		}
		return r
	}
	in, re := inProcess{inproc}, remote{client}
	return []Backend{
		{Name: "in-process",
			Begin:  func(t *testing.T, scope string) tool.Run { return begin(t, scope, "", in) },
			Resume: func(t *testing.T, scope, id string) tool.Run { return begin(t, scope, id, in) },
			Ref:    func(scope, id string, token uint64) tool.Run { return inproc.RunRef(scope, id, token) }},
		{Name: "ledger-api",
			Begin:  func(t *testing.T, scope string) tool.Run { return begin(t, scope, "", re) },
			Resume: func(t *testing.T, scope, id string) tool.Run { return begin(t, scope, id, re) },
			Ref:    func(scope, id string, token uint64) tool.Run { return client.RunRef(scope, id, token) }},
	}
}

type inProcess struct{ l *ledger.Ledger }

func (b inProcess) begin(ctx context.Context, scope string, o ledger.RunOptions) (tool.Run, error) {
	return b.l.Begin(ctx, scope, o)
}

type remote struct{ c *ledgerapi.Client }

func (b remote) begin(ctx context.Context, scope string, o ledger.RunOptions) (tool.Run, error) {
	return b.c.Begin(ctx, scope, o)
}

// RefundArgs are the seed's refund arguments. Reason is the model's
// wording: it differs between retries and is not part of the identity.
type RefundArgs struct {
	Order  string `json:"order"`
	Cents  int    `json:"cents"`
	Reason string `json:"reason,omitempty"`
}

// RefundSchema is the JSON Schema of RefundArgs.
const RefundSchema = `{"type":"object","properties":{"order":{"type":"string"},"cents":{"type":"integer"},"reason":{"type":"string"}},"required":["order","cents"]}`

// Refund is a guarded refund tool whose effect counts its executions and
// can be held mid-effect, which makes the race deterministic.
type Refund struct {
	Tool       *tool.Tool
	Executions atomic.Int32

	mu      sync.Mutex
	started chan struct{} // closed when an effect is running
	release chan struct{} // the running effect returns when this closes
}

// NewRefund makes the refund tool. Its effect returns at once unless Hold
// was called.
func NewRefund() *Refund {
	r := &Refund{}
	r.Tool = tool.MustGuard(tool.Definition{Name: "refund", Description: "Refund an order.", Parameters: json.RawMessage(RefundSchema)},
		func(a RefundArgs) (any, error) { return map[string]any{"order": a.Order, "cents": a.Cents}, nil },
		func(ctx context.Context, a RefundArgs, c ledger.Call) (any, error) {
			n := r.Executions.Add(1)
			r.mu.Lock()
			started, release := r.started, r.release
			r.started = nil // only one effect is held
			r.mu.Unlock()
			if started != nil {
				close(started)
				select {
				case <-release:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return map[string]any{"refund_id": "re_" + a.Order, "execution": n}, nil
		})
	return r
}

// Hold makes the next effect block until the returned release is called;
// started closes once it runs.
func (r *Refund) Hold() (started <-chan struct{}, release func()) {
	s, rel := make(chan struct{}), make(chan struct{})
	r.mu.Lock()
	r.started, r.release = s, rel
	r.mu.Unlock()
	var once sync.Once
	return s, func() {
		once.Do(func() {
			close(rel)
			r.mu.Lock()
			r.started, r.release = nil, nil
			r.mu.Unlock()
		})
	}
}

// Call delivers one model tool call of the refund through an adapter's
// types, under the run in ctx, and returns the status the model was told
// (read back from the adapter's message) and how many times the effect ran
// so far. callID differs on every call, as a model's tool-call id does.
type Call func(ctx context.Context, callID string, args json.RawMessage) (tool.Status, error)

// hangGuard bounds the wait for a step that the test itself unblocks; it
// is reached only when the code under test is broken.
const hangGuard = 20 * time.Second

// Race runs the seed's race on every backend: three concurrent calls of
// the same refund, worded differently, with the first effect held until
// the other two have answered, then a late retry. The model must be told
// executed once, in_flight twice, then replayed, and the refund must run
// once.
//
// newStore gives each backend's ledger its store. setup builds the
// adapter's side for one backend; an adapter that names the run by the
// gateway's headers resolves them with b.Ref.
func Race(t *testing.T, newStore NewStore, setup func(t *testing.T, b Backend) (*Refund, Call)) {
	t.Helper()
	for _, b := range Backends(t, newStore) {
		t.Run(b.Name, func(t *testing.T) {
			refund, call := setup(t, b)
			ctx := tool.WithRun(context.Background(), b.Begin(t, "order-A-1001"))
			started, release := refund.Hold()
			defer release()
			type answer struct {
				status tool.Status
				err    error
			}
			answers := make(chan answer, 3)
			var wg sync.WaitGroup
			for i, reason := range []string{"customer asked", "the customer asked for a refund", "refund it please"} {
				wg.Go(func() {
					args, _ := json.Marshal(RefundArgs{Order: "A-1001", Cents: 2500, Reason: reason})
					s, err := call(ctx, "call_"+string(rune('a'+i)), args)
					answers <- answer{s, err}
				})
			}
			got := map[tool.Status]int{}
			wait := func(what string) answer {
				t.Helper()
				select {
				case a := <-answers:
					if a.err != nil {
						t.Fatalf("%s: %v", what, a.err)
					}
					return a
				case <-time.After(hangGuard):
					t.Fatalf("%s: no answer (the effect is held until the others answer)", what)
				}
				return answer{}
			}
			select {
			case <-started:
			case <-time.After(hangGuard):
				t.Fatal("no call ran the effect")
			}
			for range 2 {
				got[wait("a concurrent call").status]++
			}
			release()
			got[wait("the executing call").status]++
			wg.Wait()
			if got[tool.StatusExecuted] != 1 || got[tool.StatusInFlight] != 2 {
				t.Fatalf("the model was told %v, want executed once and in_flight twice", got)
			}
			late, err := call(ctx, "call_late", json.RawMessage(`{"order":"A-1001","cents":2500,"reason":"retrying after a timeout"}`))
			if err != nil {
				t.Fatal(err)
			}
			if late != tool.StatusReplayed {
				t.Fatalf("the late retry was told %s, want replayed", late)
			}
			if n := refund.Executions.Load(); n != 1 {
				t.Fatalf("the refund ran %d times, want once", n)
			}
		})
	}
}

// StatusOf reads the status out of an Outcome's Text, as a model (or an
// adapter's test) sees it.
func StatusOf(text string) (tool.Status, error) {
	var body struct {
		Status tool.Status `json:"status"`
	}
	if err := json.Unmarshal([]byte(text), &body); err != nil || body.Status == "" {
		return "", fmt.Errorf("tool answer %q has no status: %v", text, err)
	}
	return body.Status, nil
}
