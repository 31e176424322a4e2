package main

import (
	"context"
	"fmt"
	"text/tabwriter"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// escalationsCmd is "gateway ledger escalations" and "gateway ledger
// dismiss": the loop breaker's list for an operator.
func (a *App) escalationsCmd(ctx context.Context, client *ledgerapi.Client, f ledgerFlags, sub string, pos []string) error {
	if sub == "dismiss" {
		e, err := client.DismissEscalation(ctx, pos[0], pos[1], "gateway ledger dismiss")
		if err != nil {
			return explain(err)
		}
		if f.json {
			return a.printJSON(ledgerapi.EscalationOnlyJSON{Escalation: ledgerapi.EscalationToJSON(e)})
		}
		fmt.Fprintf(a.Stdout, "dismissed %s %s (%s): the cap still holds until its window slides past the counted effects\n",
			printable(e.Scope), printable(e.ID), printable(e.Intent))
		return nil
	}
	es, err := client.Escalations(ctx, f.limit)
	if err != nil {
		return explain(err)
	}
	if f.json {
		out := ledgerapi.EscalationsJSON{Escalations: []ledgerapi.EscalationJSON{}}
		for _, e := range es {
			out.Escalations = append(out.Escalations, ledgerapi.EscalationToJSON(e))
		}
		return a.printJSON(out)
	}
	a.printEscalations(es)
	return nil
}

func (a *App) printEscalations(es []ledger.Escalation) {
	if len(es) == 0 {
		fmt.Fprintln(a.Stdout, "no open escalations")
		return
	}
	tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCOPE\tID\tINTENT\tCAP\tREFUSED\tOPENED\tLAST\tRUN\tSUMMARY")
	for _, e := range es {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d in %s\t%d\t%s\t%s\t%s\t%s\n", printable(e.Scope), printable(e.ID), printable(e.Intent),
			e.Max, e.Window, e.Refused, e.OpenedAt.UTC().Format(timeLayout), e.LastAt.UTC().Format(timeLayout),
			orDash(printable(e.RunID)), orDash(printable(e.Summary)))
	}
	_ = tw.Flush()
	fmt.Fprintf(a.Stdout, "\n%s. A cap tripped: look at the conversation (a self-reply loop?), then:\n  gateway ledger dismiss SCOPE ID\n",
		plural(len(es), "open escalation", "open escalations"))
}
