package main

import (
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

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
