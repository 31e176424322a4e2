package config

import (
	"strings"
	"testing"
	"time"

	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ledger"
)

// The conversation-aware delivery settings are checked at start, naming
// their field, and reach the source as written.
func TestConversationSettings(t *testing.T) {
	withForward := func(extra string) string {
		return strings.Replace(base, "timeout: ${TIMEOUT}}", "timeout: ${TIMEOUT}, "+extra+"}", 1)
	}
	vars := lookup(map[string]string{"SECRET": "s", "TIMEOUT": "1s"})
	scoped := func(y string) string {
		return strings.Replace(y, "provider: github\n", "provider: github\n    scope: \"{json:repository.id}\"\n", 1)
	}
	for _, tc := range []struct{ yaml, want string }{
		{withForward("order: fifo"), `sources.s.forward.order: "fifo" is not "scope"`},
		{withForward("mode: inline, order: scope"), "sources.s.forward.order: needs forward.mode queued"},
		{withForward("mode: inline, debounce: {quiet: 2s, max_wait: 10s}"), "sources.s.forward.debounce: needs forward.mode queued"},
		{withForward("debounce: {quiet: 0s, max_wait: 10s}"), "sources.s.forward.debounce.quiet: must be positive"},
		{withForward("debounce: {quiet: -1s, max_wait: 10s}"), "sources.s.forward.debounce.quiet: must be positive"},
		{withForward("debounce: {quiet: 2s}"), "sources.s.forward.debounce.max_wait: required"},
		{withForward("debounce: {quiet: 2s, max_wait: 1s}"), "sources.s.forward.debounce.max_wait: 1s is shorter than quiet 2s"},
		{withForward("cancel: abort"), `sources.s.forward.cancel: "abort" is not "notify"`},
		{withForward("order: scope"), "sources.s.forward.order: needs scope: without a scope rule every event is its own scope"},
		{withForward("debounce: {quiet: 2s, max_wait: 10s}"), "sources.s.forward.debounce: needs scope: without a scope rule every event is its own scope"},
		{withForward("mode: inline, cancel: notify"), "sources.s.forward.cancel: needs forward.mode queued"},
	} {
		cfg, err := Parse([]byte(tc.yaml), vars)
		if err == nil {
			err = cfg.Validate()
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want it to contain %q", tc.yaml, err, tc.want)
		}
	}
	supersede := strings.Replace(scoped(withForward("order: scope, debounce: {quiet: 2s, max_wait: 10s}, cancel: notify")), "provider: github\n", "provider: github\n    runs: supersede\n", 1)
	cfg, err := Parse([]byte(supersede), vars)
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := cfg.BuildSources()
	if err != nil {
		t.Fatal(err)
	}
	q := srcs[0].Queued().Policy
	if q.Order != ledger.OrderScope || q.Debounce != (ledger.Debounce{Quiet: 2 * time.Second, MaxWait: 10 * time.Second}) || q.Cancel != dispatch.CancelNotify {
		t.Fatalf("conversation settings: %+v", q)
	}
	// Unset, nothing changes: unordered, no debounce, no notice.
	def, err := Parse([]byte(base), vars)
	if err != nil {
		t.Fatal(err)
	}
	defSrcs, err := def.BuildSources()
	if err != nil {
		t.Fatal(err)
	}
	if q := defSrcs[0].Queued().Policy; q.Order != "" || q.Debounce != (ledger.Debounce{}) || q.Cancel != "" {
		t.Fatalf("default conversation settings: %+v", q)
	}
}
