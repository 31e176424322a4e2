package ledgerapi

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// A page of deliveries across every scope, newest first, whatever their
// status: a walk down the ledger's received index. Its cursor names the
// index position and, when a page ended inside a scope, the last event
// listed from it, so the next page neither skips nor repeats one.

// recentCursorTag starts the cursors of the walk, so a cursor of the
// per-scope listing is never taken for one.
const recentCursorTag = "r1"

func recentCursor(c *ledger.DeliveryCursor) string {
	item := ""
	if !c.ReceivedAt.IsZero() {
		item = c.ReceivedAt.UTC().Format(time.RFC3339Nano)
	}
	// The scope goes last: it is the only part that may hold the separator.
	raw := strings.Join([]string{recentCursorTag, c.At.UTC().Format(time.RFC3339Nano), item, c.EntryID, c.Scope}, "|")
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func parseRecentCursor(s string) (*ledger.DeliveryCursor, error) {
	bad := fmt.Errorf("%w: cursor %q is not one this API gave", ledger.ErrInvalid, s)
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return nil, bad
	}
	parts := strings.SplitN(string(b), "|", 5)
	if len(parts) != 5 || parts[0] != recentCursorTag {
		return nil, bad
	}
	c := &ledger.DeliveryCursor{ScopeAt: ledger.ScopeAt{Scope: parts[4]}, EntryID: parts[3]}
	if c.At, err = time.Parse(time.RFC3339Nano, parts[1]); err != nil {
		return nil, bad
	}
	if parts[2] != "" {
		if c.ReceivedAt, err = time.Parse(time.RFC3339Nano, parts[2]); err != nil {
			return nil, bad
		}
	}
	return c, nil
}

func (s *server) recentPage(r *http.Request, lf ledger.DeliveryFilter, size int) (any, error) {
	var after *ledger.DeliveryCursor
	if v := r.URL.Query().Get("cursor"); v != "" {
		var err error
		if after, err = parseRecentCursor(v); err != nil {
			return nil, err
		}
	}
	p, err := s.l.Views().RecentDeliveries(r.Context(), lf, after, size)
	if err != nil {
		return nil, err
	}
	out := PageJSON{Deliveries: itemsJSON(p.Items).Deliveries, Scanned: p.Scanned, Partial: p.Partial}
	if p.Next != nil {
		out.Next = recentCursor(p.Next)
	}
	return out, nil
}
