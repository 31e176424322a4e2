package storetest

import (
	"time"

	"github.com/replyonce/gateway/internal/testkit"
)

// Clock is the shared manual clock (testkit.Clock), for driving TTLs,
// leases and retention; the name stays for the suites that use it.
type Clock = testkit.Clock

// NewClock returns a clock standing at start.
func NewClock(start time.Time) *Clock { return testkit.NewClock(start) }
