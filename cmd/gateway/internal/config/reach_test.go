package config

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"

	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/ingress/dispatch"
	"github.com/replyonce/gateway/ingress/extract"
	"github.com/replyonce/gateway/ledger"
)

// reachCase is one source written in a file, and what some of its keys
// must come to in the running source.
type reachCase struct {
	source map[string]any // the source's section, over reachBase
	want   map[string]any // key path → the value the running source holds
}

// reachBase is the smallest source; every case starts from it.
func reachBase() map[string]any {
	return map[string]any{"provider": "github", "secrets": []any{"s3cret"},
		"forward": map[string]any{"url": "http://127.0.0.1:9000/events"}}
}

func durationOf(d time.Duration) *time.Duration { return &d }
func boolOf(b bool) *bool                       { return &b }

// reachCases set every key of a source to a value that is not its
// default. Keys that cannot go together (an inline-only key beside a
// queued-only one) are in separate cases.
var reachCases = []reachCase{
	{
		source: map[string]any{"provider": "stripe", "secrets": []any{"one", "two"}, "tolerance": "7m", "url": "https://gw.example/hooks/s",
			"verify_token": "vt-1", "event_id": "{header:X-Id}", "scope": []any{"{json:a}", "{json:b}"}, "context_at": "{json:created}",
			"runs": "supersede", "max_body": "2KiB", "retry_after": "3s",
			"forward": map[string]any{"url": "https://agent.example/in", "timeout": "4s", "headers": map[string]any{"Authorization": "Bearer t"},
				"signing_secret": "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw", "concurrency": 3, "accept_wait": "0s",
				"retry": map[string]any{"schedule": []any{"0s", "1m"}, "max_age": "2h"}, "reject": []any{402},
				"order": "scope", "debounce": map[string]any{"quiet": "2s", "max_wait": "9s"}, "cancel": "notify", "pause_after": 4},
			"ignore": []any{map[string]any{"name": "bots", "headers": map[string]any{"X-Bot": "yes"}, "query": map[string]any{"q": "1"},
				"path": map[string]any{"$startsWith": "/hooks"}, "body": map[string]any{"type": "ping"}}},
			"ignore_presets": false, "echo_of": "{json:message_id}", "refuse_replays": false},
		want: map[string]any{
			"provider":                  "stripe",
			"secrets":                   []string{"one", "two"},
			"tolerance":                 7 * time.Minute,
			"url":                       "https://gw.example/hooks/s",
			"verify_token":              "vt-1",
			"event_id":                  extract.Templates{"{header:X-Id}"},
			"scope":                     extract.Templates{"{json:a}", "{json:b}"},
			"context_at":                extract.Templates{"{json:created}"},
			"runs":                      ledger.ModeSupersede,
			"max_body":                  ingress.ByteSize(2048),
			"retry_after":               3 * time.Second,
			"forward.url":               "https://agent.example/in",
			"forward.timeout":           4 * time.Second,
			"forward.headers":           map[string]string{"Authorization": "Bearer t"},
			"forward.signing_secret":    "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw",
			"forward.concurrency":       3,
			"forward.accept_wait":       durationOf(0),
			"forward.retry.schedule":    []time.Duration{0, time.Minute},
			"forward.retry.max_age":     2 * time.Hour,
			"forward.reject":            []int{402},
			"forward.order":             ledger.OrderScope,
			"forward.debounce.quiet":    2 * time.Second,
			"forward.debounce.max_wait": 9 * time.Second,
			"forward.cancel":            dispatch.CancelNotify,
			"forward.pause_after":       4,
			"ignore[0].name":            "bots",
			"ignore[0].headers":         map[string]any{"X-Bot": "yes"},
			"ignore[0].query":           map[string]any{"q": "1"},
			"ignore[0].path":            map[string]any{"$startsWith": "/hooks"},
			"ignore[0].body":            map[string]any{"type": "ping"},
			"ignore_presets":            boolOf(false),
			"echo_of":                   extract.Templates{"{json:message_id}"},
			"refuse_replays":            boolOf(false),
		},
	},
	{
		source: map[string]any{"forward": map[string]any{"url": "http://127.0.0.1:9000/events", "mode": "inline", "respond": "agent", "respond_limit": "4KiB", "keep_body": true}},
		want: map[string]any{
			"forward.mode":          dispatch.ModeInline,
			"forward.respond":       ingress.RespondAgent,
			"forward.respond_limit": ingress.ByteSize(4096),
			"forward.keep_body":     true,
		},
	},
	{
		source: map[string]any{"provider": "hmac", "hmac": map[string]any{"header": "X-Sig", "algorithm": "sha512", "encoding": "base64",
			"prefix": "v1=", "separator": ",", "template": "{id}.{timestamp}.{body}", "id_header": "X-Id", "timestamp_header": "X-Ts", "tolerance": "2m"},
			"event_id": "{header:X-Id}"},
		want: map[string]any{
			"hmac.header": "X-Sig", "hmac.algorithm": "sha512", "hmac.encoding": "base64", "hmac.prefix": "v1=", "hmac.separator": ",",
			"hmac.template": "{id}.{timestamp}.{body}", "hmac.id_header": "X-Id", "hmac.timestamp_header": "X-Ts", "hmac.tolerance": 2 * time.Minute,
		},
	},
	{
		source: map[string]any{"provider": "slack", "ignore_from": []any{"U0BOT"}, "split": "{json:events}", "event_id": "{json:id}"},
		want:   map[string]any{"ignore_from": []string{"U0BOT"}, "split": "{json:events}"},
	},
}

// TestEveryKeyReachesTheSource writes every key a source takes (found by
// reflection over ingress.SourceConfig's YAML tags, so a key added later
// is covered the day it is added) with a value that is not its default,
// reads the file as `gateway serve` does, builds the sources and checks
// that the running source holds each value. A key whose tag is lost, that
// a defaults function overwrites, or that is dropped on its way from the
// file to the source fails here, naming the key. The dispatcher's view of
// the source (ingress.Source.Queued) is checked too, for the runs mode and
// the forward section's keys.
func TestEveryKeyReachesTheSource(t *testing.T) {
	keys := leafKeys(reflect.TypeOf(ingress.SourceConfig{}), "")
	defaults := reflect.ValueOf(runningSource(t, reachBase()).Config())
	covered := map[string]bool{}
	for i, c := range reachCases {
		src := runningSource(t, merge(reachBase(), c.source))
		got := reflect.ValueOf(src.Config())
		for key, want := range c.want {
			covered[key] = true
			v, ok := valueAt(got, key)
			if !ok {
				t.Errorf("case %d: %s: not a key of ingress.SourceConfig", i, key)
				continue
			}
			if !reflect.DeepEqual(v.Interface(), want) {
				t.Errorf("case %d: %s: the file says %v, the running source holds %v", i, key, show(reflect.ValueOf(want)), show(v))
			}
			if dv, ok := dispatcherValue(src.Queued(), key); ok && !reflect.DeepEqual(dv.Interface(), want) {
				t.Errorf("case %d: %s: the file says %v, the dispatcher's source holds %v", i, key, show(reflect.ValueOf(want)), show(dv))
			}
			if d, ok := valueAt(defaults, key); ok && reflect.DeepEqual(d.Interface(), want) {
				t.Errorf("case %d: %s: %v is also its default, so the case cannot tell it arrived: pick another value", i, key, show(d))
			}
		}
	}
	for _, k := range keys {
		if !covered[k] {
			t.Errorf("%s: no case writes this key; add it to reachCases with a value that is not its default", k)
		}
	}
}

// dispatcherValue is where the dispatcher's view of a source holds key,
// if it holds it: runs, and the forward section's keys in its target and
// policy.
func dispatcherValue(q *dispatch.Source, key string) (reflect.Value, bool) {
	if key == "runs" {
		return reflect.ValueOf(q.Runs), true
	}
	rest, ok := strings.CutPrefix(key, "forward.")
	if !ok {
		return reflect.Value{}, false
	}
	if v, ok := valueAt(reflect.ValueOf(q.Target), rest); ok {
		return v, true
	}
	return valueAt(reflect.ValueOf(q.Policy), rest)
}

// runningSource parses a file holding one source and builds it as serve
// does.
func runningSource(t *testing.T, source map[string]any) *ingress.Source {
	t.Helper()
	doc, err := yaml.Marshal(map[string]any{"store": map[string]any{"kind": "memory"}, "sources": map[string]any{"s": source}})
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Parse(doc, lookup(nil))
	if err != nil {
		t.Fatalf("%s\n%v", doc, err)
	}
	srcs, err := cfg.BuildSources()
	if err != nil {
		t.Fatalf("%s\n%v", doc, err)
	}
	return srcs[0]
}

// leafKeys lists the key paths of t's YAML leaves: a struct's keys by
// their tags (",inline" structs flattened, "-" left out), one element
// [0] of a list of structs, and anything else as one value.
func leafKeys(t reflect.Type, path string) []string {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch {
	case t.Kind() == reflect.Struct:
		fields, names := yamlFields(t)
		var out []string
		for _, n := range names {
			out = append(out, leafKeys(fields[n], join(path, n))...)
		}
		return out
	case t.Kind() == reflect.Slice && t.Elem().Kind() == reflect.Struct:
		return leafKeys(t.Elem(), path+"[0]")
	}
	return []string{path}
}

// valueAt follows a key path such as "forward.retry.max_age" or
// "ignore[0].name" through v by YAML tags.
func valueAt(v reflect.Value, path string) (reflect.Value, bool) {
	for _, seg := range strings.Split(path, ".") {
		name, idx, indexed := strings.Cut(seg, "[")
		for v.Kind() == reflect.Pointer {
			if v.IsNil() {
				return reflect.Value{}, false
			}
			v = v.Elem()
		}
		if v.Kind() != reflect.Struct {
			return reflect.Value{}, false
		}
		var ok bool
		if v, ok = fieldByKey(v, name); !ok {
			return reflect.Value{}, false
		}
		if indexed {
			i, err := strconv.Atoi(strings.TrimSuffix(idx, "]"))
			if err != nil || v.Kind() != reflect.Slice || i >= v.Len() {
				return reflect.Value{}, false
			}
			v = v.Index(i)
		}
	}
	return v, true
}

// fieldByKey is the field of struct v whose YAML key is key, looking
// inside ",inline" structs.
func fieldByKey(v reflect.Value, key string) (reflect.Value, bool) {
	for i := range v.NumField() {
		f := v.Type().Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case name == key:
			return v.Field(i), true
		case name == "" && opts == "inline" && f.Type.Kind() == reflect.Struct:
			if fv, ok := fieldByKey(v.Field(i), key); ok {
				return fv, true
			}
		}
	}
	return reflect.Value{}, false
}

// merge lays over onto base, recursing into sections both have.
func merge(base, over map[string]any) map[string]any {
	for k, v := range over {
		if bm, ok := base[k].(map[string]any); ok {
			if om, ok := v.(map[string]any); ok {
				base[k] = merge(bm, om)
				continue
			}
		}
		base[k] = v
	}
	return base
}

func show(v reflect.Value) string {
	if v.Kind() == reflect.Pointer && !v.IsNil() {
		return "&" + show(v.Elem())
	}
	return fmt.Sprintf("%v", v.Interface())
}

// The key list itself is right: a sample of keys, nested and inline ones
// among them, and none of the fields the file cannot set.
func TestLeafKeysFollowTheTags(t *testing.T) {
	keys := leafKeys(reflect.TypeOf(ingress.SourceConfig{}), "")
	for _, k := range []string{"secrets", "hmac.tolerance", "forward.mode", "forward.retry.max_age", "forward.debounce.quiet", "ignore[0].body"} {
		if !slices.Contains(keys, k) {
			t.Errorf("%s missing from %v", k, keys)
		}
	}
	for _, k := range keys {
		if k == "" || strings.Contains(k, "Name") || strings.Contains(k, "Fetcher") || strings.Contains(k, "fetcher") {
			t.Errorf("%q is not a key of the file", k)
		}
	}
}
