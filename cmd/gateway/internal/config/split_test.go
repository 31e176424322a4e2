package config

import (
	"strings"
	"testing"
)

// split reaches the source: a batch source describes its split path, and a bad one names the field.
func TestSplitSetting(t *testing.T) {
	env := func(string) (string, bool) { return "", false }
	doc := "listen: 127.0.0.1:0\nstore: {kind: memory}\nsources:\n  gc:\n    provider: gocardless\n    secrets: [s]\n    split: default\n    forward: {url: http://127.0.0.1:9000/e}\n"
	cfg, err := Parse([]byte(doc), env)
	if err != nil {
		t.Fatal(err)
	}
	srcs, err := cfg.BuildSources()
	if err != nil {
		t.Fatal(err)
	}
	if d := srcs[0].Describe(); !strings.Contains(d, "split={json:events}") || !strings.Contains(d, "event_id={json:id}") {
		t.Errorf("describe: %s", d)
	}
	_, err = Parse([]byte(strings.Replace(doc, "split: default", "split: events", 1)), env)
	if err == nil || !strings.Contains(err.Error(), "sources.gc.split") {
		t.Errorf("bad split: %v", err)
	}
}
