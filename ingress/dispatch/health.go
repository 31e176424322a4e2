package dispatch

import (
	"context"
	"errors"
	"net/url"
	"sort"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/replyonce/gateway/ledger"
)

// Source health states.
const (
	Healthy = "healthy"
	Failing = "failing"
	Paused  = "paused"
)

// HealthScopeLimit bounds the scopes one health reading reads per kind
// (waiting, dead): past it the counts are lower bounds (Partial).
const HealthScopeLimit = 1000

// SourceHealth is one source's delivery health, read from the store, so
// every instance, the admin API, `gateway sources list`, the console and
// the gauges say the same.
type SourceHealth struct {
	Source string `json:"source"`
	Mode   string `json:"mode"`
	URL    string `json:"url"` // forward.url, its password redacted
	// Health is healthy, failing (the agent's last attempts failed) or
	// paused (paused wins over failing).
	Health string `json:"health"`
	// Since is when the source started failing, or when it last
	// recovered; zero when it never failed.
	Since time.Time `json:"since,omitzero"`
	// Failures is the failed attempts in a row, across instances.
	Failures  int    `json:"consecutiveFailures"`
	LastError string `json:"lastError,omitempty"`
	// Waiting counts the events not delivered yet and not dead (queued,
	// paused ones included, or being delivered); OldestWaiting is the age
	// of the oldest of them.
	Waiting       int           `json:"waiting"`
	OldestWaiting time.Duration `json:"oldestWaitingNs"`
	Dead          int           `json:"dead"`
	// Partial says the store held more than HealthScopeLimit scopes to
	// read: Waiting and Dead are at least what they say.
	Partial bool `json:"partial,omitempty"`
}

// ReadHealth reads every source's health from l at now.
func ReadHealth(ctx context.Context, l *ledger.Ledger, sources []*Source, now time.Time) ([]SourceHealth, error) {
	paused, err := l.Sources().PausedSources(ctx)
	if err != nil && !errors.Is(err, ledger.ErrCorruptControl) {
		return nil, err
	}
	agents, err := l.Sources().AgentHealths(ctx)
	if err != nil && !errors.Is(err, ledger.ErrCorruptControl) {
		return nil, err
	}
	byName := map[string]*SourceHealth{}
	out := make([]SourceHealth, len(sources))
	for i, s := range sources {
		a := agents[s.Name]
		h := SourceHealth{Source: s.Name, Mode: string(s.Policy.Mode), URL: redacted(s.Target.URL), Health: Healthy,
			Since: a.Since, Failures: a.Failures, LastError: a.LastError}
		if h.Mode == "" {
			h.Mode = string(ModeQueued)
		}
		if a.Failing {
			h.Health = Failing
		}
		if paused[s.Name] {
			h.Health = Paused
		}
		out[i] = h
		byName[s.Name] = &out[i]
	}
	oldest := map[string]time.Time{}
	for _, st := range []ledger.DeliveryStatus{ledger.DeliveryQueued, ledger.DeliveryDelivering, ledger.DeliveryDead} {
		items, err := l.Queue().ListDeliveries(ctx, ledger.DeliveryFilter{Status: st, Limit: HealthScopeLimit})
		if err != nil {
			return nil, err
		}
		partial := len(scopesOf(items)) >= HealthScopeLimit
		for _, q := range items {
			h := byName[q.Source]
			if h == nil {
				continue
			}
			h.Partial = h.Partial || partial
			if st == ledger.DeliveryDead {
				h.Dead++
				continue
			}
			h.Waiting++
			if o, ok := oldest[q.Source]; !ok || q.ReceivedAt.Before(o) {
				oldest[q.Source] = q.ReceivedAt
			}
		}
	}
	for name, at := range oldest {
		byName[name].OldestWaiting = max(now.Sub(at), 0)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Source < out[j].Source })
	return out, nil
}

func scopesOf(items []ledger.QueueItem) map[string]bool {
	set := map[string]bool{}
	for _, q := range items {
		set[q.Scope] = true
	}
	return set
}

func redacted(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	return u.Redacted()
}

// HealthCollector exports ReadHealth as Prometheus gauges, read from the
// store at each scrape (bounded by a timeout), so they are the same on
// every instance and survive restarts.
type HealthCollector struct {
	read    func(ctx context.Context) ([]SourceHealth, error)
	log     *zap.Logger
	timeout time.Duration

	state, failures, waiting, oldest, dead *prometheus.Desc
}

// NewHealthCollector reads health with read at each scrape.
func NewHealthCollector(read func(ctx context.Context) ([]SourceHealth, error), log *zap.Logger) *HealthCollector {
	if log == nil {
		log = zap.NewNop()
	}
	return &HealthCollector{read: read, log: log, timeout: 5 * time.Second,
		state: prometheus.NewDesc("replyonce_source_health", "1 for the source's current health (healthy, failing, paused), 0 for the others; read from the store.",
			[]string{"source", "health"}, nil),
		failures: prometheus.NewDesc("replyonce_source_consecutive_failures", "Failed delivery attempts in a row of the source's agent, across instances.",
			[]string{"source"}, nil),
		waiting: prometheus.NewDesc("replyonce_source_waiting_events", "Queued events of the source not delivered yet (paused ones included).",
			[]string{"source"}, nil),
		oldest: prometheus.NewDesc("replyonce_source_oldest_waiting_seconds", "Age of the source's oldest waiting event.",
			[]string{"source"}, nil),
		dead: prometheus.NewDesc("replyonce_source_dead_events", "Events of the source in dead letter now, counted in the store.",
			[]string{"source"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *HealthCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.state, c.failures, c.waiting, c.oldest, c.dead} {
		ch <- d
	}
}

// Collect implements prometheus.Collector. A store that cannot be read
// exports nothing this scrape (and logs why).
func (c *HealthCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	hs, err := c.read(ctx)
	if err != nil {
		c.log.Warn("metrics: reading source health failed", zap.Error(err))
		return
	}
	for _, h := range hs {
		for _, st := range []string{Healthy, Failing, Paused} {
			v := 0.0
			if h.Health == st {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(c.state, prometheus.GaugeValue, v, h.Source, st)
		}
		ch <- prometheus.MustNewConstMetric(c.failures, prometheus.GaugeValue, float64(h.Failures), h.Source)
		ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(h.Waiting), h.Source)
		ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, h.OldestWaiting.Seconds(), h.Source)
		ch <- prometheus.MustNewConstMetric(c.dead, prometheus.GaugeValue, float64(h.Dead), h.Source)
	}
}
