package dispatch

import (
	"encoding/json"
	"strconv"

	"go.uber.org/zap"

	"github.com/replyonce/gateway/forward"
)

// CancelMode says what happens to a delivery in flight whose run a newer
// event superseded.
type CancelMode string

// Cancel modes.
const (
	// CancelNone: the run learns it from the ledger only (its next claim
	// is refused superseded).
	CancelNone CancelMode = ""
	// CancelNotify: the dispatcher also POSTs a signed cancellation notice
	// to the agent (a CancelNotice, sent as Source.CancelRequest builds it).
	CancelNotify CancelMode = "notify"
)

// CancelNotice is the body of the cancellation notice (forward.cancel:
// notify) posted to a source's forward.url when a newer event supersedes
// the run of a delivery the agent is working on. It is signed like a
// forward (Standard Webhooks, webhook-id "cancel_{run id}_{token}") and
// marked Replyonce-Notice: cancel, with the delivery's Replyonce-Scope,
// -Run-Id, -Event-Id and -Fencing-Token. It is sent once, not retried: the
// ledger refusing the run's next claim is what stops it; the notice only
// saves the agent the work.
type CancelNotice struct {
	Type           string `json:"type"`   // "replyonce.cancel"
	Reason         string `json:"reason"` // "superseded"
	Source         string `json:"source"`
	Scope          string `json:"scope"`
	EventID        string `json:"event_id"`
	RunID          string `json:"run_id"`
	Delivery       int    `json:"delivery"`
	FencingToken   uint64 `json:"fencing_token"`
	SupersededBy   string `json:"superseded_by"` // the newer run
	SupersededByID string `json:"superseded_by_event_id"`
}

// CancelRequest builds the notice's request.
func (s *Source) CancelRequest(n CancelNotice) (forward.Request, error) {
	body, err := json.Marshal(n)
	if err != nil {
		return forward.Request{}, err
	}
	r := s.Target.Request()
	r.Body, r.ContentType, r.Notice = body, "application/json", "cancel"
	r.Source, r.EventID, r.Scope, r.RunID = s.Name, n.EventID, n.Scope, n.RunID
	r.Delivery, r.FencingToken = n.Delivery, n.FencingToken
	r.IdempotencyKey = "cancel_" + n.RunID + "_" + strconv.FormatUint(n.FencingToken, 10)
	return r, nil
}

// SendCancel posts a cancellation notice: one attempt, owned by the
// dispatcher (Shutdown waits for it), never retried.
func (d *Dispatcher) SendCancel(src *Source, n CancelNotice) {
	if src == nil {
		return
	}
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.running.Add(1)
	d.mu.Unlock()
	go func() {
		defer d.running.Done()
		req, err := src.CancelRequest(n)
		outcome := "failed"
		if err == nil {
			if out := d.fwd.Forward(d.forwards, req); out.Kind == forward.Delivered {
				outcome = "delivered"
			}
		}
		d.conv.CancelNotice(src.Name, outcome)
		d.log.Info("dispatch: cancellation notice", zap.String("source", src.Name), zap.String("event_id", n.EventID),
			zap.String("run_id", n.RunID), zap.String("superseded_by", n.SupersededBy), zap.String("outcome", outcome))
	}()
}
