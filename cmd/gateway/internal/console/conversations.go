package console

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// conversationRow is one line of the Conversations page.
type conversationRow struct {
	ledgerapi.ConversationJSON
	Link, EventLink, When, Class string
}

// conversations lists recent conversations newest first (GET
// /v1/conversations), filtered by scope prefix and source, each linking to
// its timeline.
func (c *Console) conversations(w http.ResponseWriter, r *http.Request, s *session) error {
	q := r.URL.Query()
	prefix, source := strings.TrimSpace(q.Get("prefix")), strings.TrimSpace(q.Get("source"))
	page, err := c.api.Conversations(r.Context(), ledgerapi.ConversationsRequest{Prefix: prefix, Source: source, Size: pageSize, Cursor: q.Get("cursor")})
	if err != nil {
		return err
	}
	rows := make([]conversationRow, 0, len(page.Conversations))
	for _, cv := range page.Conversations {
		ev := eventRef{Scope: cv.Scope, Source: cv.Last.Source, EventID: cv.Last.EventID}
		rows = append(rows, conversationRow{ConversationJSON: cv, Link: link("/scope", "scope", cv.Scope), EventLink: ev.Link(),
			When: stamp(cv.LastAt), Class: statusClass(cv.Last.Status)})
	}
	data := map[string]any{"Prefix": prefix, "Source": source, "Sources": c.sources, "Rows": rows, "Page": page,
		"Scanned": strconv.Itoa(page.Scanned)}
	if page.Next != "" {
		data["NextLink"] = link("/conversations", "prefix", prefix, "source", source, "cursor", page.Next)
	}
	c.render(w, r, s, http.StatusOK, "conversations", "Conversations", data)
	return nil
}
