package config

import (
	"sort"

	"github.com/replyonce/gateway/ledger"
)

// validateCaps checks ledger.caps: each cap limits something, and its
// window fits in the retention, which is how long the ledger remembers the
// effects it counts.
func (c Config) validateCaps(bad func(field, format string, args ...any)) {
	retention := c.Ledger.Retention
	if retention <= 0 {
		retention = ledger.DefaultRetention
	}
	intents := make([]string, 0, len(c.Ledger.Caps))
	for intent := range c.Ledger.Caps {
		intents = append(intents, intent)
	}
	sort.Strings(intents)
	for _, intent := range intents {
		cp := c.Ledger.Caps[intent]
		field := "ledger.caps." + intent
		if intent == "" {
			bad("ledger.caps", "an intent name is empty")
			continue
		}
		if cp.Max < 1 {
			bad(field+".max", "must be at least 1 (got %d)", cp.Max)
		}
		switch {
		case cp.Window <= 0:
			bad(field+".window", "must be positive (got %s)", cp.Window)
		case cp.Window > retention:
			bad(field+".window", "%s exceeds ledger.retention (%s): effects older than the retention are forgotten and would not be counted", cp.Window, retention)
		}
	}
}
