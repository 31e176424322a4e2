package demo

import (
	"fmt"
	"io"
	"strings"
)

// ANSI styles.
const (
	ansiBold  = "1"
	ansiDim   = "2"
	ansiRed   = "1;31"
	ansiGreen = "1;32"
)

type painter bool

func (p painter) paint(style, s string) string {
	if !p {
		return s
	}
	return "\x1b[" + style + "m" + s + "\x1b[0m"
}

// Colour decides whether to colour output written to out. FORCE_COLOR
// set keeps colour even when piped (except FORCE_COLOR=0 or false, which
// turn it off); otherwise a non-empty NO_COLOR turns it off; otherwise
// colour goes only to a terminal. FORCE_COLOR wins over NO_COLOR because it
// is the more specific request, usually made for one command, where
// NO_COLOR is usually a standing preference.
func Colour(out io.Writer, lookupEnv func(string) (string, bool)) bool {
	if v, ok := lookupEnv("FORCE_COLOR"); ok {
		return v != "0" && !strings.EqualFold(v, "false")
	}
	if v, ok := lookupEnv("NO_COLOR"); ok && v != "" {
		return false
	}
	return isTerminal(out)
}

// Write prints the report, in colour when colour is true.
func (r *Report) Write(out io.Writer, colour bool) error {
	p := painter(colour)
	var b strings.Builder
	fmt.Fprintf(&b, "%s\n", p.paint(ansiBold, fmt.Sprintf("replyonce gateway demo: %d simulated support conversations under injected faults", r.Conversations)))
	fmt.Fprintf(&b, "%s\n", p.paint(ansiDim, fmt.Sprintf("  seed %d, %s store, simulated time", r.Seed, r.Store)))
	fmt.Fprintf(&b, "  without: %s\n", r.Without.Faults)
	fmt.Fprintf(&b, "  with:    %s\n\n", r.With.Faults)

	fmt.Fprintf(&b, "  %s\n", p.paint(ansiBold, fmt.Sprintf("%-21s %8s %8s %11s %11s", "", "messages", "replies", "duplicates", "unanswered")))
	row := func(name string, o Outcome, good bool) {
		dup := fmt.Sprintf("%11d", o.Duplicates)
		un := fmt.Sprintf("%11d", o.Unanswered)
		switch {
		case o.Duplicates > 0:
			dup = p.paint(ansiRed, dup)
		case good:
			dup = p.paint(ansiGreen, dup)
		}
		switch {
		case o.Unanswered > 0:
			un = p.paint(ansiRed, un)
		case good:
			un = p.paint(ansiGreen, un)
		}
		fmt.Fprintf(&b, "  %-21s %8d %8d %s %s\n", name, o.Messages, o.Replies, dup, un)
	}
	row("without the gateway", r.Without, false)
	row("with the gateway", r.With, true)

	s := r.Stats
	fmt.Fprintf(&b, "\n  %s\n", p.paint(ansiBold, "what the gateway and the ledger did"))
	for _, l := range []struct {
		what string
		n    int
	}{
		{"repeat deliveries answered from the ledger, not forwarded", s.Repeats},
		{"deliveries told 503: the same event was in flight", s.InFlight},
		{"deliveries told 503: the agent crashed or asked for a retry", s.Retried},
		{"replies refused: superseded by a newer run", s.Superseded},
		{"replies refused: conversation_changed, re-read and narrowed", s.ConversationChanged},
		{"sends of unknown outcome settled by the reconciler", s.Reconciled},
		{"replies taken over by a fresh run after their own failed", s.Takeovers},
	} {
		fmt.Fprintf(&b, "    %-60s %5d\n", l.what, l.n)
	}
	b.WriteString(p.paint(ansiDim, "  A reply to a burst answers every message in it, so replies can be fewer than messages.") + "\n")
	for _, m := range r.With.Missing {
		fmt.Fprintf(&b, "  %s was not answered with the gateway: %s.\n", m.Message, m.Why)
	}
	r.writeBursts(&b, p)
	b.WriteString("\n")
	if n := r.With.Duplicates; n > 0 {
		fmt.Fprintf(&b, "  %s\n", p.paint(ansiRed, fmt.Sprintf("%d duplicate replies got through with the gateway.", n)))
	} else {
		fmt.Fprintf(&b, "  %s\n", p.paint(ansiGreen, "No customer message was answered twice with the gateway."))
	}
	_, err := io.WriteString(out, b.String())
	return err
}

// writeBursts prints the customer-burst scenario's table.
func (r *Report) writeBursts(b *strings.Builder, p painter) {
	br := r.Bursts
	fmt.Fprintf(b, "\n  %s\n", p.paint(ansiBold, fmt.Sprintf("customer bursts: %d conversations, %d messages typed 0.2 to 0.9 s apart, %d webhooks sent twice",
		br.Conversations, br.Messages, br.Copies)))
	fmt.Fprintf(b, "  %s\n", p.paint(ansiBold, fmt.Sprintf("%-24s %8s %8s %11s %11s %6s", "", "messages", "replies", "duplicates", "unanswered", "turns")))
	row := func(name string, o BurstOutcome) {
		dup := fmt.Sprintf("%11d", o.Duplicates)
		if o.Duplicates > 0 {
			dup = p.paint(ansiRed, dup)
		}
		un := fmt.Sprintf("%11d", o.Unanswered)
		if o.Unanswered > 0 {
			un = p.paint(ansiRed, un)
		}
		fmt.Fprintf(b, "  %-24s %8d %8d %s %s %6d\n", name, o.Messages, o.Replies, dup, un, o.Turns)
	}
	row("without the gateway", br.Without)
	row("with inline", br.Inline)
	row("with queued + debounce", br.Debounced)
	b.WriteString(p.paint(ansiDim, fmt.Sprintf("  A turn is one run of the agent's model. Debounce (quiet %s, max_wait %s) holds a burst and forwards its newest", burstQuiet, burstMaxWait)) + "\n")
	b.WriteString(p.paint(ansiDim, "  message once, with Replyonce-Covers; the agent answers the whole burst in one reply.") + "\n")
}
