package console

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// The overview's picture of the last hour: per source, requests accepted
// and attempts delivered and failed per real minute, drawn as SVG on the
// server. The figures are this instance's: a History samples the
// instance's own Prometheus counters every few seconds into a ring of 60
// one-minute buckets, in memory, and the chart says "this instance".
// Accepted is requests answered 2xx; delivered is forwards (inline) and
// queued attempts the agent took (outcome delivered); failed is those the
// agent did not take (retry, fault, dead). An agent's rejection is neither.

// historyMinutes is how many minutes a History keeps.
const historyMinutes = 60

// minuteCounts is one source's figures over some span.
type minuteCounts struct{ accepted, delivered, failed float64 }

func (a minuteCounts) sub(b minuteCounts) minuteCounts {
	return minuteCounts{a.accepted - b.accepted, a.delivered - b.delivered, a.failed - b.failed}
}

// History keeps the last hour of one instance's figures per source and
// minute. Sample reads the counters; Run samples on a ticker until its
// context ends.
type History struct {
	metrics prometheus.Gatherer
	now     func() time.Time
	mu      sync.Mutex
	last    map[string]minuteCounts // cumulative at the last sample
	started bool
	// buckets: source → minute (Unix minutes) → counts in that minute.
	buckets map[string]map[int64]minuteCounts
}

// NewHistory keeps the last hour of the counters in g, on clock now.
func NewHistory(g prometheus.Gatherer, now func() time.Time) *History {
	if now == nil {
		now = time.Now
	}
	return &History{metrics: g, now: now, buckets: map[string]map[int64]minuteCounts{}}
}

var deliveredOutcomes, failedOutcomes = map[string]bool{"delivered": true}, map[string]bool{"retry": true, "fault": true, "dead": true}

// totals reads the counters: cumulative figures per source.
func (h *History) totals() map[string]minuteCounts {
	out := map[string]minuteCounts{}
	if h.metrics == nil {
		return out
	}
	families, _ := h.metrics.Gather() // a partial gather still counts what it has
	for _, f := range families {
		for _, m := range f.GetMetric() {
			src := labelOf(m, "source")
			if src == "" {
				continue
			}
			c := out[src]
			v := m.GetCounter().GetValue()
			switch f.GetName() {
			case "replyonce_requests_total":
				if st := labelOf(m, "status"); len(st) == 3 && st[0] == '2' {
					c.accepted += v
				}
			case "replyonce_forwards_total", "replyonce_delivery_attempts_total":
				switch o := labelOf(m, "outcome"); {
				case deliveredOutcomes[o]:
					c.delivered += v
				case failedOutcomes[o]:
					c.failed += v
				}
			default:
				continue
			}
			out[src] = c
		}
	}
	return out
}

// Sample adds what the counters grew by since the last sample to the
// current minute. The first sample only sets where counting starts.
func (h *History) Sample() {
	now := h.now()
	cur := h.totals()
	h.mu.Lock()
	defer h.mu.Unlock()
	minute := now.Unix() / 60
	if h.started {
		for src, c := range cur {
			d := c.sub(h.last[src])
			if d.accepted < 0 || d.delivered < 0 || d.failed < 0 {
				continue // a counter was reset: nothing to attribute
			}
			if d == (minuteCounts{}) {
				continue
			}
			b := h.buckets[src]
			if b == nil {
				b = map[int64]minuteCounts{}
				h.buckets[src] = b
			}
			old := b[minute]
			b[minute] = minuteCounts{old.accepted + d.accepted, old.delivered + d.delivered, old.failed + d.failed}
		}
	}
	h.last, h.started = cur, true
	for _, b := range h.buckets {
		for m := range b {
			if m <= minute-historyMinutes {
				delete(b, m)
			}
		}
	}
}

// Run samples every interval until ctx ends; it returns then.
func (h *History) Run(ctx context.Context, every time.Duration) {
	h.Sample()
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			h.Sample()
		}
	}
}

// chartBar is one minute of a chart: its three bars, in SVG units.
type chartBar struct {
	Minute                               string // UTC, 15:04
	X, AX, DX, FX                        int
	AY, AH, DY, DH, FY, FH               int
	Accepted, Delivered, Failed, Summary string
}

// chart is one source's last hour as the template draws it.
type chart struct {
	Source                      string
	Bars                        []chartBar
	Max                         string
	First, Last                 string
	Accepted, Delivered, Failed string // totals over the hour
	Empty                       bool
}

const (
	chartHeight = 60
	chartSlot   = 6 // SVG units per minute: three bars of 2
)

// chart draws source's last hour, the current minute last.
func (h *History) chart(source string) chart {
	now := h.now()
	minute := now.Unix() / 60
	h.mu.Lock()
	b := make(map[int64]minuteCounts, len(h.buckets[source]))
	for m, c := range h.buckets[source] {
		b[m] = c
	}
	h.mu.Unlock()
	peak, total := 0.0, minuteCounts{}
	for m, c := range b {
		if m > minute-historyMinutes && m <= minute {
			peak = max(peak, c.accepted, c.delivered, c.failed)
			total = minuteCounts{total.accepted + c.accepted, total.delivered + c.delivered, total.failed + c.failed}
		}
	}
	out := chart{Source: source, Max: num(peak), Empty: peak == 0,
		First: time.Unix((minute-historyMinutes+1)*60, 0).UTC().Format("15:04"), Last: time.Unix(minute*60, 0).UTC().Format("15:04"),
		Accepted: num(total.accepted), Delivered: num(total.delivered), Failed: num(total.failed)}
	height := func(v float64) int {
		if v <= 0 || peak <= 0 {
			return 0
		}
		return max(1, int(v/peak*chartHeight+0.5))
	}
	for i := range historyMinutes {
		m := minute - historyMinutes + 1 + int64(i)
		c := b[m]
		x := i * chartSlot
		bar := chartBar{Minute: time.Unix(m*60, 0).UTC().Format("15:04"), X: x, AX: x, DX: x + 2, FX: x + 4,
			AH: height(c.accepted), DH: height(c.delivered), FH: height(c.failed),
			Accepted: num(c.accepted), Delivered: num(c.delivered), Failed: num(c.failed)}
		bar.AY, bar.DY, bar.FY = chartHeight-bar.AH, chartHeight-bar.DH, chartHeight-bar.FH
		bar.Summary = bar.Minute + " UTC: " + bar.Accepted + " accepted, " + bar.Delivered + " delivered, " + bar.Failed + " failed"
		out.Bars = append(out.Bars, bar)
	}
	return out
}

func num(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
