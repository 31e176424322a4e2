package main

import (
	"context"
	"fmt"
	"text/tabwriter"
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

// sourcesList prints every source's mode, URL, health, waiting and dead
// events, and, for a failing one, since when and the last error.
func (a *App) sourcesList(ctx context.Context, f ledgerFlags) error {
	client, err := a.ledgerClient(f)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	hs, err := client.SourcesHealth(ctx)
	if err != nil {
		return explain(err)
	}
	if f.json {
		return a.printJSON(ledgerapi.SourcesHealthJSON{Sources: hs})
	}
	tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tMODE\tURL\tHEALTH\tWAITING\tOLDEST\tDEAD")
	for _, h := range hs {
		more := ""
		if h.Partial {
			more = "+"
		}
		oldest := "-"
		if h.Waiting > 0 {
			oldest = (time.Duration(h.OldestWaitingSecs) * time.Second).String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d%s\t%s\t%d%s\n", h.Source, h.Mode, h.URL, h.Health, h.Waiting, more, oldest, h.Dead, more)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, h := range hs {
		if h.Health == dispatch.Failing {
			fmt.Fprintf(a.Stdout, "%s: failing since %s, %d failed attempt(s) in a row: %s\n", h.Source, h.Since, h.ConsecutiveFailures, h.LastError)
		}
	}
	return nil
}
