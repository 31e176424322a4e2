package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
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
}

type usageError struct{ msg string }

func (u usageError) Error() string { return u.msg }

const usage = `usage: gateway <command> [flags]

commands:
  serve   --config FILE       run the gateway
  check   --config FILE       validate a configuration and print its routes
  send    --config FILE --source NAME [--event-id ID] [--body FILE] [--to URL]
          [--conversation ID --message TEXT]
                              sign a test event as the provider would and send it
  migrate --config FILE       create the Postgres schema
  demo    [--seed N] [--conversations N] [--store memory|bolt] [--store-path FILE]
                              simulated support conversations under injected faults, with and without the gateway
  bench   [--store memory|bolt|postgres|redis] [--n N] [--concurrency C] [--duplicates F] [--repeat R] [--json]
                              gateway vs a bare reverse proxy on loopback: throughput, latency, CPU, duplicates
  ledger  history SCOPE | ambiguous | resolve SCOPE ENTRY_ID --outcome committed|not_applied
          [--admin URL] [--config FILE] [--token T] [--json]
                              inspect and resolve the ledger through the admin API
  events  list [--source S] [--status S] [--scope X] [--since T] | show SOURCE EVENT_ID | replay ...
                              queued events: list, show with every attempt, deliver again
  sources pause|resume NAME   stop or restart dispatching a queued source (it keeps accepting)
  version                     print the version`

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
	cmd, rest := args[0], args[1:]
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
	case "version", "--version", "-v":
		fmt.Fprintln(a.Stdout, "replyonce gateway", Version)
		return nil
	case "help", "-h", "--help":
		fmt.Fprintln(a.Stdout, usage)
		return nil
	}
	return usageError{fmt.Sprintf("unknown command %q\n\n%s", cmd, usage)}
}

func (a *App) flags(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(a.Stderr)
	return fs
}

func parse(fs *flag.FlagSet, args []string) error {
	if err := fs.Parse(args); err != nil {
		return usageError{err.Error()}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))}
	}
	return nil
}

func (a *App) loadConfig(path string) (config.Config, error) {
	if path == "" {
		return config.Config{}, usageError{"--config FILE is required"}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return config.Config{}, fmt.Errorf("read config: %w", err)
	}
	cfg, err := config.Parse(data, a.LookupEnv)
	if err != nil {
		return config.Config{}, fmt.Errorf("%s: %w", path, err)
	}
	return cfg, nil
}

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
		return err
	}
	fmt.Fprintf(a.Stdout, "%s: ok\nlisten %s, admin %s, store %s\n", path, cfg.Listen, cfg.Admin.Listen, cfg.Store.Kind)
	for _, s := range sources {
		fmt.Fprintln(a.Stdout, "  "+s.Describe())
	}
	return nil
}
