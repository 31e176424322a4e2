package ingress

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/tidwall/gjson"
	"go.uber.org/zap"

	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ingress/extract"
)

// maxBatch bounds the elements of one batched request: each is a ledger transaction and a
// forward, done one after the other.
const maxBatch = 1000

// batchAnswer is the 200 body for a batched request: every element's outcome.
type batchAnswer struct {
	Status string   `json:"status"` // "batch"
	Events []answer `json:"events"`
}

type batchItem struct {
	body      []byte
	eventID   string
	scope     string
	contextAt time.Time
	ignored   string // the rule that ignores this element; "" when none
}

// serveBatch turns one verified request into one event per element of the source's split
// array. Every element is claimed and forwarded on its own, under its own event id, so an
// element already delivered is a duplicate and the others still go through. The provider hears
// 200 only when every element is recorded (delivered, rejected or duplicate) or ignored; otherwise the
// first element's failure, so it retries the whole request and the recorded ones are not
// delivered twice. An element whose event id does not resolve fails the request with 400
// before anything is recorded.
func (g *Gateway) serveBatch(c echo.Context, d *delivery, src *Source, body []byte, now time.Time) error {
	items, err := g.batchItems(src, c.Request(), body, now)
	if err != nil {
		d.decision = decBatchRefused
		return err
	}
	if len(items) == 0 {
		d.decision = decBatchEmpty
		return g.okBatch(c, d, nil)
	}
	events := make([]answer, 0, len(items))
	var first error
	for _, it := range items {
		ed := &delivery{source: src, eventID: it.eventID, runID: src.Name + ":" + it.eventID, scope: it.scope, start: time.Now()}
		var a answer
		ed.collect = &a
		var err error
		var echo bool
		if it.ignored == "" {
			in := &extract.Input{Header: c.Request().Header, Query: c.Request().URL.Query(), Body: it.body, ContentType: "application/json"}
			if echo, err = g.echoOf(c.Request().Context(), src, in, it.scope); err != nil {
				ed.decision = decStoreError
			} else if echo {
				it.ignored = ruleEcho
			}
		}
		switch {
		case err != nil:
		case it.ignored != "":
			ed.runID = ""
			err = g.ignored(c, ed, src, it.ignored)
		case src.cfg.Forward.Queue.Mode == dispatch.ModeQueued:
			err = g.enqueue(c, ed, src, it.body, it.contextAt, now)
		default:
			err = g.claimAndForward(c, ed, src, it.body, it.contextAt)
		}
		fields := []zap.Field{zap.String("source", src.Name), zap.String("decision", ed.decision.String()),
			zap.String("event_id", ed.eventID), zap.String("scope", ed.scope), zap.String("run_id", ed.runID),
			zap.Int("delivery", ed.deliveryN), zap.Duration("latency", time.Since(ed.start))}
		if ed.reason != "" {
			fields = append(fields, zap.String("reason", ed.reason))
		}
		if err != nil {
			fields = append(fields, zap.Error(err))
			if first == nil {
				first = err
			}
		} else {
			events = append(events, a)
		}
		if decisions[ed.decision].throttled {
			ok, suppressed := g.refusals.allow(ignoreLogKey(src.Name, ed.reason), g.now())
			if !ok {
				continue
			}
			if suppressed > 0 {
				fields = append(fields, zap.Int("suppressed", suppressed))
			}
		}
		g.log.Info("webhook batch element", fields...)
	}
	if first != nil {
		d.decision = decBatchIncomplete
		var ie *Error
		if errors.As(first, &ie) {
			d.reason = ie.Reason
		}
		return first
	}
	d.decision = decBatch
	return g.okBatch(c, d, events)
}

// batchItems splits a verified body into its elements with their ids, or refuses it (400).
func (g *Gateway) batchItems(src *Source, req *http.Request, body []byte, now time.Time) ([]batchItem, error) {
	arr := gjson.GetBytes(body, src.split)
	if !arr.IsArray() {
		return nil, &Error{Status: http.StatusBadRequest, Reason: "batch_malformed",
			Message: fmt.Sprintf("split {json:%s} is not an array in this request", src.split)}
	}
	var items []batchItem
	var bad error
	query := req.URL.Query()
	arr.ForEach(func(_, el gjson.Result) bool {
		if len(items) == maxBatch {
			bad = &Error{Status: http.StatusBadRequest, Reason: "batch_too_large",
				Message: fmt.Sprintf("more than %d elements in one request", maxBatch)}
			return false
		}
		raw := []byte(el.Raw)
		in := &extract.Input{Header: req.Header, Query: query, Body: raw, ContentType: "application/json"}
		// Ignore rules apply per element, with the request's headers, query
		// and path; an ignored element needs no event id.
		if label, ok := src.ignoredBy(req, raw, "application/json"); ok {
			it := batchItem{body: raw, ignored: label}
			if id, ok := src.eventID.Resolve(in); ok && checkID("event id", src.eventIDText, id) == nil {
				it.eventID = id
			}
			items = append(items, it)
			return true
		}
		id, ok := src.eventID.Resolve(in)
		if !ok {
			bad = &Error{Status: http.StatusBadRequest, Reason: "missing_event_id",
				Message: fmt.Sprintf("event id rule %s did not resolve for element %d", src.eventIDText, len(items))}
			return false
		}
		if bad = checkID("event id", src.eventIDText, id); bad != nil {
			return false
		}
		it := batchItem{body: raw, eventID: id, scope: src.Name + ":" + id}
		if src.scope != nil {
			if s, ok := src.scope.Resolve(in); ok {
				if bad = checkID("scope", src.scope.String(), s); bad != nil {
					return false
				}
				it.scope = s
			}
		}
		if it.contextAt, bad = g.contextAt(src, in, now, &delivery{eventID: id}); bad != nil {
			return false
		}
		items = append(items, it)
		return true
	})
	return items, bad
}

// okBatch answers a batch whose every element is settled. The status is
// the one a single event would get: 202 when any element was queued just
// now (the gateway took on its delivery), else 200.
func (g *Gateway) okBatch(c echo.Context, d *delivery, events []answer) error {
	d.status = http.StatusOK
	for _, e := range events {
		if e.Status == "queued" {
			d.status = http.StatusAccepted
			break
		}
	}
	if events == nil {
		events = []answer{}
	}
	return writeJSON(c, d.status, batchAnswer{Status: "batch", Events: events})
}
