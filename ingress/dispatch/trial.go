package dispatch

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/replyonce/gateway/ledger"
)

// SendTrial sends queued event q once to the URL to instead of its
// source's agent (a staging agent with a fix) and records the outcome as
// one of the event's attempts (ledger.Queue.RecordTrial). The request is the one
// a delivery sends, signed with the source's forward.signing_secret and
// carrying its forward.headers, except that it holds no live run: its run
// id is ledger.TrialRunID and its fencing token 0, so a ledger write made
// with them is refused rather than acting on the conversation. Nothing
// else about the event changes, whatever the answer: its status, retry
// schedule and runs are the ledger's, not the trial's.
//
// It does not wait for a request place of the source: an operator's
// single request goes to another agent, whose capacity is not the
// source's.
func (d *Dispatcher) SendTrial(ctx context.Context, q ledger.QueueItem, to string) (ledger.AttemptRecord, error) {
	if err := ledger.CheckTrialURL(to); err != nil {
		return ledger.AttemptRecord{}, err
	}
	s, ok := d.sources[q.Source]
	if !ok {
		return ledger.AttemptRecord{}, fmt.Errorf("%w: source %q is not delivered by this gateway's dispatcher", ledger.ErrInvalid, q.Source)
	}
	if q.Inline {
		return ledger.AttemptRecord{}, fmt.Errorf("%s %s: %w", q.Source, q.EventID, ledger.ErrInline)
	}
	ev, err := d.l.Queue().QueuedEventOf(ctx, q)
	if err != nil {
		return ledger.AttemptRecord{}, err
	}
	r := s.src.Target.Request()
	r.URL = to
	r.Body, r.ContentType, r.Header = ev.Body, ev.ContentType, ev.Header
	r.Source, r.EventID, r.Scope, r.RunID = q.Source, q.EventID, q.Scope, ledger.TrialRunID(q)
	r.ContextAt = q.ContextAt
	r.Final = s.src.Policy.Retry.Reject
	r.Covers, r.CoverCount = q.Covers, q.CoverCount
	start := d.now()
	out := d.fwd.Forward(ctx, r)
	rec := ledger.AttemptRecord{At: start, To: to, AgentStatus: out.Status, Latency: out.Latency, Answer: out.Answer, Outcome: out.Kind.String()}
	if out.Err != nil {
		rec.Error = out.Err.Error()
	}
	kept, err := d.l.Queue().RecordTrial(ctx, q.Scope, q.EntryID, rec)
	if err != nil {
		return rec, fmt.Errorf("dispatch: the trial was sent (%s) but its record was not kept: %w", rec.Outcome, err)
	}
	d.log.Info("dispatch: trial sent", zap.String("source", q.Source), zap.String("event_id", q.EventID), zap.String("to", redacted(to)),
		zap.String("outcome", kept.Outcome), zap.Int("agent_status", kept.AgentStatus))
	return kept, nil
}
