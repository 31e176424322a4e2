package ledger

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// controlVerification names the control record of the requests refused
// for their signature: per source, the count within one minute of the
// clock, added to by every gateway process, so that a jump is seen as a
// whole however the traffic is spread over instances.
const controlVerification = "verification-failures"

// verificationCount is one source's refusals within Minute.
type verificationCount struct {
	Minute time.Time `json:"minute"`
	Count  int       `json:"count"`
}

// RecordVerificationFailures adds n requests of source refused for their
// signature within the minute that starts at minute (truncated to the
// minute, UTC), and returns that minute's count across every process
// sharing the store. A count of an earlier minute is replaced; n refusals
// of a minute older than the one recorded (a process late to write them)
// are not added, and n alone is returned.
func (sr Sources) RecordVerificationFailures(ctx context.Context, source string, minute time.Time, n int) (int, error) {
	l := sr.l
	if source == "" || n <= 0 {
		return 0, fmt.Errorf("%w: a source and a positive count are required", ErrInvalid)
	}
	minute = minute.UTC().Truncate(time.Minute)
	total := n
	err := l.store.TransactControl(ctx, controlVerification, func(cur []byte) ([]byte, error) {
		set := map[string]verificationCount{}
		if cur != nil && json.Unmarshal(cur, &set) != nil {
			set = map[string]verificationCount{} // corrupt: written afresh
		}
		c := set[source]
		switch {
		case c.Minute.Equal(minute):
			c.Count += n
		case c.Minute.After(minute):
			total = n
			return nil, nil // nothing to write
		default:
			c = verificationCount{Minute: minute, Count: n}
		}
		set[source], total = c, c.Count
		return json.Marshal(set)
	})
	return total, err
}
