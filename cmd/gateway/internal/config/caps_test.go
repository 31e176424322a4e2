package config

import (
	"strings"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// ledger.caps reaches the ledger as given; there is no cap by default.
func TestCapsReachTheLedger(t *testing.T) {
	vars := lookup(map[string]string{"SECRET": "s", "TIMEOUT": "1s"})
	def, err := Parse([]byte(base), vars)
	if err != nil {
		t.Fatal(err)
	}
	if caps := def.Ledger.Caps; caps != nil {
		t.Fatalf("default caps %v, want none", caps)
	}
	cfg, err := Parse([]byte("ledger: {caps: {reply: {max: 3, window: 5m}}}\n"+base), vars)
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	got := cfg.Ledger.Caps
	if len(got) != 1 || got["reply"] != (ledger.Cap{Max: 3, Window: 5 * time.Minute}) {
		t.Fatalf("caps %v, want reply: 3 in 5m", got)
	}
}

// A bad cap is refused at start, naming its field.
func TestCapsValidation(t *testing.T) {
	vars := lookup(map[string]string{"SECRET": "s", "TIMEOUT": "1s"})
	for _, tc := range []struct{ ledger, want string }{
		{"{caps: {reply: {max: 0, window: 5m}}}", "ledger.caps.reply.max: must be at least 1 (got 0)"},
		{"{caps: {reply: {max: -2, window: 5m}}}", "ledger.caps.reply.max: must be at least 1 (got -2)"},
		{"{caps: {reply: {max: 3}}}", "ledger.caps.reply.window: must be positive (got 0s)"},
		{"{caps: {reply: {max: 3, window: -1m}}}", "ledger.caps.reply.window: must be positive (got -1m0s)"},
		{"{retention: 1h, caps: {reply: {max: 3, window: 2h}}}", "ledger.caps.reply.window: 2h0m0s exceeds ledger.retention (1h0m0s)"},
		{"{caps: {reply: {max: 3, windw: 5m}}}", "ledger.caps.reply.windw: unknown field, did you mean `window`?"},
		{"{caps: {reply: {max: 3, window: 5}}}", "ledger.caps.reply.window: 5 has no unit"},
	} {
		cfg, err := Parse([]byte("ledger: "+tc.ledger+"\n"+base), vars)
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("ledger: %s: error %v, want it to contain %q", tc.ledger, err, tc.want)
		}
	}
}
