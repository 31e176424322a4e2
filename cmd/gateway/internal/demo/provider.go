package demo

import (
	"bytes"
	"container/heap"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/replyonce/gateway/signatures"
)

// retrySchedule is how long the platform waits before each redelivery of
// an event it could not deliver, the schedule Standard Webhooks senders
// commonly use. After the last one it gives up.
var retrySchedule = [...]time.Duration{
	5 * time.Second, 5 * time.Minute, 30 * time.Minute, 2 * time.Hour, 5 * time.Hour, 10 * time.Hour, 10 * time.Hour,
}

// event is one "message.created" webhook, with its stable webhook id.
type event struct {
	conv, msg string
	webhookID string
	body      []byte
}

type eventBody struct {
	Type         string      `json:"type"`
	Conversation string      `json:"conversation"`
	Message      messageBody `json:"message"`
}

type messageBody struct {
	ID        string `json:"id"`
	Text      string `json:"text"`
	CreatedAt string `json:"created_at"`
}

// createdAtFormat keeps milliseconds: a burst's second message must look
// newer than the first to the gateway's supersede fencing.
const createdAtFormat = "2006-01-02T15:04:05.000Z07:00"

func newEvent(m *message, conv, text string) (*event, error) {
	body, err := json.Marshal(eventBody{Type: "message.created", Conversation: conv,
		Message: messageBody{ID: m.id, Text: text, CreatedAt: m.at.UTC().Format(createdAtFormat)}})
	if err != nil {
		return nil, err
	}
	return &event{conv: conv, msg: m.id, webhookID: "msg_" + m.id, body: body}, nil
}

// sender is the chat platform's webhook sender: it signs each attempt as
// the platform would and hands it to the mode's receiver.
type sender struct {
	clock  *clock
	signer signatures.Signer
	url    string
}

func newSender(c *clock, url string) (*sender, error) {
	s, err := signatures.NewSigner("standard-webhooks", signatures.Config{Secrets: []string{providerSecret}})
	if err != nil {
		return nil, err
	}
	return &sender{clock: c, signer: s, url: url}, nil
}

// request builds one signed delivery attempt. The webhook id stays the same
// on every attempt; the timestamp and signature are fresh each time.
func (s *sender) request(ctx context.Context, ev *event) (*http.Request, error) {
	sreq := &signatures.Request{Method: http.MethodPost, URL: s.url, Body: ev.body,
		Header: http.Header{"Content-Type": {"application/json"}, "Webhook-Id": {ev.webhookID}}}
	if err := s.signer.Sign(sreq, s.clock.Now()); err != nil {
		return nil, err
	}
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(sreq.Body))
	req.Header = sreq.Header
	return req, nil
}

// chain is one copy of an event on its way through the platform's retries.
// A duplicate delivery is a second chain for the same event.
type chain struct {
	ev       *event
	attempts int
}

// queue holds the platform's scheduled redeliveries in time order; ties go
// in the order they were scheduled.
type queue struct {
	items []queued
	seq   int
}

type queued struct {
	at  time.Time
	seq int
	ch  *chain
}

func (q *queue) Len() int { return len(q.items) }
func (q *queue) Less(i, j int) bool {
	if !q.items[i].at.Equal(q.items[j].at) {
		return q.items[i].at.Before(q.items[j].at)
	}
	return q.items[i].seq < q.items[j].seq
}
func (q *queue) Swap(i, j int) { q.items[i], q.items[j] = q.items[j], q.items[i] }
func (q *queue) Push(x any)    { q.items = append(q.items, x.(queued)) }
func (q *queue) Pop() any {
	last := q.items[len(q.items)-1]
	q.items = q.items[:len(q.items)-1]
	return last
}

func (q *queue) schedule(at time.Time, ch *chain) {
	q.seq++
	heap.Push(q, queued{at: at, seq: q.seq, ch: ch})
}

func (q *queue) next() queued { return heap.Pop(q).(queued) }

// errConnectionLost is what a client sees when the handler it called died.
var errConnectionLost = errors.New("connection reset by peer: the agent process died mid-request")

// serveInProcess calls h as a server would. A handler that panics with
// http.ErrAbortHandler (a simulated crash) has dropped the connection:
// lost reports it, and whatever it wrote is discarded.
func serveInProcess(h http.Handler, req *http.Request) (rec *httptest.ResponseRecorder, lost bool) {
	rec = httptest.NewRecorder()
	defer func() {
		if v := recover(); v != nil {
			if v != http.ErrAbortHandler {
				panic(v)
			}
			rec, lost = nil, true
		}
	}()
	h.ServeHTTP(rec, req)
	return rec, false
}

// inProcessTransport lets a real http.Client (the forwarder's) reach a
// handler without a network: each round trip is one in-process call.
type inProcessTransport struct{ h http.Handler }

func (t inProcessTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil {
		defer req.Body.Close()
	}
	// A server-side view of the client's request, as net/http would build.
	sreq := req.Clone(req.Context())
	sreq.Host = req.URL.Host
	sreq.RequestURI = req.URL.RequestURI()
	sreq.RemoteAddr = "192.0.2.1:40000"
	rec, lost := serveInProcess(t.h, sreq)
	if lost {
		return nil, errConnectionLost
	}
	return rec.Result(), nil
}
