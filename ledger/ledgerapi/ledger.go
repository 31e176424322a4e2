package ledgerapi

import (
	"context"

	"github.com/replyonce/gateway/ledger"
)

// RunHandle is what an agent does within one run. *ledger.Run (in process)
// and *Run (over HTTP) both satisfy it as they are.
type RunHandle interface {
	Once(ctx context.Context, intent string, payload any, effect ledger.Effect, opts ...ledger.OnceOptions) (ledger.Result, error)
	Claim(ctx context.Context, intent string, payload any, o ledger.OnceOptions) (ledger.Claim, error)
	Check(ctx context.Context, intent string, payload any) (ledger.CheckResult, error)
	Heartbeat(ctx context.Context) (bool, error)
	End(ctx context.Context, reason string) error
}

var (
	_ RunHandle = (*ledger.Run)(nil)
	_ RunHandle = (*Run)(nil)
)

// Ledger is the part of the ledger an agent needs, the same whether it runs
// in the agent's process or behind the gateway's admin listener. Write the
// agent against it and pick InProcess or Remote at start-up.
//
// *ledger.Ledger and *Client cannot satisfy it directly: their Begin and
// RunRef return their own concrete run types (Go has no covariant return
// types), and *ledger.Ledger keeps History among its Views. InProcess and
// Remote are the small adapters.
type Ledger interface {
	Begin(ctx context.Context, scope string, opts ledger.RunOptions) (RunHandle, error)
	RunRef(scope, runID string, token uint64) RunHandle
	Once(ctx context.Context, key ledger.Key, effect ledger.Effect, opts ...ledger.OnceOptions) (ledger.Result, error)
	Claim(ctx context.Context, req ledger.ClaimRequest) (ledger.Claim, error)
	Settle(ctx context.Context, ref ledger.ClaimRef, outcome ledger.Outcome, value any, effectErr error) (ledger.Result, error)
	Check(ctx context.Context, key ledger.Key) (ledger.CheckResult, error)
	History(ctx context.Context, scope string) ([]ledger.Entry, error)
}

// InProcess is l seen as a Ledger.
func InProcess(l *ledger.Ledger) Ledger { return inProcess{l} }

// Remote is c seen as a Ledger.
func Remote(c *Client) Ledger { return remote{c} }

type inProcess struct{ *ledger.Ledger }

func (l inProcess) Begin(ctx context.Context, scope string, opts ledger.RunOptions) (RunHandle, error) {
	r, err := l.Ledger.Begin(ctx, scope, opts)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (l inProcess) RunRef(scope, runID string, token uint64) RunHandle {
	return l.Ledger.RunRef(scope, runID, token)
}

// History is the scope's history from the ledger's read-only views, where
// *ledger.Ledger keeps it.
func (l inProcess) History(ctx context.Context, scope string) ([]ledger.Entry, error) {
	return l.Ledger.Views().History(ctx, scope)
}

type remote struct{ *Client }

func (c remote) Begin(ctx context.Context, scope string, opts ledger.RunOptions) (RunHandle, error) {
	r, err := c.Client.Begin(ctx, scope, opts)
	if err != nil {
		return nil, err
	}
	return r, nil
}

func (c remote) RunRef(scope, runID string, token uint64) RunHandle {
	return c.Client.RunRef(scope, runID, token)
}
