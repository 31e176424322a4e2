package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/replyonce/gateway/cmd/gateway/internal/suggest"
	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
)

const ledgerUsage = `usage: gateway ledger <command> [flags]

commands:
  history SCOPE [--limit N] [--before NEXT]
                                   a scope's effect entries, newest first, N a page
                                   (default 50, at most 1000); the output names
                                   the --before that lists the older ones
  ambiguous [--limit N]            entries whose outcome is unknown
  resolve SCOPE ENTRY_ID --outcome committed|not_applied
                                   record what you found about an ambiguous entry
                                   (SCOPE and ENTRY_ID as "ambiguous" lists them)
  escalations [--limit N]          open escalations: a ledger.caps cap tripped (loop breaker)
  dismiss SCOPE ID                 record that you dealt with an escalation

flags (all commands):
  --admin URL     the gateway's admin API (default: admin.listen from --config,
                  else http://127.0.0.1:8081)
  --config FILE   read admin.listen (and admin.token) from the gateway's config
  --token T       admin bearer token (default: $GATEWAY_ADMIN_TOKEN, else admin.token)
  --json          print the API's JSON instead of a table
  --timeout D     give up on the admin API after D (default 10s)`

// defaultAdminURL is where a gateway with the default config listens.
const defaultAdminURL = "http://127.0.0.1:8081"

// ledgerFlags are the flags every ledger command takes.
type ledgerFlags struct {
	admin, config, token string
	json                 bool
	timeout              time.Duration
	limit                int
	outcome              string
	before               string
}

func (a *App) ledgerCmd(ctx context.Context, args []string) error {
	if len(args) == 0 {
		return usageError{ledgerUsage}
	}
	sub, rest := args[0], args[1:]
	switch sub {
	case "help", "-h", "--help":
		fmt.Fprintln(a.Stdout, ledgerUsage)
		return nil
	case "history", "ambiguous", "resolve", "escalations", "dismiss":
	default:
		return usageError{fmt.Sprintf("ledger: unknown command %q%s\n\n%s", sub, suggest.Hint(sub, []string{"history", "ambiguous", "resolve", "escalations", "dismiss"}), ledgerUsage)}
	}

	var f ledgerFlags
	fs := a.flags("ledger " + sub)
	adminFlags(fs, &f)
	if sub == "ambiguous" || sub == "escalations" {
		fs.IntVar(&f.limit, "limit", 100, "scopes to look at")
	}
	if sub == "history" {
		fs.IntVar(&f.limit, "limit", ledger.DefaultHistoryPage, fmt.Sprintf("entries on the page, 1 to %d", ledger.MaxHistoryPage))
		fs.StringVar(&f.before, "before", "", "list the entries older than a page: the value the page's output names")
	}
	if sub == "resolve" {
		fs.StringVar(&f.outcome, "outcome", "", "committed or not_applied")
	}
	pos, err := parseInterspersed(fs, rest)
	if err != nil {
		return err
	}
	want := map[string]int{"history": 1, "ambiguous": 0, "resolve": 2, "escalations": 0, "dismiss": 2}[sub]
	if len(pos) != want {
		return usageError{fmt.Sprintf("ledger %s: takes %d argument(s), got %d\n\n%s", sub, want, len(pos), ledgerUsage)}
	}
	client, err := a.ledgerClient(f)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()

	switch sub {
	case "escalations", "dismiss":
		return a.escalationsCmd(ctx, client, f, sub, pos)
	case "history":
		if f.limit < 1 || f.limit > ledger.MaxHistoryPage {
			return usageError{fmt.Sprintf("ledger history: --limit must be 1 to %d", ledger.MaxHistoryPage)}
		}
		page, err := client.HistoryPage(ctx, ledger.HistoryQuery{Scope: pos[0], Limit: f.limit, Before: f.before})
		if err != nil {
			return explain(err)
		}
		if f.json {
			return a.printJSON(ledgerapi.EntriesJSON{Scope: pos[0], Entries: toJSON(page.Entries), Next: page.Next})
		}
		a.printHistory(pos[0], page, f.before != "")
	case "ambiguous":
		entries, err := client.Ambiguous(ctx, f.limit)
		if err != nil {
			return explain(err)
		}
		if f.json {
			return a.printJSON(ledgerapi.EntriesJSON{Entries: toJSON(entries)})
		}
		a.printAmbiguous(entries)
	case "resolve":
		outcome := ledger.Outcome(f.outcome)
		if outcome != ledger.OutcomeCommitted && outcome != ledger.OutcomeNotApplied {
			return usageError{"ledger resolve: --outcome must be committed (it happened) or not_applied (it did not)"}
		}
		if pos[1] == "" {
			return usageError{"ledger resolve: the entry id is empty"}
		}
		e, err := client.Resolve(ctx, ledger.Resolution{Scope: pos[0], EntryID: pos[1], Outcome: outcome})
		if err != nil {
			return explain(err)
		}
		if f.json {
			return a.printJSON(ledgerapi.EntryOnlyJSON{Entry: ledgerapi.EntryToJSON(e)})
		}
		fmt.Fprintf(a.Stdout, "resolved %s %s (%s %s): now %s\n", printable(e.Scope), e.ID, printable(e.Intent), payloadText(e.Payload, 60), e.State)
		if e.State == ledger.StateFailed {
			fmt.Fprintln(a.Stdout, "the next claim of this effect may try it again")
		}
	}
	return nil
}

// parseInterspersed parses flags wherever they appear among the positional
// arguments, so "history conv-1 --json" works as well as "--json history".
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, helpRequested{fs}
			}
			return nil, usageError{fmt.Sprintf("%s: %v (see gateway %s --help)", fs.Name(), err, fs.Name())}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// ledgerClient picks the admin URL and token: flags first, then the
// environment, then the config file, then the defaults.
func (a *App) ledgerClient(f ledgerFlags) (*ledgerapi.Client, error) {
	adminURL, token, err := a.adminTarget(f)
	if err != nil {
		return nil, err
	}
	c, err := ledgerapi.NewClient(adminURL, token, &http.Client{Timeout: f.timeout})
	if err != nil {
		return nil, usageError{"--admin: " + err.Error()}
	}
	return c, nil
}

// adminTarget is the admin API's base URL and token, from the flags, the
// environment and the configuration, in that order.
func (a *App) adminTarget(f ledgerFlags) (string, string, error) {
	adminURL, token := f.admin, f.token
	if token == "" {
		token, _ = a.LookupEnv("GATEWAY_ADMIN_TOKEN")
	}
	if f.config != "" && (adminURL == "" || token == "") {
		cfg, err := a.loadConfigFor(f.config, []string{"admin.listen", "admin.token"}, nil)
		if err != nil {
			return "", "", fmt.Errorf("%w (or pass --admin and --token instead of --config)", err)
		}
		if adminURL == "" {
			if cfg.Admin.Listen == "" {
				return "", "", fmt.Errorf("%s: admin.listen is empty: this gateway serves no admin API", f.config)
			}
			adminURL = "http://" + dialable(cfg.Admin.Listen)
		}
		if token == "" {
			token = cfg.Admin.Token
		}
	}
	if adminURL == "" {
		adminURL = defaultAdminURL
	}
	return adminURL, token, nil
}

// dialable turns a listen address into one a client can connect to: a
// wildcard host (":8081", "0.0.0.0:8081") is reached on loopback.
func dialable(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return listen
	}
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return net.JoinHostPort(host, port)
}

// explain adds what an operator can do about the usual failures.
func explain(err error) error {
	switch {
	case errors.Is(err, ledgerapi.ErrUnauthorized):
		return fmt.Errorf("%w (set --token or GATEWAY_ADMIN_TOKEN to the gateway's admin.token)", err)
	case errors.Is(err, ledger.ErrNotAmbiguous):
		return fmt.Errorf("%w (only ambiguous entries can be resolved; see gateway ledger ambiguous)", err)
	case errors.Is(err, ledgerapi.ErrUnavailable):
		var answered *ledgerapi.Error
		if errors.As(err, &answered) {
			// Something answered at that URL, so it is right; the ledger
			// behind it is what is down.
			return fmt.Errorf("%w (the gateway answered but cannot reach its ledger store: check the store and the gateway's log)", err)
		}
		return fmt.Errorf("%w (is the gateway running, and is --admin right?)", err)
	}
	return err
}

func toJSON(es []ledger.Entry) []ledgerapi.EntryJSON {
	out := make([]ledgerapi.EntryJSON, 0, len(es))
	for _, e := range es {
		out = append(out, ledgerapi.EntryToJSON(e))
	}
	return out
}

func (a *App) printJSON(v any) error {
	enc := json.NewEncoder(a.Stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

const timeLayout = "2006-01-02 15:04:05Z"

// printHistory prints one page of a scope's history, newest first, and
// how to list the older entries when there are some.
func (a *App) printHistory(scope string, p ledger.HistoryPage, older bool) {
	es := p.Entries
	if len(es) == 0 {
		if older {
			fmt.Fprintf(a.Stdout, "scope %s: no older entries\n", printable(scope))
			return
		}
		fmt.Fprintf(a.Stdout, "scope %s: no entries (never written, or past retention)\n", printable(scope))
		return
	}
	what := plural(len(es), "entry", "entries")
	if older {
		what = plural(len(es), "older entry", "older entries")
	}
	fmt.Fprintf(a.Stdout, "scope %s: %s, newest first\n\n", printable(scope), what)
	defer func() {
		if p.Next != "" {
			fmt.Fprintf(a.Stdout, "\nolder entries: gateway ledger history %s --before %s\n", shellWord(scope), p.Next)
		}
	}()
	tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "CLAIMED\tSTATE\tINTENT\tPAYLOAD\tATTEMPT\tRUN\tENTRY ID\tNOTE")
	for _, e := range es {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", e.ClaimedAt.UTC().Format(timeLayout), stateText(e, a.Clock()), printable(e.Intent),
			payloadText(e.Payload, 60), e.Attempt, orDash(runText(e)), e.ID, orDash(note(e)))
	}
	_ = tw.Flush()
}

func (a *App) printAmbiguous(es []ledger.Entry) {
	if len(es) == 0 {
		fmt.Fprintln(a.Stdout, "no ambiguous entries")
		return
	}
	tw := tabwriter.NewWriter(a.Stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCOPE\tENTRY ID\tINTENT\tPAYLOAD\tATTEMPT\tCLAIMED\tWHY")
	for _, e := range es {
		why := e.Error
		if _, abandoned := e.ShownState(a.Clock()); abandoned {
			why = "abandoned: never settled within its pending TTL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%s\t%s\n", printable(e.Scope), e.ID, printable(e.Intent), payloadText(e.Payload, 40),
			e.Attempt, e.ClaimedAt.UTC().Format(timeLayout), orDash(printable(why)))
	}
	_ = tw.Flush()
	fmt.Fprintf(a.Stdout, "\n%d ambiguous. Find out whether each happened, then:\n  gateway ledger resolve SCOPE ENTRY_ID --outcome committed|not_applied\n", len(es))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return strconv.Itoa(n) + " " + many
}

// stateText is the entry's state, and for the gateway's own deliver
// entries what the agent answered: a committed delivery may be one the
// agent refused, which an operator must not read as done.
func stateText(e ledger.Entry, now time.Time) string {
	if state, abandoned := e.ShownState(now); abandoned {
		// As every console page shows it (ledger.Entry.ShownState).
		return string(state) + " (abandoned)"
	} else if state != e.State {
		return string(state)
	}
	if e.Intent != ingress.IntentDeliver || e.State != ledger.StateCommitted || len(e.Value) == 0 {
		return string(e.State)
	}
	var v forward.Record
	if json.Unmarshal(e.Value, &v) != nil || v.Outcome == "" {
		return string(e.State)
	}
	if v.AgentStatus > 0 {
		return fmt.Sprintf("%s (agent %d)", printable(v.Outcome), v.AgentStatus)
	}
	return printable(v.Outcome)
}

func runText(e ledger.Entry) string {
	if e.RunID == "" {
		return ""
	}
	if e.Delivery > 0 {
		return printable(e.RunID) + " #" + strconv.Itoa(e.Delivery)
	}
	return printable(e.RunID)
}

func note(e ledger.Entry) string {
	var parts []string
	if e.Error != "" {
		parts = append(parts, e.Error)
	}
	if e.Summary != "" {
		parts = append(parts, "summary: "+e.Summary)
	}
	if e.LateSettle {
		parts = append(parts, "late settle")
	}
	if e.ResolvedBy != "" {
		parts = append(parts, "resolved by "+e.ResolvedBy)
	}
	return printable(strings.Join(parts, "; "))
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// payloadText is the payload's JSON on one line, cut to max runes.
func payloadText(p json.RawMessage, max int) string {
	s := printable(string(p))
	if r := []rune(s); len(r) > max {
		return string(r[:max-1]) + "…"
	}
	return s
}

// printable keeps text from webhooks (scopes, payloads, errors) from
// steering the operator's terminal: control characters become '?'.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || r == unicode.ReplacementChar {
			return '?'
		}
		return r
	}, s)
}

// shellWord is s as one word a POSIX shell reads back as s: bare when
// it is plain, single-quoted otherwise; SCOPE when it holds characters a
// terminal must not be sent (the command is then to be completed by hand).
func shellWord(s string) string {
	if s == "" || printable(s) != s {
		return "SCOPE"
	}
	if strings.IndexFunc(s, func(r rune) bool {
		return !(r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || strings.ContainsRune("_-.:/@%+=,", r)))
	}) < 0 {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
