package console_test

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/replyonce/gateway/ledger"
)

// momentRE finds the timeline's lines: kind, status and the whole line.
var momentRE = regexp.MustCompile(`(?s)<li class="moment" data-kind="([^"]*)" data-status="([^"]*)">(.*?)</li>`)

type line struct{ kind, status, html string }

func timelineOf(t *testing.T, e *env, scope string) []line {
	t.Helper()
	resp, page := e.get(t, "/scope?scope="+scope)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("timeline of %s: %d", scope, resp.StatusCode)
	}
	var out []line
	for _, m := range momentRE.FindAllStringSubmatch(page, -1) {
		out = append(out, line{m[1], m[2], m[3]})
	}
	return out
}

// A debounced burst of five: the four folded into the fifth read as
// "folded into" it, neutrally, never as a failure; the fifth's every
// attempt is listed with the number the event page gives it, and no line
// mixes an entry's claim attempts with the run's delivery numbers.
func TestTimelineFoldedEventsAndEveryAttempt(t *testing.T) {
	e := newEnv(t, "", false)
	ctx := context.Background()
	const scope = "chat:burst"
	for _, id := range []string{"m1", "m2", "m3", "m4", "m5"} {
		_, err := e.ledger.Queue().Enqueue(ctx, ledger.EnqueueRequest{
			Event:    ledger.QueuedEvent{Source: "gh", EventID: id, Scope: scope, Body: []byte(`{}`), ReceivedAt: e.clock.Now()},
			Run:      ledger.RunOptions{RunID: "gh:" + id, Mode: ledger.ModeIndependent},
			Claim:    ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "deliver", Payload: map[string]string{"source": "gh", "eventId": id}}, PendingTTL: time.Minute},
			Debounce: ledger.Debounce{Quiet: time.Second},
		})
		if err != nil {
			t.Fatal(err)
		}
		e.clock.Add(100 * time.Millisecond)
	}
	e.clock.Add(2 * time.Second)
	// The covering delivery fails twice, then goes through.
	for i, status := range []ledger.DeliveryStatus{ledger.DeliveryQueued, ledger.DeliveryQueued, ledger.DeliveryDelivered} {
		q, err := e.ledger.Queue().FindDelivery(ctx, scope, "gh", "m5")
		if err != nil {
			t.Fatal(err)
		}
		tk, err := e.ledger.Queue().TakeDelivery(ctx, scope, q.EntryID, time.Minute)
		if err != nil || !tk.OK {
			t.Fatalf("take %d: %+v %v", i, tk, err)
		}
		rec := ledger.AttemptRecord{AgentStatus: 503, Outcome: "retry", Error: "agent answered 503"}
		if status == ledger.DeliveryDelivered {
			rec = ledger.AttemptRecord{AgentStatus: 200, Outcome: "delivered"}
		}
		if _, err := e.ledger.Queue().FinishDelivery(ctx, ledger.Finish{Taken: tk, Status: status, NextAt: e.clock.Now(), Record: rec}); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(time.Second)
	}
	lines := timelineOf(t, e, scope)
	var folded, attempts []string
	for _, l := range lines {
		switch l.kind {
		case "folded":
			folded = append(folded, l.html)
			if strings.Contains(l.html, "st-bad") || strings.Contains(l.html, "st-fenced") || !strings.Contains(l.html, "folded into m5") {
				t.Errorf("a folded event's line is not a neutral \"folded into m5\": %s", l.html)
			}
		case "attempt":
			attempts = append(attempts, l.html)
		case "not applied", "claim":
			t.Errorf("a delivery's own claim shows on the timeline as %q: %s", l.kind, l.html)
		}
		if l.kind == "event received" && l.status == "coalesced" && strings.Contains(l.html, "st-bad") {
			t.Errorf("a coalesced event is red: %s", l.html)
		}
		if strings.Contains(l.html, "delivery ") && strings.Contains(l.html, "attempt ") {
			t.Errorf("a line mixes attempt and delivery numbers: %s", l.html)
		}
	}
	if len(folded) != 4 {
		t.Fatalf("folded lines = %d, want 4 (m1 to m4)", len(folded))
	}
	if len(attempts) != 3 {
		t.Fatalf("attempt lines = %d, want the covering event's 3", len(attempts))
	}
	for i, want := range []string{"attempt 1, agent answered 503", "attempt 2, agent answered 503", "attempt 3, agent answered 200"} {
		if !strings.Contains(attempts[i], want) {
			t.Errorf("attempt line %d lacks %q: %s", i+1, want, attempts[i])
		}
	}
	if !strings.Contains(attempts[2], `data-status="delivered"`) && !strings.Contains(attempts[2], "delivered") {
		t.Errorf("the last attempt does not say delivered: %s", attempts[2])
	}
}

// An event whose waiting delivery a newer run superseded ends as a neutral
// "superseded by run", never as a red "not applied".
func TestTimelineSupersededEvent(t *testing.T) {
	e := newEnv(t, "", false)
	ctx := context.Background()
	const scope = "chat:sup"
	for _, id := range []string{"s1", "s2"} {
		_, err := e.ledger.Queue().Enqueue(ctx, ledger.EnqueueRequest{
			Event: ledger.QueuedEvent{Source: "gh", EventID: id, Scope: scope, Body: []byte(`{}`), ReceivedAt: e.clock.Now(), ContextAt: e.clock.Now()},
			Run:   ledger.RunOptions{RunID: "gh:" + id, Mode: ledger.ModeSupersede, ContextAt: e.clock.Now()},
			Claim: ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "deliver", Payload: map[string]string{"source": "gh", "eventId": id}}, PendingTTL: time.Minute},
		})
		if err != nil {
			t.Fatal(err)
		}
		e.clock.Add(time.Second)
	}
	q, err := e.ledger.Queue().FindDelivery(ctx, scope, "gh", "s1")
	if err != nil || q.Status != ledger.DeliverySuperseded {
		t.Fatalf("s1: %s %v, want superseded", q.Status, err)
	}
	var seen bool
	for _, l := range timelineOf(t, e, scope) {
		if l.kind == "superseded" {
			seen = true
			if !strings.Contains(l.html, "superseded by run gh:s2") || strings.Contains(l.html, "st-bad") {
				t.Errorf("the superseded line is not a neutral \"superseded by run gh:s2\": %s", l.html)
			}
		}
		if l.kind == "not applied" || l.kind == "claim" {
			t.Errorf("a delivery's own claim shows as %q: %s", l.kind, l.html)
		}
	}
	if !seen {
		t.Fatal("no superseded line on the timeline")
	}
}

// An attempt abandoned past its pending TTL is listed as ambiguous on the
// Ambiguous page; its resolve page and the timeline say the same, with
// "abandoned", never "pending".
func TestAbandonedEntryReadsAmbiguousEverywhere(t *testing.T) {
	e := newEnv(t, "", false)
	ctx := context.Background()
	c, err := e.ledger.Claim(ctx, ledger.ClaimRequest{Key: ledger.Key{Scope: "order:7", Intent: "refund", Payload: map[string]int{"cents": 500}}, PendingTTL: time.Minute})
	if err != nil || !c.Acquired() {
		t.Fatalf("claim: %+v %v", c, err)
	}
	e.clock.Add(2 * time.Minute)
	_, page := e.get(t, "/ambiguous")
	if !strings.Contains(page, `data-entry="`+c.EntryID+`"`) {
		t.Fatal("the abandoned entry is not on the Ambiguous page")
	}
	row := page[strings.Index(page, `data-entry="`+c.EntryID+`"`):]
	row = row[:strings.Index(row, "</tr>")]
	if !strings.Contains(row, ">ambiguous<") || !strings.Contains(row, ">abandoned<") {
		t.Fatalf("the Ambiguous page's row does not say ambiguous, abandoned: %s", row)
	}
	_, page = e.get(t, "/ambiguous/resolve?scope=order:7&entry_id="+c.EntryID+"&outcome=not_applied")
	if !strings.Contains(page, `id="entry-state">ambiguous<`) || !strings.Contains(page, `id="entry-abandoned"`) || strings.Contains(page, ">pending<") {
		t.Fatalf("the resolve page does not say ambiguous, abandoned:\n%s", page)
	}
	var seen bool
	for _, l := range timelineOf(t, e, "order:7") {
		if l.status == "pending" {
			t.Errorf("the timeline says pending: %s", l.html)
		}
		seen = seen || l.kind == "ambiguous" && strings.Contains(l.html, "abandoned")
	}
	if !seen {
		t.Fatal("the timeline has no ambiguous, abandoned line")
	}
}

// The event page draws its attempts on one time axis, one mark per
// attempt coloured by outcome, with the wait before each written under it.
func TestEventPagePicturesItsAttempts(t *testing.T) {
	e := newEnv(t, "", false)
	ctx := context.Background()
	const scope = "gh:pic"
	_, err := e.ledger.Queue().Enqueue(ctx, ledger.EnqueueRequest{
		Event: ledger.QueuedEvent{Source: "gh", EventID: "pic", Scope: scope, Body: []byte(`{}`), ReceivedAt: e.clock.Now()},
		Run:   ledger.RunOptions{RunID: scope, Mode: ledger.ModeIndependent},
		Claim: ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "deliver", Payload: map[string]string{"source": "gh", "eventId": "pic"}}, PendingTTL: time.Minute},
	})
	if err != nil {
		t.Fatal(err)
	}
	waits := []time.Duration{2 * time.Second, 30 * time.Second, 90 * time.Second}
	for i, status := range []ledger.DeliveryStatus{ledger.DeliveryQueued, ledger.DeliveryQueued, ledger.DeliveryDelivered} {
		e.clock.Add(waits[i])
		q, err := e.ledger.Queue().FindDelivery(ctx, scope, "gh", "pic")
		if err != nil {
			t.Fatal(err)
		}
		tk, err := e.ledger.Queue().TakeDelivery(ctx, scope, q.EntryID, time.Minute)
		if err != nil || !tk.OK {
			t.Fatalf("take %d: %v", i, err)
		}
		rec := ledger.AttemptRecord{AgentStatus: 503, Outcome: "retry"}
		if status == ledger.DeliveryDelivered {
			rec = ledger.AttemptRecord{AgentStatus: 200, Outcome: "delivered"}
		}
		if _, err := e.ledger.Queue().FinishDelivery(ctx, ledger.Finish{Taken: tk, Status: status, NextAt: e.clock.Now(), Record: rec}); err != nil {
			t.Fatal(err)
		}
	}
	_, page := e.get(t, "/event?source=gh&event_id=pic&scope="+scope)
	i := strings.Index(page, `<svg id="attempt-picture"`)
	if i < 0 {
		t.Fatal("the event page has no picture of its attempts")
	}
	svg := page[i : i+strings.Index(page[i:], "</svg>")]
	marks := regexp.MustCompile(`<g class="mark" data-n="(\d)"><title>([^<]*)</title><rect class="([a-z-]+)"`).FindAllStringSubmatch(svg, -1)
	if len(marks) != 3 {
		t.Fatalf("the picture has %d attempt marks, want 3:\n%s", len(marks), svg)
	}
	for i, want := range []struct{ class, wait string }{{"st-bad", "2.0 s"}, {"st-bad", "30.0 s"}, {"st-ok", "1 min 30 s"}} {
		if marks[i][1] != strconv.Itoa(i+1) || marks[i][3] != want.class || !strings.Contains(marks[i][2], "after a wait of "+want.wait) {
			t.Errorf("mark %d: n=%s class=%s title=%q, want class %s after %s", i+1, marks[i][1], marks[i][3], marks[i][2], want.class, want.wait)
		}
	}
	// The waits wide enough to label are written under the picture.
	if !strings.Contains(svg, ">1 min 30 s</text>") || !strings.Contains(svg, ">30.0 s</text>") {
		t.Errorf("the waits are not written under the picture:\n%s", svg)
	}
}

// hrefOf is the target of the page's link with id, unescaped; empty
// when there is none.
func hrefOf(t *testing.T, page, id string) string {
	t.Helper()
	m := regexp.MustCompile(`<a href="([^"]*)" id="` + id + `"`).FindStringSubmatch(page)
	if m == nil {
		return ""
	}
	return strings.ReplaceAll(m[1], "&amp;", "&")
}

// A long conversation's page shows its newest effect entries and links
// to the older ones, a page at a time: following the links shows every
// entry once, the older pages their claims and outcomes only.
func TestConversationPagesThroughEntries(t *testing.T) {
	e := newEnv(t, "", false)
	ctx := context.Background()
	const scope, n = "chat:long", 250
	for i := range n {
		if _, err := e.ledger.Once(ctx, ledger.Key{Scope: scope, Intent: fmt.Sprintf("r%03d", i), Payload: i},
			func(context.Context, ledger.Call) (any, error) { return "ok", nil }); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(time.Second)
	}
	seen := map[string]int{}
	walkConversation(t, e, scope, "", n, func(page int, body string, m []string) {
		if m[1] == "claim" {
			seen[regexp.MustCompile(`r\d{3}`).FindString(m[3])]++
		}
	}, func(m []string) bool { return m[1] == "claim" })
	for i := range n {
		if k := fmt.Sprintf("r%03d", i); seen[k] != 1 {
			t.Errorf("entry %s shown %d times", k, seen[k])
		}
	}
}

// A long conversation's pages show each event received once, on the page
// whose span of time it arrived in, with its run: the newest page does not
// carry the whole conversation's events.
func TestConversationPagesThroughEvents(t *testing.T) {
	e := newEnv(t, "", false)
	ctx := context.Background()
	const scope, n = "chat:events", 250
	for i := range n {
		id := fmt.Sprintf("m%03d", i)
		q, err := e.ledger.Queue().Enqueue(ctx, ledger.EnqueueRequest{
			Event: ledger.QueuedEvent{Source: "gh", EventID: id, Scope: scope, Body: []byte(`{}`), ReceivedAt: e.clock.Now()},
			Run:   ledger.RunOptions{RunID: "gh:" + id, Mode: ledger.ModeIndependent},
			Claim: ledger.ClaimRequest{Key: ledger.Key{Scope: scope, Intent: "deliver", Payload: map[string]string{"source": "gh", "eventId": id}}, PendingTTL: time.Minute},
		})
		if err != nil {
			t.Fatal(err)
		}
		tk, err := e.ledger.Queue().TakeDelivery(ctx, scope, q.Item.EntryID, time.Minute)
		if err != nil || !tk.OK {
			t.Fatalf("take %s: %+v %v", id, tk, err)
		}
		if _, err := e.ledger.Queue().FinishDelivery(ctx, ledger.Finish{Taken: tk, Status: ledger.DeliveryDelivered,
			Record: ledger.AttemptRecord{AgentStatus: 200, Outcome: "delivered"}}); err != nil {
			t.Fatal(err)
		}
		e.clock.Add(time.Second)
	}
	seen := map[string]int{}
	received := func(m []string) bool { return m[1] == "event received" }
	walkConversation(t, e, scope, "&all=1", n, func(page int, body string, m []string) {
		if received(m) {
			seen[regexp.MustCompile(`m\d{3}`).FindString(m[3])]++
			if !strings.Contains(m[3], "gh:m") {
				t.Fatalf("page %d shows an event without its run: %s", page, m[3])
			}
		}
	}, received)
	for i := range n {
		if id := fmt.Sprintf("m%03d", i); seen[id] != 1 {
			t.Errorf("event %s shown %d times", id, seen[id])
		}
	}
}

// walkConversation follows a conversation's pages of 200 entries from the
// newest (query added to each page's address), calling each on every
// moment, and checks that the first page says it shows the newest 200 and
// links on, the second says it is an older page, and that the pages show
// 200 and n-200 of the moments counted.
func walkConversation(t *testing.T, e *env, scope, query string, n int, each func(page int, body string, m []string), counted func(m []string) bool) {
	t.Helper()
	path := "/scope?scope=" + scope
	for page := 1; path != ""; page++ {
		resp, body := e.get(t, path+query)
		if resp.StatusCode != http.StatusOK || page > 2 {
			t.Fatalf("page %d (%s): %d", page, path, resp.StatusCode)
		}
		shown := 0
		for _, m := range momentRE.FindAllStringSubmatch(body, -1) {
			each(page, body, m)
			if counted(m) {
				shown++
			}
		}
		if want := map[int]int{1: 200, 2: n - 200}[page]; shown != want {
			t.Fatalf("page %d shows %d of the moments counted, want %d", page, shown, want)
		}
		if older := strings.Contains(body, `id="older-page"`); older != (page > 1) {
			t.Fatalf("page %d says it is an older page: %v", page, older)
		}
		path = hrefOf(t, body, "older-entries")
		if page == 1 && (path == "" || !strings.Contains(body, "the newest 200 effect entries")) {
			t.Fatalf("the first page links to no older entries:\n%.2000s", body)
		}
	}
}
