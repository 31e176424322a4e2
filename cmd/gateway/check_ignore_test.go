package main

import (
	"strings"
	"testing"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
	"github.com/replyonce/gateway/ingress/filter"
)

// Bad ignore rules are refused by gateway check, all at once, each naming
// its field path down to the operator, with its line.
func TestCheckRefusesBadIgnoreRules(t *testing.T) {
	yaml := validSource + `    ignore:
      - name: bots
        body: {sender: {login: {$regex: "[bot"}}}
      - headers: {x-github-event: {$exists: true}}
      - body: {a: {$gt: [1]}}
      - query: {team: {$in: 3}}
      - {}
      - bodyy: {a: 1}
      - name: bots
        path: {$startsWith: /hooks}
      - name: "preset:mine"
        path: /x
    ignore_from: [agent@example.com]
    echo_of: "{json:data.object.id}"
`
	_, err := runCheck(t, yaml, map[string]string{"STRIPE_SECRET": "whsec_x"})
	if err == nil {
		t.Fatal("bad ignore rules passed gateway check")
	}
	msg := err.Error()
	for _, want := range []string{
		"sources.stripe.ignore[0].body.sender.login.$regex: \"[bot\" is not a valid regular expression",
		"sources.stripe.ignore[1].headers.x-github-event.$exists: unknown operator $exists",
		"sources.stripe.ignore[2].body.a.$gt: want a number or a string",
		"sources.stripe.ignore[3].query.team.$in: want a list of values or a string",
		"sources.stripe.ignore[4]: a rule needs at least one of headers, query, path, body",
		"sources.stripe.ignore[5].bodyy: unknown field, did you mean `body`?",
		"sources.stripe.ignore[6].name: \"bots\" is also the name of ignore[0]",
		"sources.stripe.ignore[7].name: \"preset:mine\" is reserved",
		"sources.stripe.echo_of: needs scope",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("gateway check did not say %q; it said:\n%s", want, msg)
		}
	}
	// Lines point at the rule.
	if !strings.Contains(msg, "$regex: \"[bot\" is not a valid regular expression (Go RE2 syntax): error parsing regexp: missing closing ]: `[bot` (line 8)") {
		t.Errorf("no line for the bad regex:\n%s", msg)
	}
	// ignore_from is refused for a provider whose presets do not use it,
	// and a good configuration passes and lists its rules and presets.
	good := validSource + `    ignore:
      - name: test-mode
        body: {livemode: false}
      - name: bots
        body: {data: {object: {description: {$regex: "\\[bot\\]$"}}}}
  slack:
    provider: slack
    secrets: [s3cret]
    scope: "{json:event.channel}"
    echo_of: "{json:event.client_msg_id}"
    forward: {url: "http://127.0.0.1:9000/events"}
`
	out, err := runCheck(t, good, map[string]string{"STRIPE_SECRET": "whsec_x"})
	if err != nil {
		t.Fatalf("a good configuration: %v", err)
	}
	for _, want := range []string{"ignore: test-mode bots", "ignore: preset:slack_self echo_of=\"{json:event.client_msg_id}\""} {
		if !strings.Contains(out, want) {
			t.Errorf("check output lacks %q:\n%s", want, out)
		}
	}
}

func TestCheckIgnoreFromNeedsAPreset(t *testing.T) {
	_, err := runCheck(t, validSource+"    ignore_from: [agent@example.com]\n", map[string]string{"STRIPE_SECRET": "whsec_x"})
	if err == nil || !strings.Contains(err.Error(), "sources.stripe.ignore_from: only the slack and nylas presets use it") {
		t.Fatalf("ignore_from on stripe: %v", err)
	}
}

// A rule written in YAML matches like the same rule in JSON: a regex
// ending in $ is not taken for a ${VAR}, and YAML integers equal JSON numbers.
func TestYAMLRulesMatch(t *testing.T) {
	cfg, err := config.Parse([]byte(validSource+`    ignore:
      - body: {data: {object: {description: {$regex: "\\[bot\\]$"}, amount: 2500}}}
`), env(map[string]string{"STRIPE_SECRET": "whsec_x"}))
	if err != nil {
		t.Fatal(err)
	}
	r := cfg.Sources["stripe"].Ignore[0]
	rule, err := filter.CompileRule(map[string]any{"body": r.Body}, "r")
	if err != nil {
		t.Fatal(err)
	}
	for body, want := range map[string]bool{
		`{"data":{"object":{"description":"refund by ci[bot]","amount":2500}}}`:  true,
		`{"data":{"object":{"description":"refund by ci[bot]","amount":2501}}}`:  false,
		`{"data":{"object":{"description":"refund by a person","amount":2500}}}`: false,
	} {
		if got := rule.Match(&filter.Request{Body: []byte(body)}); got != want {
			t.Errorf("%s: matched %v, want %v", body, got, want)
		}
	}
}
