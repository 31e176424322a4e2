package main

import (
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/replyonce/gateway/cmd/gateway/internal/config"
)

// configKeys lists every key path the YAML configuration accepts, read by
// reflection from config.Config's yaml tags: a map's keys are NAME
// (sources.NAME.provider), a list's elements [] (sources.NAME.ignore[].name).
func configKeys() []string {
	seen := map[string]bool{}
	var walk func(t reflect.Type, path string, depth int)
	walk = func(t reflect.Type, path string, depth int) {
		if depth > 8 {
			return
		}
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		switch t.Kind() {
		case reflect.Map:
			if t.Key().Kind() == reflect.String {
				walk(t.Elem(), path+".NAME", depth+1)
			}
			return
		case reflect.Slice, reflect.Array:
			walk(t.Elem(), path+"[]", depth+1)
			return
		case reflect.Struct:
		default:
			return
		}
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			tag := f.Tag.Get("yaml")
			name, opts, _ := strings.Cut(tag, ",")
			if name == "-" || !f.IsExported() {
				continue
			}
			if strings.Contains(opts, "inline") || (name == "" && f.Anonymous) {
				walk(f.Type, path, depth+1)
				continue
			}
			if name == "" {
				continue
			}
			p := name
			if path != "" {
				p = path + "." + name
			}
			seen[p] = true
			walk(f.Type, p, depth+1)
		}
	}
	walk(reflect.TypeOf(config.Config{}), "", 0)
	keys := make([]string, 0, len(seen))
	for k := range seen {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// docs/configuration.md names every key the configuration accepts, by its
// full path in code (`sources.NAME.forward.retry.schedule`): a key added to
// the config structs without a line there fails here.
func TestDocsConfigurationCoversEveryKey(t *testing.T) {
	b, err := os.ReadFile("../../docs/configuration.md")
	if err != nil {
		t.Fatal(err)
	}
	page := string(b)
	keys := configKeys()
	if len(keys) < 100 {
		t.Fatalf("found only %d configuration keys by reflection", len(keys))
	}
	for _, k := range keys {
		if !strings.Contains(page, "`"+k+"`") {
			t.Errorf("docs/configuration.md does not name `%s`", k)
		}
	}
}
