//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/replyonce/gateway/signatures"
)

// conversation is what one sender sends in turn: count events to one
// source on one scope, each only after the one before was acknowledged,
// so the gateway receives them in the order sent.
type conversation struct {
	source string
	count  int
}

// mix is the sources a provider's senders cycle through, and how many
// events each conversation has: ordered scopes and debounced bursts of
// several events, plain queued and inline events one per scope.
var mix = []conversation{
	{"ordered", 4},
	{"plain", 1},
	{"burst", 4},
	{"inline", 1},
	{"plain", 1},
}

// Provider sends signed events as a Standard Webhooks provider does: each
// until the gateway acknowledges it (2xx), again after a 503 or a failed
// connection, by several senders at once, up to a number of events.
type Provider struct {
	targets func() []string // gateway base URLs, tried in turn
	signer  signatures.Signer
	client  *http.Client
	budget  int64
	pace    time.Duration // between a sender's conversations
	prefix  string

	next    atomic.Int64 // events begun
	stopped atomic.Bool  // begin no more conversations
	wg      sync.WaitGroup
	mu      sync.Mutex
	events  []Event
	status  map[int]int // answers by status, 0 for no answer
}

// StartProvider starts senders that send up to budget events in all.
func StartProvider(ctx context.Context, prefix string, targets func() []string, secret string, senders, budget int, pace time.Duration) (*Provider, error) {
	signer, err := signatures.NewSigner("standard-webhooks", signatures.Config{Secrets: []string{secret}})
	if err != nil {
		return nil, err
	}
	p := &Provider{targets: targets, signer: signer, budget: int64(budget), pace: pace, prefix: prefix, status: map[int]int{},
		client: &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: senders}}}
	for i := range senders {
		p.wg.Go(func() { p.send(ctx, i) })
	}
	return p, nil
}

// Stop begins no more conversations; the ones begun run to their end.
func (p *Provider) Stop() { p.stopped.Store(true) }

// Wait waits for the senders to finish.
func (p *Provider) Wait() { p.wg.Wait(); p.client.CloseIdleConnections() }

// Events is a copy of the events sent so far.
func (p *Provider) Events() []Event {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Event(nil), p.events...)
}

// Acked is how many events were acknowledged so far.
func (p *Provider) Acked() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, e := range p.events {
		if e.Acked {
			n++
		}
	}
	return n
}

func (p *Provider) send(ctx context.Context, sender int) {
	for turn := 0; ; turn++ {
		c := mix[(sender+turn)%len(mix)]
		if p.stopped.Load() || p.next.Add(int64(c.count)) > p.budget {
			return
		}
		scope := fmt.Sprintf("%s-%d-%d", p.prefix, sender, turn)
		for seq := range c.count {
			id := fmt.Sprintf("%s-%s-%d-%d-%d", p.prefix, c.source, sender, turn, seq)
			p.mu.Lock()
			i := len(p.events)
			p.events = append(p.events, Event{ID: id, Source: c.source, Scope: scope, Seq: seq})
			p.mu.Unlock()
			if !p.deliver(ctx, c.source, id, scope, seq) {
				break // not acknowledged: the rest of the conversation is not sent
			}
			p.mu.Lock()
			p.events[i].Acked = true
			p.mu.Unlock()
		}
		sleep(ctx, p.pace)
	}
}

// deliver sends one event until it is acknowledged or the run's context
// ends, and reports whether it was acknowledged.
func (p *Provider) deliver(ctx context.Context, source, id, scope string, seq int) bool {
	body, _ := json.Marshal(map[string]any{"id": id, "scope": scope, "seq": seq, "text": "message " + id})
	for attempt := 0; ctx.Err() == nil; attempt++ {
		targets := p.targets()
		url := targets[attempt%len(targets)] + "/hooks/" + source
		req := &signatures.Request{Method: http.MethodPost, URL: url, Header: http.Header{}, Body: body}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Webhook-Id", id)
		// Signed afresh each time, as a provider's retry is: a fresh
		// timestamp inside the tolerance.
		if err := p.signer.Sign(req, time.Now()); err != nil {
			panic(fmt.Sprintf("chaos: signing: %v", err)) // a fixed scheme and secret: a bug here
		}
		hr, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(req.Body))
		hr.Header = req.Header
		status := 0
		if resp, err := p.client.Do(hr); err == nil {
			status = resp.StatusCode
			_ = resp.Body.Close()
		}
		p.mu.Lock()
		p.status[status]++
		p.mu.Unlock()
		if status/100 == 2 {
			return true
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return false
}

// Unexpected lists answers other than 2xx, 503 and none: a provider
// would give up on them, and no fault here excuses one.
func (p *Provider) Unexpected() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for s, n := range p.status {
		if s != 0 && s/100 != 2 && s != http.StatusServiceUnavailable {
			out = append(out, fmt.Sprintf("%d answers %d", n, s))
		}
	}
	return out
}
