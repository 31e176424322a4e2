package console_test

import (
	"fmt"
	"io"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/replyonce/gateway/cmd/gateway/internal/console"
	"github.com/replyonce/gateway/ledger"
	"github.com/replyonce/gateway/ledger/ledgerapi"
	"github.com/replyonce/gateway/stores/memory"
)

var minuteRE = regexp.MustCompile(`<g class="minute" data-minute="([0-9:]+)" data-accepted="([0-9.]+)" data-delivered="([0-9.]+)" data-failed="([0-9.]+)">`)

// The overview draws, per source, what this instance accepted, delivered
// and failed in each real minute of the last hour: a source that received
// 60 events over 3 minutes shows 20 in each of those minutes, read back
// from the SVG, and nothing in the others.
func TestOverviewChartCountsEachMinute(t *testing.T) {
	clk := &clock{t: time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)}
	reg := prometheus.NewRegistry()
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "replyonce_requests_total"}, []string{"source", "status"})
	attempts := prometheus.NewCounterVec(prometheus.CounterOpts{Name: "replyonce_delivery_attempts_total"}, []string{"source", "outcome"})
	reg.MustRegister(requests, attempts)
	requests.WithLabelValues("gh", "202").Add(7) // before the history started: not drawn
	hist := console.NewHistory(reg, clk.Now)
	hist.Sample()

	l := ledger.New(memory.New(clk.Now), ledger.Options{Clock: clk.Now})
	api := httptest.NewServer(ledgerapi.NewHandler(l, "", nil))
	t.Cleanup(api.Close)
	t.Cleanup(api.Client().CloseIdleConnections)
	client, err := ledgerapi.NewClient(api.URL, "", api.Client())
	if err != nil {
		t.Fatal(err)
	}
	con, err := console.New(console.Options{API: client, Sources: []string{"gh", "quiet"}, Clock: clk.Now, Metrics: reg, History: hist})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	t.Cleanup(srv.Close)
	t.Cleanup(srv.Client().CloseIdleConnections)

	// 20 events in each of 09:00, 09:01 and 09:02, sampled a few times a
	// minute; 09:00 also delivers 15 and fails 2, 09:02 fails 5.
	for minute := range 3 {
		for part := range 4 {
			clk.Set(time.Date(2026, 12, 3, 9, minute, 5+part*15, 0, time.UTC))
			requests.WithLabelValues("gh", "202").Add(5)
			requests.WithLabelValues("gh", "401").Add(1) // not accepted
			hist.Sample()
		}
	}
	clk.Set(time.Date(2026, 12, 3, 9, 0, 50, 0, time.UTC))
	attempts.WithLabelValues("gh", "delivered").Add(15)
	attempts.WithLabelValues("gh", "retry").Add(2)
	attempts.WithLabelValues("gh", "given_back").Add(3) // neither
	hist.Sample()
	clk.Set(time.Date(2026, 12, 3, 9, 2, 59, 0, time.UTC))
	attempts.WithLabelValues("gh", "dead").Add(5)
	hist.Sample()
	clk.Set(time.Date(2026, 12, 3, 9, 5, 30, 0, time.UTC))
	hist.Sample()

	resp, err := srv.Client().Get(srv.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	page := string(b)
	start := strings.Index(page, `data-source="gh"`)
	if start < 0 {
		t.Fatalf("no chart for gh:\n%s", page)
	}
	svg := page[start : start+strings.Index(page[start:], "</svg>")]
	bars := minuteRE.FindAllStringSubmatch(svg, -1)
	if len(bars) != 60 {
		t.Fatalf("the chart has %d minutes, want 60", len(bars))
	}
	if bars[0][1] != "08:06" || bars[59][1] != "09:05" {
		t.Fatalf("the chart spans %s to %s, want 08:06 to 09:05", bars[0][1], bars[59][1])
	}
	want := map[string]string{"09:00": "20 15 2", "09:01": "20 0 0", "09:02": "20 0 5"}
	for _, bar := range bars {
		got := fmt.Sprintf("%s %s %s", bar[2], bar[3], bar[4])
		w, ok := want[bar[1]]
		if !ok {
			w = "0 0 0"
		}
		if got != w {
			t.Errorf("minute %s: accepted, delivered, failed = %s, want %s", bar[1], got, w)
		}
	}
	if !strings.Contains(page, "this instance") {
		t.Error("the overview does not say the chart is this instance's")
	}
	if strings.Contains(page, "/min</span>") {
		t.Error("the overview still shows a per-minute rate of its last refresh")
	}
	// A source with no traffic draws an empty hour, not a missing chart.
	if !strings.Contains(page, `data-source="quiet"`) {
		t.Error("no chart for the quiet source")
	}
}

func (c *clock) Set(t time.Time) { c.mu.Lock(); defer c.mu.Unlock(); c.t = t }
