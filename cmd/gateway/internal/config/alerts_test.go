package config

import (
	"strings"
	"testing"
)

// The alerts: section reaches the alerts package's own Config, and a bad
// target is refused naming its key.
func TestAlertsSection(t *testing.T) {
	y := `alerts:
  after_failures: 5
  console_url: https://gw.example.com/console
  targets:
    - slack: https://hooks.slack.com/services/T0/B0/x
    - webhook: https://ops.example.com/hooks
      secret: whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw
` + base
	cfg, err := Parse([]byte(y), lookup(map[string]string{"SECRET": "s", "TIMEOUT": "1s"}))
	if err != nil {
		t.Fatal(err)
	}
	a := cfg.Alerts
	if a.AfterFailures != 5 || a.Threshold() != 5 || a.ConsoleURL != "https://gw.example.com/console" || len(a.Targets) != 2 ||
		a.Targets[0].Slack != "https://hooks.slack.com/services/T0/B0/x" || a.Targets[1].Webhook != "https://ops.example.com/hooks" ||
		a.Targets[1].Secret != "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw" {
		t.Fatalf("alerts = %+v", a)
	}
	for _, tc := range []struct{ yaml, want string }{
		{"alerts: {targets: [{webhook: 'https://x.example/h'}]}\n", "alerts.targets[0].secret"},
		{"alerts: {targets: [{slack: 'not a url'}]}\n", "alerts.targets[0].slack"},
		{"alerts: {targets: [{}]}\n", "alerts.targets[0]: set slack"},
		{"alerts: {after_failures: -1}\n", "alerts.after_failures"},
	} {
		cfg, err := Parse([]byte(tc.yaml+base), lookup(map[string]string{"SECRET": "s", "TIMEOUT": "1s"}))
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s: error %v, want it to name %q", tc.yaml, err, tc.want)
		}
	}
}
