package ingress

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"
	"github.com/tidwall/gjson"

	"github.com/replyonce/gateway/ingress/extract"
	"github.com/replyonce/gateway/ingress/field"
	"github.com/replyonce/gateway/ingress/filter"
)

// IgnoreRule is one entry of a source's ignore list: JSON filters (Hookdeck
// and Convoy syntax, see ingress/filter) over the request's sections, all
// of which must match. Name labels the rule in metrics and logs; without
// one the rule is called ignore[i].
type IgnoreRule struct {
	Name    string `yaml:"name"`
	Headers any    `yaml:"headers"`
	Query   any    `yaml:"query"`
	Path    any    `yaml:"path"`
	Body    any    `yaml:"body"`
}

// spec is the rule's sections as filter.CompileRule takes them.
func (r IgnoreRule) spec() map[string]any {
	m := map[string]any{}
	for k, v := range map[string]any{"headers": r.Headers, "query": r.Query, "path": r.Path, "body": r.Body} {
		if v != nil {
			m[k] = v
		}
	}
	return m
}

// matcher is one reason to ignore an event: a configured rule or a preset.
type matcher struct {
	label string // metric label and log reason
	rule  *filter.Rule
	// preset, when set, looks at the raw body (and its request) instead.
	preset func(req *filter.Request) bool
}

// Preset names, as they appear in the rule label "preset:NAME".
const (
	PresetSlackSelf     = "slack_self"
	PresetAutoSubmitted = "auto_submitted"
	PresetOwnAddress    = "own_address"
)

// ruleEcho labels events ignored as the agent's own echo.
const ruleEcho = "echo_of"

// compileIgnore builds a source's matchers: its rules in order, then the
// provider's presets unless they are switched off.
func compileIgnore(cfg SourceConfig, source string) ([]matcher, error) {
	var out []matcher
	var errs []error
	seen := map[string]int{}
	for i, r := range cfg.Ignore {
		path := fmt.Sprintf("%s.ignore[%d]", source, i)
		label := r.Name
		if label == "" {
			label = fmt.Sprintf("ignore[%d]", i)
		} else if strings.HasPrefix(label, "preset:") || label == ruleEcho {
			errs = append(errs, field.Errorf(path+".name", "%q is reserved for the built-in reasons", label))
			continue
		}
		if j, dup := seen[label]; dup {
			errs = append(errs, field.Errorf(path+".name", "%q is also the name of ignore[%d]: metrics count by name", label, j))
			continue
		}
		seen[label] = i
		rule, err := filter.CompileRule(r.spec(), path)
		if err != nil {
			errs = append(errs, filterFieldErr(err, path))
			continue
		}
		out = append(out, matcher{label: label, rule: rule})
	}
	if len(cfg.IgnoreFrom) > 0 && cfg.Provider != "slack" && cfg.Provider != "nylas" {
		errs = append(errs, field.Errorf(source+".ignore_from", "only the slack and nylas presets use it (provider is %q): write an ignore rule instead", cfg.Provider))
	}
	for i, a := range cfg.IgnoreFrom {
		if strings.TrimSpace(a) == "" {
			errs = append(errs, field.Errorf(fmt.Sprintf("%s.ignore_from[%d]", source, i), "is empty"))
		}
	}
	if len(errs) > 0 {
		// Every bad rule at once, each naming its field.
		return nil, errors.Join(errs...)
	}
	if cfg.IgnorePresets != nil && !*cfg.IgnorePresets {
		return out, nil
	}
	return append(out, presetsFor(cfg.Provider, cfg.IgnoreFrom)...), nil
}

func filterFieldErr(err error, path string) error {
	var fe *field.Error
	if errors.As(err, &fe) {
		return fe
	}
	return field.Wrap(path, err)
}

// presetsFor lists the presets on by default for a provider.
func presetsFor(provider string, own []string) []matcher {
	var out []matcher
	add := func(name string, f func(*filter.Request) bool) {
		out = append(out, matcher{label: "preset:" + name, preset: f})
	}
	switch provider {
	case "slack":
		add(PresetSlackSelf, func(r *filter.Request) bool { return slackSelf(r.Body, own) })
	case "postmark":
		add(PresetAutoSubmitted, func(r *filter.Request) bool { return autoSubmitted(gjson.GetBytes(r.Body, "Headers"), "Name", "Value") })
	case "nylas":
		add(PresetAutoSubmitted, func(r *filter.Request) bool {
			return autoSubmitted(gjson.GetBytes(r.Body, "data.object.headers"), "name", "value")
		})
		if len(own) > 0 {
			add(PresetOwnAddress, func(r *filter.Request) bool { return nylasFromOwn(r.Body, own) })
		}
	}
	return out
}

// slackKept are the event types Bolt delivers even when the app's own bot
// user caused them: they say something about a channel, not a message.
var slackKept = []string{"member_joined_channel", "member_left_channel"}

// slackSelf follows Bolt's ignoreSelf for Events API callbacks: an event
// whose user is the app's bot user, or a message posted by the app's own
// bot, is the app hearing itself. Bolt learns its bot user and bot id from
// auth.test; the gateway calls no API, so it reads the bot user from the
// envelope's authorizations (the entry with is_bot) and recognises its
// bot's posts by event.bot_id with an app_id equal to the envelope's
// api_app_id. own adds user or bot ids the operator listed (ignore_from).
func slackSelf(body []byte, own []string) bool {
	env := gjson.ParseBytes(body)
	if env.Get("type").String() != "event_callback" {
		return false
	}
	ev := env.Get("event")
	if slices.Contains(slackKept, ev.Get("type").String()) {
		return false
	}
	if user := ev.Get("user").String(); user != "" {
		if slices.Contains(own, user) {
			return true
		}
		bot := false
		env.Get("authorizations").ForEach(func(_, a gjson.Result) bool {
			if a.Get("is_bot").Bool() && a.Get("user_id").String() == user {
				bot = true
				return false
			}
			return true
		})
		if bot {
			return true
		}
	}
	if botID := ev.Get("bot_id").String(); botID != "" {
		if slices.Contains(own, botID) {
			return true
		}
		app := env.Get("api_app_id").String()
		for _, p := range []string{"app_id", "bot_profile.app_id"} {
			if v := ev.Get(p).String(); app != "" && v == app {
				return true
			}
		}
	}
	return false
}

// autoSubmitted reports whether a list of {name, value} header objects
// holds Auto-Submitted with a value other than "no" (RFC 3834 section 5:
// auto-generated, auto-replied and any other keyword mean a machine sent
// it; parameters after ';' do not change the keyword).
func autoSubmitted(headers gjson.Result, nameKey, valueKey string) bool {
	found := false
	headers.ForEach(func(_, h gjson.Result) bool {
		if !strings.EqualFold(strings.TrimSpace(h.Get(nameKey).String()), "Auto-Submitted") {
			return true
		}
		kw, _, _ := strings.Cut(h.Get(valueKey).String(), ";")
		if kw = strings.ToLower(strings.TrimSpace(kw)); kw != "no" && kw != "" {
			found = true
			return false
		}
		return true
	})
	return found
}

// nylasFromOwn reports whether a Nylas message notification is from one of
// the agent's own addresses (compared case-insensitively): its outbound
// mail fires message.created too.
func nylasFromOwn(body []byte, own []string) bool {
	hit := false
	gjson.GetBytes(body, "data.object.from").ForEach(func(_, f gjson.Result) bool {
		addr := strings.TrimSpace(f.Get("email").String())
		for _, o := range own {
			if addr != "" && strings.EqualFold(addr, strings.TrimSpace(o)) {
				hit = true
				return false
			}
		}
		return true
	})
	return hit
}

// ignoredBy returns the label of the first matcher the request meets.
func (s *Source) ignoredBy(req *http.Request, body []byte, ctype string) (string, bool) {
	if len(s.ignore) == 0 {
		return "", false
	}
	fr := &filter.Request{Header: req.Header, Query: req.URL.Query(), Path: req.URL.Path, Body: body, ContentType: ctype}
	for _, m := range s.ignore {
		if m.rule != nil && m.rule.Match(fr) || m.preset != nil && m.preset(fr) {
			return m.label, true
		}
	}
	return "", false
}

// echoOf checks whether an event is the agent's own echo: its echo_of value
// is held by an effect the agent committed on the event's scope.
func (g *Gateway) echoOf(ctx context.Context, src *Source, in *extract.Input, scope string) (bool, error) {
	if src.echoOf == nil {
		return false, nil
	}
	v, ok := src.echoOf.Resolve(in)
	if !ok || v == "" {
		return false, nil
	}
	sctx, cancel := g.storeCtx(ctx)
	defer cancel()
	_, found, err := g.ledger.CommittedValue(sctx, scope, v, IntentDeliver)
	if err != nil {
		g.metrics.storeErrors.WithLabelValues(src.Name).Inc()
		return false, &Error{Status: http.StatusServiceUnavailable, Message: "ledger unavailable", Reason: "store", RetryAfter: src.cfg.RetryAfter, Cause: err}
	}
	return found, nil
}

// ignored answers an ignored event: 200, counted by rule, nothing written.
func (g *Gateway) ignored(c echo.Context, d *delivery, src *Source, label string) error {
	g.metrics.ignored.WithLabelValues(src.Name, label).Inc()
	d.decision, d.reason = decIgnored, label
	return g.ok(c, d, answer{Status: "ignored", EventID: d.eventID})
}

// ignoreLogKey groups an ignored event's log lines for throttling.
func ignoreLogKey(source, rule string) string { return source + " ignored " + rule }
