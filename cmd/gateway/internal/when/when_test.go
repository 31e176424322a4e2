package when

import (
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	now := time.Date(2026, 12, 4, 10, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"2026-12-01T08:00:00Z":      time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC),
		"2026-12-01T09:00:00+01:00": time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC),
		"10m":                       now.Add(-10 * time.Minute),
		"1h":                        now.Add(-time.Hour),
		" 1h30m ":                   now.Add(-90 * time.Minute),
		"2d":                        now.Add(-48 * time.Hour),
	} {
		got, err := Parse(in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	if got, err := Parse("2026-12-01T08:00", now, "2006-01-02T15:04"); err != nil || !got.Equal(time.Date(2026, 12, 1, 8, 0, 0, 0, time.UTC)) {
		t.Errorf("layout: %v, %v", got, err)
	}
	for _, bad := range []string{"", "yesterday", "-1h", "0s", "1.5d", "0d", "2026-12-01"} {
		if _, err := Parse(bad, now); err == nil || !strings.Contains(err.Error(), "span back from now") {
			t.Errorf("Parse(%q): %v, want an error naming both forms", bad, err)
		}
	}
}
