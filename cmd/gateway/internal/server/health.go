package server

import (
	"context"
	"time"

	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// sourcesHealth reads every configured source's health from the store
// (dispatch.ReadHealth): what the admin API, `gateway sources list`, the
// console and the gauges show.
func sourcesHealth(l *ledger.Ledger, sources []*ingress.Source, clock func() time.Time) func(context.Context) ([]dispatch.SourceHealth, error) {
	ds := make([]*dispatch.Source, len(sources))
	for i, s := range sources {
		ds[i] = s.Queued()
	}
	if clock == nil {
		clock = time.Now
	}
	return func(ctx context.Context) ([]dispatch.SourceHealth, error) {
		return dispatch.ReadHealth(ctx, l, ds, clock())
	}
}

// healthJSON is read's answer as the admin API gives it.
func healthJSON(read func(context.Context) ([]dispatch.SourceHealth, error)) func(context.Context) (ledgerapi.SourcesHealthJSON, error) {
	return func(ctx context.Context) (ledgerapi.SourcesHealthJSON, error) {
		hs, err := read(ctx)
		if err != nil {
			return ledgerapi.SourcesHealthJSON{}, err
		}
		out := ledgerapi.SourcesHealthJSON{Sources: make([]ledgerapi.SourceHealthJSON, len(hs))}
		for i, h := range hs {
			out.Sources[i] = ledgerapi.SourceHealthJSON{Source: h.Source, Mode: h.Mode, URL: h.URL, Health: h.Health,
				Since: ledgerapi.SinceOf(h.Since), ConsecutiveFailures: h.Failures, LastError: h.LastError, Waiting: h.Waiting,
				OldestWaitingSecs: int64(h.OldestWaiting / time.Second), Dead: h.Dead, Partial: h.Partial}
		}
		return out, nil
	}
}
