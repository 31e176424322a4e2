package config

import (
	"strings"
	"testing"

	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ingress/field"
)

// Values that do nothing are refused, each naming its field and line: an
// empty retry schedule, a zero concurrency and a zero retention would
// silently mean the default, and cancel: notify without runs: supersede
// would never send a notice. The default schedule is named from
// dispatch.DefaultSchedule, so changing it is a change to ingress/dispatch
// alone.
func TestNoOpValuesRefused(t *testing.T) {
	const head = `ledger: {retention: 72h}
sources:
  s:
    provider: github
    secrets: [s3cret]
`
	for _, tc := range []struct{ name, yaml, want string }{
		{"empty retry schedule", head + `    forward:
      url: http://127.0.0.1:9000/x
      retry: {schedule: []}
`, "sources.s.forward.retry.schedule: an empty schedule means the default one (" + formatSchedule(dispatch.DefaultSchedule) +
			"); leave it out, or list at least one delay (line 8)"},
		{"zero concurrency", head + `    forward:
      url: http://127.0.0.1:9000/x
      concurrency: 0
`, "sources.s.forward.concurrency: 0 is not a limit: it means the default 16; leave it out, or give 1 or more (line 8)"},
		{"zero retention", strings.Replace(head, "retention: 72h", "retention: 0s", 1) + `    forward: {url: http://127.0.0.1:9000/x}
`, "ledger.retention: 0s does not turn retention off: it means the default 168h0m0s; leave it out, or give a positive duration (line 1)"},
		{"cancel notify without supersede", head + `    runs: independent
    forward:
      url: http://127.0.0.1:9000/x
      cancel: notify
`, `sources.s.forward.cancel: notify needs runs: supersede (runs is "independent"): only a superseded run gets a cancellation notice (line 9)`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.yaml), lookup(nil))
			problems := field.List(err)
			if len(problems) != 1 || problems[0].Error() != tc.want {
				t.Fatalf("problems %v, want exactly:\n%s", err, tc.want)
			}
		})
	}
	// The same settings left out, or given a value that does something,
	// are taken.
	for _, ok := range []string{
		head + "    forward: {url: http://127.0.0.1:9000/x}\n",
		head + "    forward: {url: http://127.0.0.1:9000/x, concurrency: 1, retry: {schedule: [0s]}}\n",
		head + "    runs: supersede\n    forward: {url: http://127.0.0.1:9000/x, cancel: notify}\n",
	} {
		if _, err := Parse([]byte(ok), lookup(nil)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}
