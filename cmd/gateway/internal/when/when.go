package when

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Parse reads v as a time: RFC 3339 (or, when layouts are given, one of
// them, taken as UTC), or a positive span back from now: a Go duration
// ("90s", "10m", "1h30m") or a whole number of days ("2d"). The error
// names what was expected; the caller adds the field.
func Parse(v string, now time.Time, layouts ...string) (time.Time, error) {
	v = strings.TrimSpace(v)
	for _, layout := range append([]string{time.RFC3339}, layouts...) {
		if t, err := time.Parse(layout, v); err == nil {
			return t.UTC(), nil
		}
	}
	if d, ok := span(v); ok {
		return now.Add(-d).UTC(), nil
	}
	return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time (2006-01-02T15:04:05Z) nor a span back from now (10m, 1h, 2d)", v)
}

func span(v string) (time.Duration, bool) {
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n <= 0 || n > 3650 {
			return 0, false
		}
		return time.Duration(n) * 24 * time.Hour, true
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, false
	}
	return d, true
}
