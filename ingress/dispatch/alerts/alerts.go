package alerts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ledger"
)

// Kind is what happened to a source.
type Kind string

// The kinds of alert.
const (
	// Failing: the agent failed after_failures attempts in a row.
	Failing Kind = "failing"
	// Recovered: the agent of a source that was failing answers again.
	Recovered Kind = "recovered"
	// Paused: forward.pause_after paused the source.
	Paused Kind = "paused"
	// Dead: events of the source went to dead letter, grouped per minute.
	Dead Kind = "dead"
	// Escalation: the loop breaker (ledger.caps) refused a claim and
	// opened an escalation for a person.
	Escalation Kind = "escalation"
	// Verification: the requests a source refused for their signature
	// jumped (a secret rotated on one side only).
	Verification Kind = "verification"
)

// DefaultAfterFailures is how many failed attempts in a row raise the
// failing alert when alerts.after_failures is not set: one failure is
// often a blip (a deploy of the agent), three in a row rarely are.
const DefaultAfterFailures = 3

// DefaultAfter is how long a source may be failing before the failing
// alert is raised, whatever the count of failed attempts, when
// alerts.after is not set: with the default retry schedule an event's
// third attempt comes about 5 minutes after its first, so a source with
// few events is told about as soon as a busy one.
const DefaultAfter = 5 * time.Minute

// DefaultVerificationFailures is how many requests of one source refused
// for their signature within one minute, counted across instances, raise
// the verification alert when alerts.verification_failures is not set.
const DefaultVerificationFailures = 10

// verificationEvery bounds the verification alerts of one source: at most
// one per clock hour across instances (the hour names its claim).
const verificationEvery = time.Hour

// deadEvery is the window dead letters are grouped in: one alert per
// source per minute of the clock.
const deadEvery = time.Minute

// deadIDs bounds the event ids a dead-letter alert names.
const deadIDs = 5

// deadScopeLimit bounds the scopes read to count a source's dead letters
// for its alert (as source health does).
const deadScopeLimit = 1000

// ScopePrefix starts the ledger scopes alerts are claimed in. It is not
// under ledger.ReservedPrefix, which claims refuse.
const ScopePrefix = "replyonce-alerts:"

// queueSize bounds each target's queue: alerts are few (one per incident
// and kind); beyond it a new alert is dropped with a warn rather than
// held in memory without end.
const queueSize = 256

// Config is the gateway's alerts: section.
type Config struct {
	// Targets receive every alert.
	Targets []Target `yaml:"targets"`
	// AfterFailures is how many failed attempts in a row (across
	// instances) raise the failing alert; 0 means DefaultAfterFailures.
	AfterFailures int `yaml:"after_failures"`
	// After raises the failing alert once a source has been failing this
	// long (since its first failed attempt, as the store recorded it),
	// however few attempts failed; 0 means DefaultAfter.
	After time.Duration `yaml:"after"`
	// VerificationFailures is how many requests of one source refused for
	// their signature within one minute, counted across instances, raise
	// the verification alert; 0 means DefaultVerificationFailures.
	VerificationFailures int `yaml:"verification_failures"`
	// ConsoleURL is the console's public address
	// (https://gw.example.com/console); when set, each alert links to
	// the source's page there.
	ConsoleURL string `yaml:"console_url"`
}

// Target is one receiver of alerts: exactly one of Slack and Webhook.
type Target struct {
	// Slack is a Slack incoming-webhook URL.
	Slack string `yaml:"slack"`
	// Webhook is a URL that receives a JSON body signed with Standard
	// Webhooks under Secret.
	Webhook string `yaml:"webhook"`
	// Secret signs webhook alerts (whsec_ and base64, as
	// forward.signing_secret).
	Secret string `yaml:"secret"`
}

// Threshold is the failing alert's count of failed attempts.
func (c Config) Threshold() int {
	if c.AfterFailures <= 0 {
		return DefaultAfterFailures
	}
	return c.AfterFailures
}

// FailingAfter is the failing alert's duration.
func (c Config) FailingAfter() time.Duration {
	if c.After <= 0 {
		return DefaultAfter
	}
	return c.After
}

// VerificationThreshold is the verification alert's count per minute.
func (c Config) VerificationThreshold() int {
	if c.VerificationFailures <= 0 {
		return DefaultVerificationFailures
	}
	return c.VerificationFailures
}

// Validate checks the section, naming the key at fault.
func (c Config) Validate() error {
	if c.AfterFailures < 0 {
		return fmt.Errorf("alerts.after_failures: %d is negative (0 means %d)", c.AfterFailures, DefaultAfterFailures)
	}
	if c.After < 0 {
		return fmt.Errorf("alerts.after: %s is negative (0 means %s)", c.After, DefaultAfter)
	}
	if c.VerificationFailures < 0 {
		return fmt.Errorf("alerts.verification_failures: %d is negative (0 means %d)", c.VerificationFailures, DefaultVerificationFailures)
	}
	if c.ConsoleURL != "" {
		if err := checkURL(c.ConsoleURL); err != nil {
			return fmt.Errorf("alerts.console_url: %w", err)
		}
	}
	for i, t := range c.Targets {
		key := fmt.Sprintf("alerts.targets[%d]", i)
		switch {
		case t.Slack != "" && t.Webhook != "":
			return fmt.Errorf("%s: set slack or webhook, not both", key)
		case t.Slack != "":
			if err := checkURL(t.Slack); err != nil {
				return fmt.Errorf("%s.slack: %w", key, err)
			}
			if t.Secret != "" {
				return fmt.Errorf("%s.secret: only a webhook target is signed; Slack's URL is its secret", key)
			}
		case t.Webhook != "":
			if err := checkURL(t.Webhook); err != nil {
				return fmt.Errorf("%s.webhook: %w", key, err)
			}
			if t.Secret == "" {
				return fmt.Errorf("%s.secret: a webhook target needs a Standard Webhooks secret (whsec_…)", key)
			}
			if _, err := forward.SignStandardWebhook(t.Secret, "check", time.Unix(0, 0), nil); err != nil {
				return fmt.Errorf("%s.secret: %w", key, err)
			}
		default:
			return fmt.Errorf("%s: set slack (an incoming-webhook URL) or webhook", key)
		}
	}
	return nil
}

func checkURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not an http(s) URL", redact(raw))
	}
	return nil
}

// redact hides a URL's path and query, where Slack keeps its secret.
func redact(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "xxxxx"
	}
	return u.Scheme + "://" + u.Host + "/xxxxx"
}

// Alert is one thing to tell: Source's incident that started at Incident
// (its source-health Since) reached Kind.
type Alert struct {
	Kind   Kind
	Source string
	// Incident names the alert, the same on every process: the start of
	// the source's incident as the store recorded it (failing, recovered,
	// paused), the minute the dead letters are grouped in (dead), the
	// minute the refusals reached the threshold (verification).
	Incident time.Time
	// Error is the last failure in plain words (forward.AgentError).
	Error string
	// Failures counts the failed attempts in a row (failing, paused).
	Failures int
	// Lasted is how long the incident lasted (recovered), or has lasted
	// (failing).
	Lasted time.Duration
	// Count is how many events went to dead letter in the minute (dead),
	// how many requests were refused for their signature in the minute
	// (verification).
	Count int
	// DeadNow is how many of the source's events are in dead letter now,
	// counted in the store (dead); -1 when it could not be read.
	DeadNow int
	// Events names some of the events that went to dead letter (dead).
	Events []string
	// Reasons says why requests were refused, by reason (verification):
	// "no_match: 12, stale: 1".
	Reasons string
	// Scope, Intent, RunID, EscalationID, Max and Window name a loop
	// breaker's escalation and its cap (escalation).
	Scope, Intent, RunID, EscalationID string
	Max                                int
	Window                             time.Duration
	// At is when it was raised.
	At time.Time
}

// scope is the ledger scope the alert is claimed in: the same on every
// process that sees the same thing, since it is named from what the
// store recorded (an incident's start, an escalation's id) or from the
// clock's minute or hour.
func (a Alert) scope() string {
	switch a.Kind {
	case Dead:
		return ScopePrefix + a.Source + ":dead:" + a.Incident.UTC().Truncate(deadEvery).Format(time.RFC3339)
	case Verification:
		return ScopePrefix + a.Source + ":verification:" + a.Incident.UTC().Truncate(verificationEvery).Format(time.RFC3339)
	case Escalation:
		return ScopePrefix + "escalation:" + a.Scope + ":" + a.EscalationID
	}
	return ScopePrefix + a.Source + ":" + a.Incident.UTC().Format(time.RFC3339Nano)
}

// intent names the alert's entry in its incident's scope: one per kind
// and target, and for a pause one per trip of the breaker (after a resume
// the same incident may pause the source again).
func (a Alert) intent(target string) string {
	if a.Kind == Paused {
		return fmt.Sprintf("%s-%d:%s", a.Kind, a.Failures, target)
	}
	return string(a.Kind) + ":" + target
}

// text is the alert in one or two sentences, for Slack and for the log.
func (a Alert) text(console string) string {
	var b strings.Builder
	switch a.Kind {
	case Failing:
		fmt.Fprintf(&b, "Source %s is failing: %s in a row since %s; events are kept and retried. Last error: %s",
			a.Source, count(a.Failures, "attempt"), a.Incident.UTC().Format(time.RFC3339), a.Error)
	case Recovered:
		fmt.Fprintf(&b, "Source %s recovered: its agent answers again after %s; waiting events are due now.",
			a.Source, a.Lasted.Round(time.Second))
	case Paused:
		fmt.Fprintf(&b, "Source %s paused itself: its agent refused %d times in a row (forward.pause_after). Events keep queueing; fix the agent or the configuration, then run: gateway sources resume %s. Last error: %s",
			a.Source, a.Failures, a.Source, a.Error)
	case Dead:
		fmt.Fprintf(&b, "Source %s: %s went to dead letter in the minute from %s UTC",
			a.Source, count(a.Count, "event"), a.Incident.UTC().Truncate(deadEvery).Format("2006-01-02 15:04"))
		if len(a.Events) > 0 {
			fmt.Fprintf(&b, " (%s", strings.Join(a.Events, ", "))
			if a.Count > len(a.Events) {
				b.WriteString(", …")
			}
			b.WriteString(")")
		}
		b.WriteString(", their retry schedule spent")
		if a.DeadNow >= 0 {
			fmt.Fprintf(&b, "; %d in dead letter now", a.DeadNow)
		}
		fmt.Fprintf(&b, ". Last error: %s. Once the agent is fixed, run: gateway events replay --status dead --source %s", a.Error, a.Source)
	case Verification:
		fmt.Fprintf(&b, "Source %s refused %s for their signature in the minute from %s UTC (%s). A secret rotated on one side only? Check sources.%s.secrets against the provider's.",
			a.Source, count(a.Count, "request"), a.Incident.UTC().Truncate(time.Minute).Format("2006-01-02 15:04"), a.Reasons, a.Source)
	case Escalation:
		fmt.Fprintf(&b, "Loop breaker: scope %s reached its cap of %s", a.Scope, a.Intent)
		if a.Max > 0 {
			fmt.Fprintf(&b, " (%d in %s)", a.Max, a.Window)
		}
		b.WriteString("; a claim was refused and escalated")
		if a.RunID != "" {
			fmt.Fprintf(&b, " (run %s)", a.RunID)
		}
		fmt.Fprintf(&b, ". Nothing more of it runs until the window passes; look at the conversation, then run: gateway ledger dismiss %s %s", a.Scope, a.EscalationID)
	default:
		fmt.Fprintf(&b, "Source %s: %s", a.Source, a.Kind)
	}
	if console != "" {
		what := a.Source
		if a.Kind == Escalation {
			what = a.Scope
		}
		fmt.Fprintf(&b, " <%s|Open %s in the console>", a.link(console), what)
	}
	return b.String()
}

// link is the console's page for what the alert is about: the source's
// events (its dead ones for a dead-letter alert), or the escalated scope.
func (a Alert) link(console string) string {
	base := strings.TrimRight(console, "/")
	q := url.Values{}
	switch a.Kind {
	case Escalation:
		q.Set("scope", a.Scope)
		return base + "/scope?" + q.Encode()
	case Dead:
		q.Set("status", "dead")
	}
	q.Set("source", a.Source)
	return base + "/events?" + q.Encode()
}

func count(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

// webhookBody is the JSON a webhook target receives.
type webhookBody struct {
	Type     string    `json:"type"` // source.failing, source.recovered, source.paused, source.dead, source.verification, escalation
	Source   string    `json:"source,omitempty"`
	Incident time.Time `json:"incidentStart,omitzero"`
	Error    string    `json:"lastError,omitempty"`
	Failures int       `json:"consecutiveFailures,omitempty"`
	Lasted   float64   `json:"failingSeconds,omitempty"`
	// dead, verification
	Count   int      `json:"count,omitempty"`
	DeadNow *int     `json:"deadNow,omitempty"`
	Events  []string `json:"events,omitempty"`
	Reasons string   `json:"reasons,omitempty"`
	// escalation
	Scope         string    `json:"scope,omitempty"`
	Intent        string    `json:"intent,omitempty"`
	RunID         string    `json:"runId,omitempty"`
	EscalationID  string    `json:"escalationId,omitempty"`
	Max           int       `json:"max,omitempty"`
	WindowSeconds float64   `json:"windowSeconds,omitempty"`
	At            time.Time `json:"at"`
	Text          string    `json:"text"`
	Console       string    `json:"consoleUrl,omitempty"`
}

func (a Alert) webhook(console string) webhookBody {
	wb := webhookBody{Type: "source." + string(a.Kind), Source: a.Source, Incident: a.Incident.UTC(), Error: a.Error,
		Failures: a.Failures, Lasted: a.Lasted.Seconds(), At: a.At.UTC(), Text: a.text("")}
	switch a.Kind {
	case Dead:
		wb.Count, wb.Events = a.Count, a.Events
		if a.DeadNow >= 0 {
			dn := a.DeadNow
			wb.DeadNow = &dn
		}
	case Verification:
		wb.Count, wb.Reasons = a.Count, a.Reasons
	case Escalation:
		wb.Type, wb.Incident = "escalation", time.Time{}
		wb.Count, wb.Scope, wb.Intent, wb.RunID, wb.EscalationID = a.Count, a.Scope, a.Intent, a.RunID, a.EscalationID
		wb.Max, wb.WindowSeconds = a.Max, a.Window.Seconds()
	}
	if console != "" {
		wb.Console = a.link(console)
	}
	return wb
}

// Options builds a Notifier.
type Options struct {
	Config Config
	// Ledger claims each alert, once across instances. Required.
	Ledger *ledger.Ledger
	// Client sends alerts; nil means a client with a 10s timeout.
	Client *http.Client
	Logger *zap.Logger
	Clock  func() time.Time
	// Backoff is the wait before try n+1 of an alert (n from 1); nil
	// means 1s doubling up to 5 minutes.
	Backoff func(n int) time.Duration
	// Tries bounds the tries of one alert at one target; 0 means 20
	// (about an hour and a half with the default backoff).
	Tries int
	// GroupEvery is how often the minutes dead letters are grouped in are
	// looked at, to send those that ended, and signature refusals are
	// added to the store's count; 0 means a second.
	GroupEvery time.Duration
}

// Notifier raises alerts. A nil *Notifier raises nothing.
type Notifier struct {
	cfg     Config
	l       *ledger.Ledger
	client  *http.Client
	log     *zap.Logger
	now     func() time.Time
	backoff func(int) time.Duration
	tries   int
	targets []*target
	cancel  context.CancelFunc
	wg      sync.WaitGroup
	closed  sync.Once

	groupEvery time.Duration
	wake       chan struct{} // a dead-letter group is ready before its tick
	mu         sync.Mutex
	dead       map[string]*deadGroup // by source: this minute's dead letters
	ready      []*deadGroup          // groups whose minute ended, to send
	verify     map[string]*verifyCount
	// unsavedVerify holds refusals of ended minutes not yet added to the
	// store's count.
	unsavedVerify []verifyFlush
}

// deadGroup is one source's dead letters within one minute, seen here.
type deadGroup struct {
	source  string
	minute  time.Time
	count   int
	ids     []string
	lastErr string
}

// verifyCount is one source's refused signatures within one minute, seen
// here (unsaved of them not yet added to the store's count), and the hour
// its last verification alert was raised in.
type verifyCount struct {
	minute  time.Time
	count   int
	unsaved int
	reasons map[string]int
	raised  time.Time
}

type target struct {
	Target
	name string // slack-0, webhook-1: the entry's intent, with the kind
	q    chan Alert
}

// New starts one goroutine per target; Close stops them.
func New(o Options) (*Notifier, error) {
	if o.Ledger == nil {
		return nil, errors.New("alerts: a ledger is required (each alert is claimed through it)")
	}
	if err := o.Config.Validate(); err != nil {
		return nil, err
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 10 * time.Second}
	}
	if o.Logger == nil {
		o.Logger = zap.NewNop()
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	if o.Backoff == nil {
		o.Backoff = func(n int) time.Duration {
			d := time.Second << min(n-1, 9)
			return min(d, 5*time.Minute)
		}
	}
	if o.Tries <= 0 {
		o.Tries = 20
	}
	if o.GroupEvery <= 0 {
		o.GroupEvery = time.Second
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &Notifier{cfg: o.Config, l: o.Ledger, client: o.Client, log: o.Logger, now: o.Clock, backoff: o.Backoff,
		tries: o.Tries, cancel: cancel, groupEvery: o.GroupEvery, wake: make(chan struct{}, 1),
		dead: map[string]*deadGroup{}, verify: map[string]*verifyCount{}}
	n.wg.Add(1)
	go n.group(ctx)
	for i, t := range o.Config.Targets {
		kind := "slack"
		if t.Webhook != "" {
			kind = "webhook"
		}
		tg := &target{Target: t, name: fmt.Sprintf("%s-%d", kind, i), q: make(chan Alert, queueSize)}
		n.targets = append(n.targets, tg)
		n.wg.Add(1)
		go n.run(ctx, tg)
	}
	return n, nil
}

// Failing says whether a source failing since since, failures attempts
// in a row, at now, has reached the failing alert: after_failures
// attempts, or failing for alerts.after. False for a nil Notifier.
func (n *Notifier) Failing(failures int, since, now time.Time) bool {
	if n == nil || failures <= 0 {
		return false
	}
	return failures >= n.cfg.Threshold() || now.Sub(since) >= n.cfg.FailingAfter()
}

// DeadLetter notes that source's event went to dead letter with lastErr.
// Dead letters are grouped per source and minute of the clock: once the
// minute is over, one alert tells how many went (counted here and in the
// store, whichever is more), names a few, and how many are dead now.
func (n *Notifier) DeadLetter(source, eventID, lastErr string) {
	if n == nil {
		return
	}
	minute := n.now().UTC().Truncate(deadEvery)
	n.mu.Lock()
	g := n.dead[source]
	ended := g != nil && !g.minute.Equal(minute)
	if ended {
		n.ready = append(n.ready, g)
	}
	if g == nil || ended {
		g = &deadGroup{source: source, minute: minute}
		n.dead[source] = g
	}
	g.count++
	if len(g.ids) < deadIDs {
		g.ids = append(g.ids, eventID)
	}
	g.lastErr = lastErr
	n.mu.Unlock()
	if ended {
		select {
		case n.wake <- struct{}{}:
		default:
		}
	}
}

// VerificationFailed notes one request of source refused for its
// signature, for reason (missing, malformed, stale, no_match, …). When
// alerts.verification_failures of them come within one minute of the
// clock, counted across instances, it raises the verification alert, at
// most one per source per hour across instances. The request pays a lock
// and a map look-up: the count is added to the store's record by the
// Notifier's own goroutine, at most once a second per source, so a prober
// cannot make the gateway write at its own pace.
func (n *Notifier) VerificationFailed(source, reason string) {
	if n == nil {
		return
	}
	now := n.now().UTC()
	minute := now.Truncate(time.Minute)
	n.mu.Lock()
	v := n.verify[source]
	if v == nil {
		v = &verifyCount{}
		n.verify[source] = v
	}
	if !v.minute.Equal(minute) {
		if v.unsaved > 0 { // the ended minute's last refusals, added at the next tick
			n.unsavedVerify = append(n.unsavedVerify, verifyFlush{source: source, minute: v.minute, n: v.unsaved, local: v.count, reasons: v.reasons})
		}
		v.minute, v.count, v.unsaved, v.reasons = minute, 0, 0, map[string]int{}
	}
	v.count++
	v.unsaved++
	v.reasons[reason]++
	// This process alone may see enough: no need to wait for the store.
	a, raise := n.verificationAlert(v, source, minute, v.count, v.reasons)
	n.mu.Unlock()
	if raise {
		n.Raise(a)
	}
}

// verifyFlush is refusals seen here, to add to the store's count.
type verifyFlush struct {
	source  string
	minute  time.Time
	n       int // not yet added
	local   int // seen here in the minute
	reasons map[string]int
}

// verificationAlert is the alert for count refusals of source in minute,
// if it reaches the threshold and none was raised here in its hour.
// n.mu is held.
func (n *Notifier) verificationAlert(v *verifyCount, source string, minute time.Time, count int, reasons map[string]int) (Alert, bool) {
	hour := minute.Truncate(verificationEvery)
	if count < n.cfg.VerificationThreshold() || v.raised.Equal(hour) {
		return Alert{}, false
	}
	v.raised = hour
	return Alert{Kind: Verification, Source: source, Incident: minute, Count: count, Reasons: reasonsText(reasons), At: n.now()}, true
}

// flushVerification adds the refusals seen here since the last tick to
// the store's per-minute counts, and raises the verification alert when
// a count across instances reaches the threshold.
func (n *Notifier) flushVerification(ctx context.Context) {
	n.mu.Lock()
	todo := n.unsavedVerify
	n.unsavedVerify = nil
	for src, v := range n.verify {
		if v.unsaved > 0 {
			todo = append(todo, verifyFlush{source: src, minute: v.minute, n: v.unsaved, local: v.count, reasons: maps.Clone(v.reasons)})
			v.unsaved = 0
		}
	}
	n.mu.Unlock()
	for _, f := range todo {
		rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		total, err := n.l.Sources().RecordVerificationFailures(rctx, f.source, f.minute, f.n)
		cancel()
		if err != nil {
			n.log.Warn("alerts: adding signature refusals to the store's count failed; this process's own count still raises the alert",
				zap.String("source", f.source), zap.Error(err))
			continue
		}
		n.mu.Lock()
		a, raise := n.verificationAlert(n.verify[f.source], f.source, f.minute, max(total, f.local), f.reasons)
		n.mu.Unlock()
		if raise {
			n.Raise(a)
		}
	}
}

func reasonsText(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// group sends the dead-letter groups whose minute ended, at each tick or
// when a new minute's dead letter ends one early, and adds the signature
// refusals seen since the last tick to the store's count.
func (n *Notifier) group(ctx context.Context) {
	defer n.wg.Done()
	t := time.NewTicker(n.groupEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-n.wake:
		}
		now := n.now().UTC()
		n.mu.Lock()
		ready := n.ready
		n.ready = nil
		for src, g := range n.dead {
			if !now.Before(g.minute.Add(deadEvery)) {
				ready = append(ready, g)
				delete(n.dead, src)
			}
		}
		n.mu.Unlock()
		for _, g := range ready {
			n.Raise(n.deadAlert(ctx, g))
		}
		n.flushVerification(ctx)
	}
}

// deadAlert is g's alert, with the store's counts: how many of the
// source's events are dead now, and how many of them went dead in g's
// minute (other instances' included), the larger of that and g's own
// count. A store that cannot be read leaves g's own count.
func (n *Notifier) deadAlert(ctx context.Context, g *deadGroup) Alert {
	a := Alert{Kind: Dead, Source: g.source, Incident: g.minute, Count: g.count, Events: g.ids, Error: g.lastErr,
		DeadNow: -1, At: n.now()}
	rctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	items, err := n.l.Queue().ListDeliveries(rctx, ledger.DeliveryFilter{Source: g.source, Status: ledger.DeliveryDead, Limit: deadScopeLimit})
	if err != nil {
		n.log.Warn("alerts: counting dead letters in the store failed; the alert gives this process's count", zap.String("source", g.source), zap.Error(err))
		return a
	}
	a.DeadNow = len(items)
	inMinute := 0
	for _, q := range items {
		if !q.FinishedAt.Before(g.minute) && q.FinishedAt.Before(g.minute.Add(deadEvery)) {
			inMinute++
		}
	}
	a.Count = max(a.Count, inMinute)
	return a
}

// Raise queues a for every target and returns at once: the claim and the
// send happen on each target's goroutine. A full queue drops a with a warn.
func (n *Notifier) Raise(a Alert) {
	if n == nil {
		return
	}
	if a.At.IsZero() {
		a.At = n.now()
	}
	for _, t := range n.targets {
		select {
		case t.q <- a:
		default:
			n.log.Warn("alerts: the target's queue is full; alert dropped", zap.String("target", t.name),
				zap.String("source", a.Source), zap.String("kind", string(a.Kind)))
		}
	}
}

// Close stops the targets' goroutines and waits for them; alerts still
// queued are dropped (another instance may still send them).
func (n *Notifier) Close() {
	if n == nil {
		return
	}
	n.closed.Do(func() {
		n.cancel()
		n.wg.Wait()
	})
}

func (n *Notifier) run(ctx context.Context, t *target) {
	defer n.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case a := <-t.q:
			n.deliver(ctx, t, a)
		}
	}
}

// deliver tries a at t until it is sent (here or by another instance),
// the tries run out, or the Notifier closes.
func (n *Notifier) deliver(ctx context.Context, t *target, a Alert) {
	for try := 1; ; try++ {
		done, err := n.once(ctx, t, a)
		if done {
			return
		}
		if try >= n.tries {
			n.log.Error("alerts: the alert could not be sent; giving up", zap.String("target", t.name),
				zap.String("source", a.Source), zap.String("kind", string(a.Kind)), zap.Int("tries", try), zap.Error(err))
			return
		}
		if err != nil {
			n.log.Warn("alerts: sending the alert failed; retrying with backoff", zap.String("target", t.name),
				zap.String("source", a.Source), zap.String("kind", string(a.Kind)), zap.Int("try", try), zap.Error(err))
		}
		timer := time.NewTimer(n.backoff(try))
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
	}
}

// once claims a at t through the ledger and, when this process holds the
// claim, sends it and settles the claim. done says a needs no further try:
// sent, here or elsewhere.
func (n *Notifier) once(ctx context.Context, t *target, a Alert) (done bool, err error) {
	if a.Kind == Recovered {
		// A recovery follows a failing alert of the same incident to the
		// same target, or nothing: an incident that raised none (too
		// short, or opened by a straggling attempt on another instance
		// after the agent was back) has nothing to recover from.
		failing, err := n.l.Check(ctx, ledger.Key{Scope: a.scope(), Intent: Alert{Kind: Failing}.intent(t.name)})
		if err != nil {
			return false, fmt.Errorf("checking the incident's failing alert in the ledger: %w", err)
		}
		if !failing.Done {
			n.log.Debug("alerts: no failing alert was sent for this incident; no recovery alert", zap.String("target", t.name),
				zap.String("source", a.Source))
			return true, nil
		}
	}
	c, err := n.l.Claim(ctx, ledger.ClaimRequest{
		Key:           ledger.Key{Scope: a.scope(), Intent: a.intent(t.name)},
		Summary:       "alert " + string(a.Kind) + " to " + t.name,
		Redeliverable: true, // a process that died holding it does not leave it ambiguous
		MaxAttempts:   n.tries * 3,
	})
	if err != nil {
		return false, fmt.Errorf("claiming the alert in the ledger: %w", err)
	}
	switch {
	case c.Status == ledger.StatusReplayed:
		n.log.Debug("alerts: the alert was sent already, by this or another instance", zap.String("target", t.name),
			zap.String("source", a.Source), zap.String("kind", string(a.Kind)))
		return true, nil // sent by some instance
	case !c.Acquired():
		return false, fmt.Errorf("the alert is %s elsewhere", c.Status) // in flight: look again later
	}
	sendErr := n.send(ctx, t, a, c.IdempotencyKey)
	outcome := ledger.OutcomeCommitted
	if sendErr != nil {
		outcome = ledger.OutcomeNotApplied // an alert sent twice is better than none
	}
	if _, err := n.l.Settle(context.WithoutCancel(ctx), c.Ref(), outcome, nil, sendErr); err != nil && sendErr == nil {
		n.log.Warn("alerts: the alert was sent but recording it failed", zap.String("target", t.name), zap.Error(err))
	}
	if sendErr == nil {
		n.log.Info("alerts: alert sent", zap.String("target", t.name), zap.String("source", a.Source), zap.String("kind", string(a.Kind)))
	}
	return sendErr == nil, sendErr
}

func (n *Notifier) send(ctx context.Context, t *target, a Alert, id string) error {
	text := a.text(n.cfg.ConsoleURL)
	var body []byte
	var err error
	dest := t.Slack
	if t.Slack != "" {
		body, err = json.Marshal(map[string]string{"text": text})
	} else {
		dest = t.Webhook
		body, err = json.Marshal(a.webhook(n.cfg.ConsoleURL))
	}
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, dest, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	if t.Webhook != "" {
		msgID := "alert_" + id
		ts := n.now()
		sig, err := forward.SignStandardWebhook(t.Secret, msgID, ts, body)
		if err != nil {
			return err
		}
		req.Header.Set("webhook-id", msgID)
		req.Header.Set("webhook-timestamp", fmt.Sprint(ts.Unix()))
		req.Header.Set("webhook-signature", sig)
	}
	resp, err := n.client.Do(req)
	if err != nil {
		return fmt.Errorf("posting to %s: %w", redact(dest), err)
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return fmt.Errorf("%s answered %s", redact(dest), resp.Status)
	}
	return nil
}
