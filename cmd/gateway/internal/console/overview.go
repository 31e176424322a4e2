package console

import (
	"context"
	"net/http"
	"sort"
	"strconv"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/replyonce/gateway/ledger/ledgerapi"
)

// answerRate is one answer status of a source and its total since this
// process started.
type answerRate struct {
	Status  string
	Total   float64
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
	// Chart is the source's last hour on this instance; nil without a
	// History.
	Chart *chart
}

type overviewData struct {
	Sources    []sourceRow
	Store      string
	StoreError string
	Metrics    bool
	Charts     bool
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
	out := overviewData{Store: "reachable", Metrics: c.metrics != nil, Charts: c.history != nil}
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
	requests := map[string]map[string]float64{}
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
					if requests[src] == nil {
						requests[src] = map[string]float64{}
					}
					requests[src][st] += m.GetCounter().GetValue()
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
	for src, byStatus := range requests {
		r := row(src)
		for st, total := range byStatus {
			a := answerRate{Status: st, Total: total, Class: "st-other"}
			a.Numeric, _ = strconv.Atoi(st)
			switch {
			case a.Numeric >= 200 && a.Numeric < 300:
				a.Class = "st-ok"
			case a.Numeric >= 500:
				a.Class = "st-bad"
			case a.Numeric >= 400:
				a.Class = "st-wait"
			}
			r.Answers = append(r.Answers, a)
		}
		sort.Slice(r.Answers, func(i, j int) bool { return r.Answers[i].Status < r.Answers[j].Status })
	}
	for _, r := range rows {
		if c.history != nil {
			ch := c.history.chart(r.Name)
			r.Chart = &ch
		}
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
