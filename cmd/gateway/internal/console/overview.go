package console

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"sync"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// sample is one reading of the counters the overview shows per minute:
// source → answer status → requests so far.
type sample struct {
	at       time.Time
	requests map[string]map[string]float64
}

// rateSampler keeps the last few minutes of samples, one per overview
// render, so a per-minute rate needs no goroutine of its own.
type rateSampler struct {
	mu      sync.Mutex
	samples []sample
}

func newRateSampler() *rateSampler { return &rateSampler{} }

const rateWindow = time.Minute

// add records s and returns the oldest sample at least a few seconds old
// within the window (nil when there is none yet).
func (rs *rateSampler) add(s sample) *sample {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	keep := rs.samples[:0]
	for _, old := range rs.samples {
		if s.at.Sub(old.at) <= 5*rateWindow {
			keep = append(keep, old)
		}
	}
	rs.samples = keep
	var base *sample
	for i := range rs.samples {
		d := s.at.Sub(rs.samples[i].at)
		if d >= 2*time.Second && d <= rateWindow+30*time.Second {
			b := rs.samples[i]
			base = &b
			break
		}
	}
	if len(rs.samples) == 0 || s.at.Sub(rs.samples[len(rs.samples)-1].at) >= time.Second {
		rs.samples = append(rs.samples, s)
	}
	if len(rs.samples) > 600 {
		rs.samples = rs.samples[len(rs.samples)-600:]
	}
	return base
}

// answerRate is one answer status of a source: its total and, when a
// baseline sample exists, its rate per minute.
type answerRate struct {
	Status  string
	Total   float64
	PerMin  string
	Class   string
	Numeric int
}

// sourceRow is one line of the overview.
type sourceRow struct {
	Name          string
	Answers       []answerRate
	Verification  float64
	Unavailable   float64
	QueueDue      float64
	OldestDue     string
	DeadLetters   float64
	Paused        bool
	HasQueueGauge bool
	// Health is the source's health read from the store (docs/health.md):
	// healthy, failing or paused, with since when and the last error;
	// Waiting and DeadNow are counted in the store, so they agree across
	// instances, come back to 0 after a replay and survive restarts.
	Health     string
	Since      string
	LastError  string
	Waiting    int
	OldestWait string
	DeadNow    int
	HasHealth  bool
}

type overviewData struct {
	Sources    []sourceRow
	Store      string
	StoreError string
	RateNote   string
	Metrics    bool
}

func labelOf(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func (c *Console) overviewData(ctx context.Context) overviewData {
	now := c.now()
	out := overviewData{Store: "reachable", Metrics: c.metrics != nil}
	paused, err := c.api.PausedSources(ctx)
	if err != nil {
		out.Store, out.StoreError = "unreachable", "the ledger store did not answer: "+statusText(err)
	}
	rows := map[string]*sourceRow{}
	row := func(name string) *sourceRow {
		if rows[name] == nil {
			rows[name] = &sourceRow{Name: name}
		}
		return rows[name]
	}
	for _, s := range c.sources {
		row(s)
	}
	for _, p := range paused {
		row(p).Paused = true
	}
	if hs, err := c.api.SourcesHealth(ctx); err == nil {
		for _, h := range hs {
			applyHealth(row(h.Source), h)
		}
	} else if out.StoreError == "" {
		out.StoreError = "source health could not be read: " + statusText(err)
	}
	cur := sample{at: now, requests: map[string]map[string]float64{}}
	if c.metrics != nil {
		families, _ := c.metrics.Gather() // a partial gather still shows what it has
		for _, f := range families {
			for _, m := range f.GetMetric() {
				src := labelOf(m, "source")
				if src == "" {
					continue
				}
				switch f.GetName() {
				case "replyonce_requests_total":
					st := labelOf(m, "status")
					if cur.requests[src] == nil {
						cur.requests[src] = map[string]float64{}
					}
					cur.requests[src][st] += m.GetCounter().GetValue()
					if st == "503" {
						row(src).Unavailable += m.GetCounter().GetValue()
					}
				case "replyonce_verification_failures_total":
					row(src).Verification += m.GetCounter().GetValue()
				case "replyonce_queue_due":
					r := row(src)
					r.QueueDue, r.HasQueueGauge = m.GetGauge().GetValue(), true
				case "replyonce_queue_oldest_due_seconds":
					if v := m.GetGauge().GetValue(); v > 0 {
						row(src).OldestDue = (time.Duration(v * float64(time.Second))).Round(time.Second).String()
					}
				case "replyonce_dead_letters_total":
					row(src).DeadLetters += m.GetCounter().GetValue()
				}
			}
		}
	}
	base := c.rates.add(cur)
	if base == nil {
		out.RateNote = "Rates appear once the page has refreshed for a few seconds; totals are since the gateway started."
	}
	for src, byStatus := range cur.requests {
		r := row(src)
		for st, total := range byStatus {
			a := answerRate{Status: st, Total: total, PerMin: "—", Class: "st-other"}
			a.Numeric, _ = strconv.Atoi(st)
			switch {
			case a.Numeric >= 200 && a.Numeric < 300:
				a.Class = "st-ok"
			case a.Numeric >= 500:
				a.Class = "st-bad"
			case a.Numeric >= 400:
				a.Class = "st-wait"
			}
			if base != nil {
				prev := base.requests[src][st]
				minutes := now.Sub(base.at).Minutes()
				a.PerMin = strconv.FormatFloat((total-prev)/minutes, 'f', 1, 64)
			}
			r.Answers = append(r.Answers, a)
		}
		sort.Slice(r.Answers, func(i, j int) bool { return r.Answers[i].Status < r.Answers[j].Status })
	}
	for _, r := range rows {
		out.Sources = append(out.Sources, *r)
	}
	sort.Slice(out.Sources, func(i, j int) bool { return out.Sources[i].Name < out.Sources[j].Name })
	return out
}

func (c *Console) overview(w http.ResponseWriter, r *http.Request, s *session) error {
	c.render(w, r, s, http.StatusOK, "overview", "Overview", c.overviewData(r.Context()))
	return nil
}

// overviewLive is the overview's table alone, for the page's polling.
func (c *Console) overviewLive(w http.ResponseWriter, r *http.Request, s *session) error {
	c.render(w, r, s, http.StatusOK, "frag_overview", "", c.overviewData(r.Context()))
	return nil
}

func statusText(err error) string {
	_, msg := statusOf(err)
	return msg
}

// applyHealth copies a source's health from the store into its row.
func applyHealth(r *sourceRow, h ledgerapi.SourceHealthJSON) {
	r.HasHealth, r.Health, r.Since, r.LastError, r.Waiting, r.DeadNow = true, h.Health, h.Since, h.LastError, h.Waiting, h.Dead
	if h.Waiting > 0 {
		r.OldestWait = (time.Duration(h.OldestWaitingSecs) * time.Second).String()
	}
}
