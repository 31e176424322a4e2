package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
	"github.com/replyonce/gateway/cmd/gateway/internal/suggest"
	"github.com/replyonce/gateway/ingress/field"
)

// Version is set at build time with -ldflags "-X main.Version=...".
var Version = "dev"

// App is the command line with its surroundings injected.
type App struct {
	Stdout, Stderr io.Writer
	LookupEnv      func(string) (string, bool)
	Clock          func() time.Time
	// Ready, when set, receives the public and admin addresses once serve
	// is listening (tests use it to find ports chosen by the kernel).
	Ready func(public, admin string)
	// Reload receives a value on SIGHUP: serve reloads its TLS certificate.
	Reload <-chan struct{}
	// TLSCheck, when set, replaces the tls.check_every ticker: on each
	// value serve reloads the TLS files if they changed (tests).
	TLSCheck <-chan time.Time
	// TLSChecked, when set, is called once each value from TLSCheck has
	// been handled, reloaded or not, so a test can change the files
	// without racing the check (tests).
	TLSChecked func()
	// StoreRetry is the first wait between attempts to open a store that
	// is down at start (default DefaultStoreRetry, doubling to 30 s).
	StoreRetry time.Duration
	// SpanExporter, when set, receives serve's spans instead of the OTLP
	// exporter the configuration names, when tracing is on (tests).
	SpanExporter sdktrace.SpanExporter
}

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

const usage = `usage: gateway <command> [flags]

commands:
  serve   --config FILE       run the gateway
  check   --config FILE       validate a configuration and print its routes
  send    --config FILE --source NAME [--event-id ID] [--body FILE [--content-type T]] [--header K:V] [--to URL]
          [--conversation ID --message TEXT] [--sample TYPE]
                              sign a test event (or a realistic sample) as the provider would and send it
  migrate --config FILE       create the Postgres schema
  health  [--url URL | --config FILE]
                              exit 0 when the gateway's /readyz answers 200
  demo    [--seed N] [--conversations N] [--store memory|bolt] [--store-path FILE]
                              simulated support conversations under injected faults, with and without the gateway
  bench   [--store memory|bolt|postgres|redis] [--n N] [--concurrency C] [--duplicates F] [--repeat R] [--json]
                              gateway vs a bare reverse proxy on loopback: throughput, latency, CPU, duplicates
  ledger  history SCOPE | ambiguous | resolve SCOPE ENTRY_ID --outcome committed|not_applied
          [--admin URL] [--config FILE] [--token T] [--json]
                              inspect and resolve the ledger through the admin API
  events  list [--source S] [--status S] [--scope X] [--since T] | show SOURCE EVENT_ID | replay ... | tail
                              queued and inline events: list, show with every attempt, deliver again, follow live
  sources list | pause|resume NAME
                              every source's health, waiting and dead events; stop or restart dispatching a queued source
  providers [NAME]            list the providers (scheme, default event id, handshake), or print a source for one
  version                     print the version

gateway COMMAND --help describes a command, its flags and an example.`

// Run runs one command.
func (a *App) Run(ctx context.Context, args []string) error {
	if a.LookupEnv == nil {
		a.LookupEnv = os.LookupEnv
	}
	if a.Clock == nil {
		a.Clock = time.Now
	}
	if len(args) == 0 {
		return usageError{usage}
	}
	err := a.dispatch(ctx, args[0], args[1:])
	var h helpRequested
	if errors.As(err, &h) {
		a.printHelp(h.fs)
		return nil
	}
	return err
}

func (a *App) dispatch(ctx context.Context, cmd string, rest []string) error {
	switch cmd {
	case "serve":
		return a.serve(ctx, rest)
	case "check":
		return a.check(rest)
	case "send":
		return a.send(ctx, rest)
	case "migrate":
		return a.migrate(ctx, rest)
	case "ledger":
		return a.ledgerCmd(ctx, rest)
	case "events":
		return a.eventsCmd(ctx, rest)
	case "sources":
		return a.sourcesCmd(ctx, rest)
	case "demo":
		return a.demo(ctx, rest)
	case "bench":
		return a.bench(ctx, rest)
	case "providers":
		return a.providers(rest)
	case "health":
		return a.health(ctx, rest)
	case "version", "--version", "-v":
		if len(rest) > 0 {
			if rest[0] == "-h" || rest[0] == "--help" || rest[0] == "-help" {
				fmt.Fprintln(a.Stdout, "Print the gateway's version.\n\nusage: gateway version")
				return nil
			}
			return usageError{"usage: gateway version (it takes no arguments)"}
		}
		fmt.Fprintln(a.Stdout, "replyonce gateway", Version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprintln(a.Stdout, usage)
		return nil
	}
	return usageError{fmt.Sprintf("unknown command %q%s\n\n%s", cmd, suggest.Hint(cmd, commands), usage)}
}

// commandHelp is what `gateway CMD --help` prints around the flags.
var commandHelp = map[string]struct{ summary, example string }{
	"serve":            {"Run the gateway: verify, deduplicate and forward webhooks.", "gateway serve --config gateway.yaml"},
	"check":            {"Validate a configuration, listing every problem, and print its routes.", "gateway check --config gateway.yaml"},
	"send":             {"Sign a test event as the source's provider would and send it to a running gateway.", "gateway send --config gateway.yaml --source stripe --event-id evt_1"},
	"migrate":          {"Create the PostgreSQL table, sequence and indexes the ledger needs (other stores need none).", "gateway migrate --config gateway.yaml   # store: {kind: postgres, url: ${DATABASE_URL}}"},
	"demo":             {"Simulated support conversations under injected faults, with and without the gateway.", "gateway demo --seed 7 --conversations 200"},
	"bench":            {"Measure the gateway against a bare reverse proxy on loopback.", "gateway bench --store bolt --n 20000 --concurrency 32"},
	"providers":        {"The providers the gateway verifies, or a ready source for one.", "gateway providers stripe"},
	"health":           {"Exit 0 if the gateway at --url answers its readiness check, 1 if not (for container healthchecks).", "gateway health --url http://127.0.0.1:8081/readyz"},
	"ledger history":   {"A scope's effect entries with each outcome, newest first, a page at a time (--limit, --before).", "gateway ledger history 'stripe:evt_1' --limit 20 --config gateway.yaml"},
	"ledger ambiguous": {"Entries whose outcome is unknown and needs a person.", "gateway ledger ambiguous --config gateway.yaml"},
	"ledger resolve":   {"Record what you found about an ambiguous entry.", "gateway ledger resolve SCOPE ENTRY_ID --outcome not_applied --config gateway.yaml"},
	"events list":      {"Queued events, oldest first: every status, delivered included (without --status or with delivered: the scopes that received an event last).", "gateway events list --status dead --source github --config gateway.yaml"},
	"events show":      {"A queued event and every delivery attempt: time, agent status, latency, error, the answer's first bytes.", "gateway events show github 72d3162e-cc78-11e3-81ab-4c9367dc0958 --config gateway.yaml"},
	"events replay":    {"Deliver queued events again, as new deliveries of the same runs: one event, or all matching --status.", "gateway events replay --status dead --source github --config gateway.yaml"},
	"events tail":      {"Each event as it is received and each attempt's outcome as it happens, from every instance sharing the store, until Ctrl-C.", "gateway events tail --source stripe --config gateway.yaml"},
	"events rejected":  {"The last 100 requests this instance refused for a source before the ledger (signature, size, method, event id), newest first, credentials redacted.", "gateway events rejected stripe --config gateway.yaml"},
	"sources pause":    {"Stop dispatching a source's queued events in every instance; it keeps accepting and storing them.", "gateway sources pause github --config gateway.yaml"},
	"sources resume":   {"Dispatch a paused source's queued events again.", "gateway sources resume github --config gateway.yaml"},
}

// commands are the names Run knows, for suggestions.
var commands = []string{"serve", "check", "send", "migrate", "demo", "bench", "health", "ledger", "events", "sources", "version", "help"}

func (a *App) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	// Run prints help, on stdout, for --help; a mistake is reported once,
	// by the error parse returns.
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// helpRequested ends a command whose --help was asked for: Run prints the
// help and exits 0.
type helpRequested struct{ fs *flag.FlagSet }

func (h helpRequested) Error() string { return h.fs.Name() + ": help requested" }

// printHelp writes the command's one-line description, its flags and an
// example.
func (a *App) printHelp(fs *flag.FlagSet) {
	h := commandHelp[fs.Name()]
	fmt.Fprintf(a.Stdout, "%s\n\nusage: gateway %s [flags]\n\nflags:\n", h.summary, fs.Name())
	fs.SetOutput(a.Stdout)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	if h.example != "" {
		fmt.Fprintf(a.Stdout, "\nexample:\n  %s\n", h.example)
	}
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return helpRequested{fs}
		}
		return usageError{fmt.Sprintf("%s: %v (see gateway %s --help)", fs.Name(), err, fs.Name())}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))}
	}
	return nil
}

func (a *App) loadConfig(path string) (config.Config, error) {
	cfg, err := a.parseConfig(path)
	if err != nil {
		return config.Config{}, err
	}
	return cfg, nil
}

// parseConfig reads and parses the file at path: the configuration
// decoded as far as it goes, and its problems wrapped in a configError
// (other errors as they are).
func (a *App) parseConfig(path string) (config.Config, error) {
	if path == "" {
		return config.Config{}, usageError{"--config FILE is required"}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return config.Config{}, fmt.Errorf("read config: %w", err)
	}
	cfg, err := config.Parse(data, a.LookupEnv)
	if err != nil {
		return cfg, configError{path, err}
	}
	return cfg, nil
}

// loadConfigFor loads a configuration for a client command (send,
// events, ledger, health) that reads only some of its fields: problems
// elsewhere in the file, such as the variable of another source's secret
// not being set in this shell, are serve's to report, not this command's.
// A field counts as used when it is, or lies inside, one of uses, and not
// inside one of skip.
func (a *App) loadConfigFor(path string, uses, skip []string) (config.Config, error) {
	cfg, err := a.parseConfig(path)
	var ce configError
	if !errors.As(err, &ce) {
		return cfg, err // nil, or no file to read
	}
	problems := field.List(ce.err)
	if len(problems) == 0 {
		return config.Config{}, err // not YAML at all
	}
	var kept []error
	for _, p := range problems {
		if fieldWithin(p.Field, uses) && !fieldWithin(p.Field, skip) {
			kept = append(kept, p)
		}
	}
	if len(kept) > 0 {
		return config.Config{}, configError{path, errors.Join(kept...)}
	}
	return cfg, nil
}

// fieldWithin reports whether name is one of fields or lies inside one.
func fieldWithin(name string, fields []string) bool {
	for _, f := range fields {
		if name == f || strings.HasPrefix(name, f) && (name[len(f)] == '.' || name[len(f)] == '[') {
			return true
		}
	}
	return false
}

// configError prints every problem of a file on its own line.
type configError struct {
	path string
	err  error
}

func (e configError) Error() string {
	problems := field.List(e.err)
	switch len(problems) {
	case 0:
		return e.path + ": " + e.err.Error()
	case 1:
		return e.path + ": " + problems[0].Error()
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %d problems:", e.path, len(problems))
	for _, p := range problems {
		b.WriteString("\n  " + p.Error())
	}
	return b.String()
}

func (e configError) Unwrap() error { return e.err }

// configOnly runs the flag parsing of commands whose one flag is --config
// and loads that file.
func (a *App) configOnly(name string, args []string) (config.Config, string, error) {
	fs := a.flags(name)
	path := fs.String("config", "", "configuration file")
	if err := parse(fs, args); err != nil {
		return config.Config{}, "", err
	}
	cfg, err := a.loadConfig(*path)
	return cfg, *path, err
}

func (a *App) check(args []string) error {
	cfg, path, err := a.configOnly("check", args)
	if err != nil {
		return err
	}
	sources, err := cfg.BuildSources()
	if err != nil {
		return configError{path, err}
	}
	admin := cfg.Admin.Listen
	if admin == "" {
		admin = "disabled"
	}
	fmt.Fprintf(a.Stdout, "%s: ok\nlisten %s, admin %s, store %s\n", path, cfg.Listen, admin, cfg.Store)
	for _, s := range sources {
		fmt.Fprintln(a.Stdout, "  "+s.Describe())
	}
	for _, w := range cfg.Warnings() {
		fmt.Fprintln(a.Stderr, "warning: "+w)
	}
	return a.checkTracing(cfg.Tracing)
}
