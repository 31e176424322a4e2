package console

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/replyonce/gateway/ingress"
)

// rejectedRow is one refused request as the Rejected page shows it. Every
// field is text that html/template escapes: a forged request's headers and
// body are shown, never interpreted.
type rejectedRow struct {
	When, Reason, Remote, Method string
	Status                       int
	Headers                      []string // "Name: value", sorted; credentials already redacted
	Body                         string   // the kept start of the body, when it is text
	BodyNote                     string   // what the body was when it is not shown as text
	Size                         int64
	Truncated                    bool
}

func rejectedRowOf(r ingress.Rejected) rejectedRow {
	row := rejectedRow{When: stamp(r.At), Reason: r.Reason, Remote: r.Remote, Method: r.Method, Status: r.Status, Size: r.BodySize,
		Truncated: r.Truncated || int64(len(r.Body)) < r.BodySize}
	for k, vs := range r.Header {
		for _, v := range vs {
			row.Headers = append(row.Headers, k+": "+v)
		}
	}
	sort.Strings(row.Headers)
	switch {
	case len(r.Body) == 0 && r.BodySize > 0:
		row.BodyNote = "not read (" + strconv.FormatInt(r.BodySize, 10) + " bytes announced)"
	case len(r.Body) == 0:
		row.BodyNote = "empty"
	case utf8.Valid(r.Body) || utf8.Valid(trimPartialRune(r.Body)):
		row.Body = strings.ToValidUTF8(string(r.Body), "")
	default:
		row.BodyNote = strconv.Itoa(len(r.Body)) + " bytes, not text"
	}
	return row
}

// trimPartialRune drops a rune cut in half at the end of a kept prefix.
func trimPartialRune(b []byte) []byte {
	for i := 0; i < utf8.UTFMax && len(b) > 0; i++ {
		if utf8.Valid(b) {
			return b
		}
		b = b[:len(b)-1]
	}
	return b
}

// rejected lists what this instance refused for one source before the
// ledger, newest first; without a source, each source with its count.
func (c *Console) rejected(w http.ResponseWriter, r *http.Request, s *session) error {
	if c.rejectedOf == nil {
		return &httpError{status: http.StatusNotFound, msg: "This console has no list of rejected requests."}
	}
	source := r.URL.Query().Get("source")
	type sourceCount struct {
		Name  string
		Count int
		Link  string
	}
	var counts []sourceCount
	for _, name := range c.sources {
		list, err := c.rejectedOf(r.Context(), name)
		if err != nil {
			return err
		}
		counts = append(counts, sourceCount{Name: name, Count: len(list), Link: link("/rejected", "source", name)})
	}
	data := map[string]any{"Source": source, "Sources": counts, "Kept": ingress.RejectedKept, "BodyKept": ingress.RejectedBodyKept}
	if source != "" {
		known := false
		for _, n := range c.sources {
			known = known || n == source
		}
		if !known {
			return &httpError{status: http.StatusNotFound, msg: "There is no source " + strconv.Quote(source) + "."}
		}
		list, err := c.rejectedOf(r.Context(), source)
		if err != nil {
			return err
		}
		rows := make([]rejectedRow, 0, len(list))
		for _, rq := range list {
			rows = append(rows, rejectedRowOf(rq))
		}
		data["Rows"] = rows
	}
	title := "Rejected requests"
	if source != "" {
		title += " · " + source
	}
	c.render(w, r, s, http.StatusOK, "rejected", title, data)
	return nil
}
