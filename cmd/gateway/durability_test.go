package main

import (
	"strings"
	"testing"

	"github.com/replyonce/gateway/stores/redis/redistest"
)

// serve says at start what the Redis store's server can lose: a warning
// when persistence is off (a crash of Redis loses acknowledged events),
// nothing at warn when appendonly and appendfsync always keep them.
func TestServeWarnsWhenRedisPersistenceIsOff(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
		warn bool
	}{
		{"off", nil, true},
		{"snapshots only", []string{"--save", "3600 1"}, true},
		{"appendonly always", []string{"--appendonly", "yes", "--appendfsync", "always"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url := redistest.Start(t, tc.args...)
			sink := newSink(t)
			g := startGateway(t, writeConfig(t, "{kind: redis, url: '"+url+"'}", "", sink.srv.URL))
			g.stop(t)
			var warned []string
			for _, l := range logLines(t, g.stderr.String()) {
				if msg, _ := l["msg"].(string); l["level"] == "warn" && strings.Contains(msg, "Redis") {
					warned = append(warned, msg)
					if l["see"] != "docs/durability.md says what each setting keeps" {
						t.Errorf("the warning points nowhere: %v", l)
					}
				}
			}
			if got := len(warned) > 0; got != tc.warn {
				t.Fatalf("warned %v (%q), want %v\n%s", got, warned, tc.warn, g.stderr.String())
			}
		})
	}
}
