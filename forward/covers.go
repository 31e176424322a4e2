package forward

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
)

// FormatCovers renders HeaderCovers: the number of events a debounced
// delivery stands for, then "; ids=" and their event ids, oldest first,
// comma-separated, each query-escaped (so an id holding a comma or a space
// stays one id). ids may list fewer than count (the ledger keeps the
// newest 100); count is always exact. Example: `5; ids=m1,m2,m3,m4,m5`.
func FormatCovers(count int, ids []string) string {
	var b strings.Builder
	b.WriteString(strconv.Itoa(count))
	if len(ids) > 0 {
		b.WriteString("; ids=")
		for i, id := range ids {
			if i > 0 {
				b.WriteByte(',')
			}
			b.WriteString(url.QueryEscape(id))
		}
	}
	return b.String()
}

// ParseCovers reads HeaderCovers back: the count and the listed ids.
func ParseCovers(v string) (int, []string, error) {
	head, rest, hasIDs := strings.Cut(v, ";")
	n, err := strconv.Atoi(strings.TrimSpace(head))
	if err != nil || n < 1 {
		return 0, nil, fmt.Errorf("forward: %s %q: the count is not a positive number", HeaderCovers, v)
	}
	if !hasIDs {
		return n, nil, nil
	}
	list, ok := strings.CutPrefix(strings.TrimSpace(rest), "ids=")
	if !ok {
		return 0, nil, fmt.Errorf("forward: %s %q: want \"ids=\" after the count", HeaderCovers, v)
	}
	var ids []string
	for _, raw := range strings.Split(list, ",") {
		id, err := url.QueryUnescape(raw)
		if err != nil {
			return 0, nil, fmt.Errorf("forward: %s %q: id %q: %w", HeaderCovers, v, raw, err)
		}
		ids = append(ids, id)
	}
	return n, ids, nil
}
