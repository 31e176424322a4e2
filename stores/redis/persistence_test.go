package redis

import (
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/replyonce/gateway/stores/redis/redistest"
)

// Persistence reads what a crash of the server can lose, and says it.
func TestPersistenceSaysWhatACrashLoses(t *testing.T) {
	url := redistest.Start(t) // persistence off
	ctx := ctxT(t)
	s, err := Open(ctx, url, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	admin := goredis.NewClient(mustParse(t, url))
	defer admin.Close()

	for _, tc := range []struct {
		name         string
		set          map[string]string
		processLoses bool
		says         string // in CrashLoses; "" for nothing
	}{
		{"off", map[string]string{"appendonly": "no", "save": ""}, true, "persistence is off"},
		{"snapshots only", map[string]string{"appendonly": "no", "save": "3600 1"}, true, "since its last snapshot"},
		{"aof everysec", map[string]string{"appendonly": "yes", "appendfsync": "everysec"}, false, "about the last second"},
		{"aof always", map[string]string{"appendonly": "yes", "appendfsync": "always"}, false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range tc.set {
				if err := admin.ConfigSet(ctx, k, v).Err(); err != nil {
					t.Fatalf("CONFIG SET %s %q: %v", k, v, err)
				}
			}
			p, err := s.Persistence(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if p.ProcessCrashLoses() != tc.processLoses {
				t.Errorf("%+v: ProcessCrashLoses %v, want %v", p, p.ProcessCrashLoses(), tc.processLoses)
			}
			got := p.CrashLoses()
			if tc.says == "" && got != "" || !strings.Contains(got, tc.says) {
				t.Errorf("%+v: CrashLoses %q, want it to say %q", p, got, tc.says)
			}
		})
	}
}

// A server that refuses CONFIG (a managed service, an ACL) leaves the
// settings unknown: an error, not a guess.
func TestPersistenceRefusedIsAnError(t *testing.T) {
	url := redistest.Start(t)
	ctx := ctxT(t)
	admin := goredis.NewClient(mustParse(t, url))
	defer admin.Close()
	if err := admin.Do(ctx, "ACL", "SETUSER", "gateway", "on", ">pw", "~*", "+@all", "-config").Err(); err != nil {
		t.Fatal(err)
	}
	s, err := Open(ctx, strings.Replace(url, "unix://", "unix://gateway:pw@", 1), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if p, err := s.Persistence(ctx); err == nil || !strings.Contains(err.Error(), "CONFIG GET") {
		t.Fatalf("Persistence = %+v, %v; want the refusal", p, err)
	}
}

func mustParse(t *testing.T, url string) *goredis.Options {
	t.Helper()
	o, err := goredis.ParseURL(url)
	if err != nil {
		t.Fatal(err)
	}
	return o
}
