package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/replyonce/gateway/signatures"
)

// providers lists the providers the gateway verifies, or prints a ready source for one.
func (a *App) providers(args []string) error {
	fs := a.flags("providers")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return helpRequested{fs}
		}
		return usageError{err.Error()}
	}
	switch fs.NArg() {
	case 0:
		return listProviders(a.Stdout)
	case 1:
		return providerSnippet(a.Stdout, fs.Arg(0))
	}
	return usageError{"providers: at most one provider name"}
}

func listProviders(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PROVIDER\tSCHEME\tDEFAULT EVENT ID\tHANDSHAKE")
	for _, name := range signatures.Providers() {
		p, err := signatures.Lookup(name)
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", name, p.Scheme, orDash(firstTemplate(p.EventID)), orDash(p.HandshakeNote))
	}
	return tw.Flush()
}

// firstTemplate shortens an event id rule to its first template, at most 60 characters, "+N"
// saying how many fallbacks follow; `gateway providers NAME` prints them all.
func firstTemplate(ts []string) string {
	if len(ts) == 0 {
		return ""
	}
	s := ts[0]
	if r := []rune(s); len(r) > 60 {
		s = string(r[:59]) + "…"
	}
	if len(ts) > 1 {
		s += fmt.Sprintf(" (+%d)", len(ts)-1)
	}
	return s
}

// providerSnippet prints a source block to paste under sources:, with the secret read from an
// environment variable, and where the provider's dashboard shows that secret.
func providerSnippet(w io.Writer, name string) error {
	p, err := signatures.Lookup(name)
	if err != nil {
		return usageError{fmt.Sprintf("providers: %v (gateway providers lists them)", err)}
	}
	env := strings.ToUpper(strings.NewReplacer("-", "_").Replace(name)) + "_WEBHOOK_SECRET"
	fmt.Fprintf(w, "# %s: %s\n", name, p.Scheme)
	fmt.Fprintf(w, "# Secret: %s\n", p.Secret)
	fmt.Fprintf(w, "# Timestamp: %s\n", p.Timestamp)
	if p.HandshakeNote != "" {
		fmt.Fprintf(w, "# Handshake answered by the gateway: %s\n", p.HandshakeNote)
	}
	if len(p.EventID) == 0 {
		fmt.Fprintln(w, "# No default event id: set event_id to a template that identifies one event.")
	} else {
		fmt.Fprintf(w, "# Default event id: %s\n", strings.Join(p.EventID, ", then "))
	}
	if p.Split != "" {
		fmt.Fprintf(w, "# Batched deliveries: add split: default for one event per element (id %s).\n", strings.Join(p.SplitEventID, ", then "))
	}
	fmt.Fprintf(w, "sources:\n  %s:\n    provider: %s\n    secrets: [${%s}]\n", name, name, env)
	if p.NeedsURL {
		fmt.Fprintf(w, "    url: https://your-host/hooks/%s   # the URL registered with the provider, exactly\n", name)
	}
	if p.NeedsVerifyToken {
		fmt.Fprintf(w, "    verify_token: ${%s_VERIFY_TOKEN}\n", strings.TrimSuffix(env, "_WEBHOOK_SECRET"))
	}
	if name == "hmac" {
		fmt.Fprintln(w, "    hmac: {header: X-Signature, algorithm: sha256, encoding: hex}")
	}
	if len(p.EventID) == 0 {
		fmt.Fprintln(w, "    event_id: \"{json:id}\"   # adjust")
	}
	fmt.Fprintln(w, "    forward: {url: http://127.0.0.1:9000/events}")
	return nil
}
