package main

import (
	"context"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/replyonce/gateway/cmd/gateway/internal/when"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

const eventsUsage = `usage: gateway events <command> [flags]

commands:
  list [--source S] [--status queued|delivering|delivered|rejected|failed|dead|superseded|coalesced|paused] [--scope X] [--since T] [--until T]
                                   queued and inline events, oldest first
  show SOURCE EVENT_ID [--scope X] the event and every delivery attempt
  replay SOURCE EVENT_ID [--scope X]
  replay --status S [--source S] [--since T] [--until T]
                                   deliver again as a new delivery of the same run
  replay SOURCE EVENT_ID --to URL [--scope X]
                                   send the event once to another agent (a staging one),
                                   signed as usual but with no live run; recorded as an
                                   attempt, nothing else about the event changes
  tail [--source S] [--status S,...]
                                   each event as it is received and each attempt's
                                   outcome as it happens, from every instance, until Ctrl-C
  rejected SOURCE                  the last 100 requests this instance refused before the
                                   ledger (signature, size, method, event id), newest first

flags: --admin, --config, --token, --json and --timeout, as for gateway ledger.
--scope names the event's scope; without it show and replay look for the event
among the scopes that received an event last. T is RFC 3339 or a span back
from now: --since 1h is the last hour, --until 10m ten minutes ago.`

const sourcesUsage = `usage: gateway sources list [flags]
       gateway sources pause|resume NAME [flags]

list prints every source's mode, forward URL, health (healthy, failing,
paused), waiting and dead events, read from the store, and for a failing
source since when and the last error in plain words (docs/health.md).

A paused source keeps accepting and storing events and dispatches nothing
until it is resumed, in every gateway process sharing the store.

flags: --admin, --config, --token, --json and --timeout, as for gateway ledger.`

// adminFlags are the flags every admin API command takes.
func adminFlags(fs *flag.FlagSet, f *ledgerFlags) {
	fs.StringVar(&f.admin, "admin", "", "admin API base URL")
	fs.StringVar(&f.config, "config", "", "gateway configuration file")
	fs.StringVar(&f.token, "token", "", "admin bearer token")
	fs.BoolVar(&f.json, "json", false, "print JSON")
	fs.DurationVar(&f.timeout, "timeout", 10*time.Second, "request timeout")
}

type eventFlags struct {
	ledgerFlags
	source, status, scope, since, until string
	to                                  string
}

func (a *App) eventsCmd(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageError{eventsUsage}
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "help", "-h", "--help":
		fmt.Fprintln(a.Stdout, eventsUsage)
		return nil
	case "list", "show", "replay":
	case "rejected":
		return a.eventsRejected(ctx, rest)
	case "tail":
		return a.eventsTail(ctx, rest)
	default:
		return usageError{fmt.Sprintf("events: unknown command %q\n\n%s", sub, eventsUsage)}
	}
	var f eventFlags
	fs := a.flags("events " + sub)
	adminFlags(fs, &f.ledgerFlags)
	fs.StringVar(&f.scope, "scope", "", "the event's scope (sources with a scope rule)")
	if sub == "replay" {
		fs.StringVar(&f.to, "to", "", "send the event once to this http(s) URL instead of replaying it")
	}
	if sub != "show" {
		fs.StringVar(&f.source, "source", "", "only this source")
		fs.StringVar(&f.status, "status", "", "queued | delivering | delivered | rejected | failed | dead | superseded | coalesced | paused")
		fs.StringVar(&f.since, "since", "", "received at or after this time: RFC 3339, or a span back from now (10m, 1h, 2d)")
		fs.StringVar(&f.until, "until", "", "received before this time: RFC 3339, or a span back from now (10m, 1h, 2d)")
		fs.IntVar(&f.limit, "limit", 100, "scopes to look at")
	}
	pos, err := parseInterspersed(fs, rest)
	if err != nil {
		return err
	}
	filter := ledgerapi.DeliveryFilter{Source: f.source, Status: f.status, Scope: f.scope, Limit: f.limit}
	if f.since != "" {
		if filter.Since, err = when.Parse(f.since, a.Clock()); err != nil {
			return usageError{fmt.Sprintf("events %s: --since %v", sub, err)}
		}
	}
	if f.until != "" {
		if filter.Until, err = when.Parse(f.until, a.Clock()); err != nil {
			return usageError{fmt.Sprintf("events %s: --until %v", sub, err)}
		}
	}
	client, err := a.ledgerClient(f.ledgerFlags)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	switch sub {
	case "list":
		if len(pos) != 0 {
			return usageError{eventsUsage}
		}
		// "paused" is not a state of the event but of its source: the
		// API lists the queued events of sources that are paused now.
		items, err := client.Deliveries(ctx, filter)
		if err != nil {
			return explain(err)
		}
		if f.json {
			return a.printJSON(ledgerapi.DeliveriesJSON{Deliveries: items})
		}
		a.printDeliveries(items)
	case "show":
		if len(pos) != 2 {
			return usageError{fmt.Sprintf("events show: takes SOURCE EVENT_ID\n\n%s", eventsUsage)}
		}
		d, err := client.ShowDelivery(ctx, f.scope, pos[0], pos[1])
		if err != nil {
			return explain(err)
		}
		if f.json {
			return a.printJSON(d)
		}
		a.printDelivery(d)
	case "replay":
		if f.to != "" {
			return a.trial(ctx, client, f, pos)
		}
		req := ledgerapi.ReplayRequest{Scope: f.scope}
		switch {
		case len(pos) == 2 && f.status == "":
			req.Source, req.EventID = pos[0], pos[1]
		case len(pos) == 0 && f.status != "":
			req.Filter = &filter
		default:
			return usageError{fmt.Sprintf("events replay: name one event (SOURCE EVENT_ID) or give --status\n\n%s", eventsUsage)}
		}
		items, err := client.Replay(ctx, req)
		if err != nil {
			return explain(err)
		}
		if f.json {
			return a.printJSON(ledgerapi.DeliveriesJSON{Deliveries: items})
		}
		fmt.Fprintf(a.Stdout, "%d event(s) due again:\n", len(items))
		a.printDeliveries(items)
	}
	return nil
}

// trial sends one event to f.to (events replay ... --to URL).
func (a *App) trial(ctx context.Context, client *ledgerapi.Client, f eventFlags, pos []string) error {
	if len(pos) != 2 || f.status != "" {
		return usageError{fmt.Sprintf("events replay --to: name one event (SOURCE EVENT_ID); a trial is never sent in bulk\n\n%s", eventsUsage)}
	}
	rec, err := client.Trial(ctx, ledgerapi.TrialRequest{Scope: f.scope, Source: pos[0], EventID: pos[1], To: f.to})
	if err != nil {
		return explain(err)
	}
	if f.json {
		return a.printJSON(rec)
	}
	fmt.Fprintf(a.Stdout, "%s %s sent to %s (trial %d): %s", printable(pos[0]), printable(pos[1]), printable(rec.To), rec.N, rec.Outcome)
	if rec.AgentStatus != 0 {
		fmt.Fprintf(a.Stdout, ", %d", rec.AgentStatus)
	}
	if rec.Error != "" {
		fmt.Fprintf(a.Stdout, ": %s", printable(rec.Error))
	}
	fmt.Fprintln(a.Stdout, "\nthe event itself is unchanged; its attempts list the trial (gateway events show)")
	return nil
}

func (a *App) sourcesCmd(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageError{sourcesUsage}
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "help", "-h", "--help":
		fmt.Fprintln(a.Stdout, sourcesUsage)
		return nil
	case "pause", "resume", "list":
	default:
		return usageError{fmt.Sprintf("sources: unknown command %q\n\n%s", sub, sourcesUsage)}
	}
	var f ledgerFlags
	fs := a.flags("sources " + sub)
	adminFlags(fs, &f)
	pos, err := parseInterspersed(fs, rest)
	if err != nil {
		return err
	}
	if sub == "list" {
		if len(pos) != 0 {
			return usageError{fmt.Sprintf("sources list: takes no arguments\n\n%s", sourcesUsage)}
		}
		return a.sourcesList(ctx, f)
	}
	if len(pos) != 1 {
		return usageError{fmt.Sprintf("sources %s: takes NAME\n\n%s", sub, sourcesUsage)}
	}
	client, err := a.ledgerClient(f)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	paused, err := client.PauseSource(ctx, pos[0], sub == "pause")
	if err != nil {
		return explain(err)
	}
	if f.json {
		return a.printJSON(paused)
	}
	fmt.Fprintf(a.Stdout, "%sd %s; paused now: [%s]\n", sub, pos[0], strings.Join(paused.Paused, " "))
	if sub == "pause" {
		// The API waited for every live gateway instance's dispatcher to
		// stop the source (docs/health.md): say for which.
		fmt.Fprintf(a.Stdout, "paused on %s: [%s]\n", plural(len(paused.StoppedOn), "instance", "instances"), strings.Join(paused.StoppedOn, " "))
		if len(paused.NotConfirmed) > 0 {
			fmt.Fprintf(a.Stdout, "not confirmed in time by [%s]: each stops at its next sweep if it is running; check that it is\n", strings.Join(paused.NotConfirmed, " "))
		}
	}
	return nil
}

func (a *App) printDeliveries(items []ledgerapi.DeliveryItemJSON) {
	tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SOURCE\tEVENT ID\tSTATUS\tATTEMPTS\tRECEIVED\tNEXT\tSCOPE\tLAST")
	for _, q := range items {
		next := "-"
		switch ledger.DeliveryStatus(q.Status) {
		case ledger.DeliveryQueued:
			next = q.NextAt.UTC().Format(time.RFC3339)
		case ledger.DeliveryDelivering:
			next = "lease until " + q.LeaseUntil.UTC().Format(time.RFC3339)
		}
		last := q.LastError
		if q.CoverCount > 1 {
			last = fmt.Sprintf("covers %d events", q.CoverCount)
		}
		if q.LastStatus != 0 && last == "" {
			last = fmt.Sprint(q.LastStatus)
		}
		status := q.Status
		if q.Inline {
			status += " (inline)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s\n", printable(q.Source), printable(q.EventID), status, q.Attempts,
			q.ReceivedAt.UTC().Format(time.RFC3339), next, printable(q.Scope), printable(last))
	}
	_ = tw.Flush()
}

func (a *App) printDelivery(d ledgerapi.DeliveryJSON) {
	q, ev := d.Delivery, d.Event
	fmt.Fprintf(a.Stdout, "%s %s: %s after %d attempt(s)\n", printable(q.Source), printable(q.EventID), q.Status, q.Attempts)
	fmt.Fprintf(a.Stdout, "  scope %s  run %s  received %s  context %s\n", printable(q.Scope), printable(q.RunID),
		q.ReceivedAt.UTC().Format(time.RFC3339Nano), q.ContextAt.UTC().Format(time.RFC3339Nano))
	fmt.Fprintf(a.Stdout, "  %s, %d bytes\n", printable(ev.ContentType), q.BodyBytes)
	if q.Inline {
		kept := "body not kept (forward.keep_body is off)"
		if q.BodyKept {
			kept = "body kept"
		}
		fmt.Fprintf(a.Stdout, "  forwarded inline; %s; replay is offered for queued sources only\n", kept)
	}
	switch {
	case q.CoverCount > 0:
		fmt.Fprintf(a.Stdout, "  covers %d event(s): %s\n", q.CoverCount, printable(strings.Join(q.Covers, " ")))
	case q.CoveredBy != "":
		fmt.Fprintf(a.Stdout, "  coalesced: covered by %s\n", printable(q.CoveredBy))
	case q.SupersededBy != "":
		fmt.Fprintf(a.Stdout, "  superseded by run %s: not forwarded\n", printable(q.SupersededBy))
	}
	tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  #\tAT\tDELIVERY\tOUTCOME\tAGENT\tLATENCY\tERROR\tANSWER")
	for _, r := range d.Attempts {
		answer := r.Answer
		if len(answer) > 60 {
			answer = strings.ToValidUTF8(answer[:60], "") + "…"
		}
		late := ""
		if r.Late {
			late = " (late)"
		}
		n := strconv.Itoa(r.N)
		if r.To != "" {
			// A trial: numbered apart from the deliveries, sent elsewhere.
			n, late = "trial "+n, " (to "+printable(r.To)+")"
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s%s\t%d\t%s\t%s\t%s\n", n, r.At.UTC().Format(time.RFC3339), r.Delivery, r.Outcome, late,
			r.AgentStatus, time.Duration(r.LatencyMs*float64(time.Millisecond)).Round(time.Millisecond), printable(r.Error), printable(answer))
	}
	_ = tw.Flush()
}
