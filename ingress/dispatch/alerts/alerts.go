package alerts

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
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
)

// DefaultAfterFailures is how many failed attempts in a row raise the
// failing alert when alerts.after_failures is not set: one failure is
// often a blip (a deploy of the agent), three in a row rarely are.
const DefaultAfterFailures = 3

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

// Validate checks the section, naming the key at fault.
func (c Config) Validate() error {
	if c.AfterFailures < 0 {
		return fmt.Errorf("alerts.after_failures: %d is negative (0 means %d)", c.AfterFailures, DefaultAfterFailures)
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
	Kind     Kind
	Source   string
	Incident time.Time
	// Error is the last failure in plain words (forward.AgentError).
	Error string
	// Failures counts the failed attempts in a row (failing, paused).
	Failures int
	// Lasted is how long the incident lasted (recovered).
	Lasted time.Duration
	// At is when it was raised.
	At time.Time
}

// scope is the ledger scope of the alert's incident: the same on every
// process that sees it, since Incident is read from the store.
func (a Alert) scope() string {
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
		fmt.Fprintf(&b, "Source %s is failing: %d attempts in a row since %s; events are kept and retried. Last error: %s",
			a.Source, a.Failures, a.Incident.UTC().Format(time.RFC3339), a.Error)
	case Recovered:
		fmt.Fprintf(&b, "Source %s recovered: its agent answers again after %s; waiting events are due now.",
			a.Source, a.Lasted.Round(time.Second))
	case Paused:
		fmt.Fprintf(&b, "Source %s paused itself: its agent refused %d times in a row (forward.pause_after). Events keep queueing; fix the agent or the configuration, then run: gateway sources resume %s. Last error: %s",
			a.Source, a.Failures, a.Source, a.Error)
	default:
		fmt.Fprintf(&b, "Source %s: %s", a.Source, a.Kind)
	}
	if console != "" {
		fmt.Fprintf(&b, " <%s|Open %s in the console>", sourceLink(console, a.Source), a.Source)
	}
	return b.String()
}

func sourceLink(console, source string) string {
	return strings.TrimRight(console, "/") + "/sources/" + url.PathEscape(source)
}

// webhookBody is the JSON a webhook target receives.
type webhookBody struct {
	Type     string    `json:"type"` // source.failing, source.recovered, source.paused
	Source   string    `json:"source"`
	Incident time.Time `json:"incidentStart"`
	Error    string    `json:"lastError,omitempty"`
	Failures int       `json:"consecutiveFailures,omitempty"`
	Lasted   float64   `json:"failingSeconds,omitempty"`
	At       time.Time `json:"at"`
	Text     string    `json:"text"`
	Console  string    `json:"consoleUrl,omitempty"`
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
	ctx, cancel := context.WithCancel(context.Background())
	n := &Notifier{cfg: o.Config, l: o.Ledger, client: o.Client, log: o.Logger, now: o.Clock, backoff: o.Backoff,
		tries: o.Tries, cancel: cancel}
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

// AfterFailures is the failing alert's threshold; 0 for a nil Notifier.
func (n *Notifier) AfterFailures() int {
	if n == nil {
		return 0
	}
	return n.cfg.Threshold()
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
		wb := webhookBody{Type: "source." + string(a.Kind), Source: a.Source, Incident: a.Incident.UTC(), Error: a.Error,
			Failures: a.Failures, Lasted: a.Lasted.Seconds(), At: a.At.UTC(), Text: a.text("")}
		if n.cfg.ConsoleURL != "" {
			wb.Console = sourceLink(n.cfg.ConsoleURL, a.Source)
		}
		body, err = json.Marshal(wb)
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
