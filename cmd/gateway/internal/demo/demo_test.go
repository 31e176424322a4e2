package demo

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func run(t *testing.T, cfg Config) *Report {
	t.Helper()
	rep, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func render(t *testing.T, rep *Report, colour bool) string {
	t.Helper()
	var b bytes.Buffer
	if err := rep.Write(&b, colour); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestDemoDefaultSeedNoDuplicatesWithGateway(t *testing.T) {
	rep := run(t, Config{Seed: DefaultSeed, Conversations: DefaultConversations})
	if rep.With.Duplicates != 0 || rep.With.Unanswered != 0 {
		t.Errorf("with the gateway: %d duplicates, %d unanswered %v; want none", rep.With.Duplicates, rep.With.Unanswered, rep.With.Missing)
	}
	if rep.Without.Duplicates == 0 {
		t.Error("without the gateway: no duplicates; the faults are not biting")
	}
	if rep.With.Messages != rep.Without.Messages {
		t.Errorf("messages differ between runs: %d with, %d without", rep.With.Messages, rep.Without.Messages)
	}
	// Every fault kind, and every ledger path that answers one, must have
	// happened, or the demo shows less than it claims.
	for name, n := range map[string]int{
		"worker crashes (with)":         rep.With.Faults.WorkerCrash,
		"duplicate deliveries (with)":   rep.With.Faults.DuplicateDelivery,
		"customer bursts (with)":        rep.With.Faults.CustomerBurst,
		"timeouts before send (with)":   rep.With.Faults.TimeoutBeforeSend,
		"timeouts after send (with)":    rep.With.Faults.TimeoutAfterSend,
		"repeats answered by gateway":   rep.Stats.Repeats,
		"in-flight 503s":                rep.Stats.InFlight,
		"superseded refusals":           rep.Stats.Superseded,
		"conversation_changed refusals": rep.Stats.ConversationChanged,
		"reconciled sends":              rep.Stats.Reconciled,
	} {
		if n == 0 {
			t.Errorf("%s: none with seed %d", name, DefaultSeed)
		}
	}
	out := render(t, rep, false)
	if !strings.Contains(out, "No customer message was answered twice with the gateway.") {
		t.Errorf("report lacks the verdict:\n%s", out)
	}
}

// TestDemoManySeeds holds the promise beyond the default seed.
func TestDemoManySeeds(t *testing.T) {
	for seed := uint64(1); seed <= 10; seed++ {
		rep := run(t, Config{Seed: seed, Conversations: 40})
		if rep.With.Duplicates != 0 || rep.With.Unanswered != 0 {
			t.Errorf("seed %d with the gateway: %d duplicates, %d unanswered %v", seed, rep.With.Duplicates, rep.With.Unanswered, rep.With.Missing)
		}
	}
}

func TestDemoSameSeedSameOutput(t *testing.T) {
	cfg := Config{Seed: 42, Conversations: 60}
	a := render(t, run(t, cfg), true)
	b := render(t, run(t, cfg), true)
	if a != b {
		t.Errorf("two runs of seed 42 differ:\n%s\n---\n%s", a, b)
	}
}

func TestDemoSeedsDiffer(t *testing.T) {
	a := render(t, run(t, Config{Seed: 7, Conversations: 60}), false)
	b := render(t, run(t, Config{Seed: 8, Conversations: 60}), false)
	if strings.ReplaceAll(a, "seed 7", "seed 8") == b {
		t.Error("seeds 7 and 8 print the same counts")
	}
}

func TestDemoBoltMatchesMemory(t *testing.T) {
	path := filepath.Join(t.TempDir(), "ledger.db")
	cfg := Config{Seed: DefaultSeed, Conversations: 25}
	mem := render(t, run(t, cfg), false)
	cfg.Store, cfg.StorePath = "bolt", path
	onBolt := render(t, run(t, cfg), false)
	if strings.Replace(onBolt, "bolt store", "memory store", 1) != mem {
		t.Errorf("bolt and memory disagree:\n%s\n---\n%s", onBolt, mem)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("the bolt file given by StorePath should stay: %v", err)
	}
	// A second run must not reuse a ledger that already knows every event.
	if _, err := Run(context.Background(), cfg); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("run over an existing store file: err = %v, want a refusal", err)
	}
}

func TestDemoBoltTemporary(t *testing.T) {
	rep := run(t, Config{Seed: 3, Conversations: 20, Store: "bolt"})
	if rep.With.Duplicates != 0 || rep.Store != "bolt" {
		t.Errorf("bolt in a temporary directory: %+v", rep.With)
	}
}

func TestDemoRejectsBadConfig(t *testing.T) {
	for _, cfg := range []Config{{Conversations: 0}, {Conversations: 1, Store: "postgres"}} {
		if _, err := Run(context.Background(), cfg); err == nil {
			t.Errorf("Run(%+v) = nil error", cfg)
		}
	}
}

func TestDemoColour(t *testing.T) {
	env := func(vars map[string]string) func(string) (string, bool) {
		return func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	}
	var buf bytes.Buffer
	file, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for _, c := range []struct {
		name string
		vars map[string]string
		want bool
	}{
		{"piped, nothing set", nil, false},
		{"FORCE_COLOR=1", map[string]string{"FORCE_COLOR": "1"}, true},
		{"FORCE_COLOR empty", map[string]string{"FORCE_COLOR": ""}, true},
		{"FORCE_COLOR=0", map[string]string{"FORCE_COLOR": "0"}, false},
		{"FORCE_COLOR=false", map[string]string{"FORCE_COLOR": "false"}, false},
		{"NO_COLOR=1", map[string]string{"NO_COLOR": "1"}, false},
		{"both: FORCE_COLOR wins", map[string]string{"NO_COLOR": "1", "FORCE_COLOR": "1"}, true},
	} {
		for _, out := range []any{&buf, file} {
			if got := Colour(out.(interface{ Write([]byte) (int, error) }), env(c.vars)); got != c.want {
				t.Errorf("%s, %T: colour = %v, want %v", c.name, out, got, c.want)
			}
		}
	}
	// A character device is what a terminal looks like to Stat; /dev/null is
	// one too, so it stands in for a terminal here.
	if null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0); err == nil {
		defer null.Close()
		if info, err := null.Stat(); err == nil && info.Mode()&os.ModeCharDevice != 0 {
			if !Colour(null, env(nil)) {
				t.Error("character device, nothing set: no colour, want colour")
			}
			if Colour(null, env(map[string]string{"NO_COLOR": "1"})) {
				t.Error("character device, NO_COLOR=1: colour, want none")
			}
			if !Colour(null, env(map[string]string{"NO_COLOR": ""})) {
				t.Error("character device, NO_COLOR empty: no colour; an empty NO_COLOR should not count")
			}
		}
	}

	rep := run(t, Config{Seed: 1, Conversations: 5})
	if out := render(t, rep, false); strings.Contains(out, "\x1b[") {
		t.Errorf("colourless report has escape codes:\n%q", out)
	}
	if out := render(t, rep, true); !strings.Contains(out, "\x1b[1;32m") {
		t.Errorf("coloured report lacks the green verdict:\n%q", out)
	}
}

// The burst scenario: debounce answers each burst with one turn and one
// reply, inline needs a turn per message, and without the gateway every
// copy of a webhook is another turn and a duplicate reply.
func TestBurstScenario(t *testing.T) {
	rep := run(t, Config{Seed: DefaultSeed, Conversations: 1})
	b := rep.Bursts
	if b.Conversations != DefaultBursts || b.Messages <= b.Conversations || b.Copies == 0 {
		t.Fatalf("scenario: %+v", b)
	}
	for name, o := range map[string]BurstOutcome{"without": b.Without, "inline": b.Inline, "debounced": b.Debounced} {
		if o.Messages != b.Messages || o.Unanswered != 0 {
			t.Errorf("%s: %+v, want all %d messages answered", name, o, b.Messages)
		}
	}
	if b.Debounced.Turns != b.Conversations || b.Debounced.Replies != b.Conversations || b.Debounced.Duplicates != 0 {
		t.Errorf("queued + debounce: %+v, want one turn and one reply per burst (%d)", b.Debounced, b.Conversations)
	}
	if b.Inline.Turns != b.Messages || b.Inline.Duplicates != 0 {
		t.Errorf("inline: %+v, want a turn per message (%d) and no duplicates", b.Inline, b.Messages)
	}
	if b.Without.Duplicates != b.Copies || b.Without.Turns != b.Messages+b.Copies {
		t.Errorf("without: %+v, want every copy (%d) a turn and a duplicate", b.Without, b.Copies)
	}
	if again := run(t, Config{Seed: DefaultSeed, Conversations: 1}); again.Bursts != b {
		t.Errorf("one seed, two burst reports: %+v and %+v", b, again.Bursts)
	}
}
