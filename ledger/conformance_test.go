package ledger_test

import (
	"testing"

	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/stores/memory"
	"github.com/replyonce/gateway/stores/storetest"
)

// The conformance suite is the ledger's specification; running it here on
// the memory store lets the ledger's own tests (and scripts/mutate, which
// runs only them) hold the decision code to every rule.
func TestConformanceOnMemory(t *testing.T) {
	storetest.Run(t, func(*testing.T) ledger.Store { return memory.New(nil) })
}
