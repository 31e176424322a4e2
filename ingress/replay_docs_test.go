package ingress_test

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/replyonce/gateway/forward"
	"github.com/replyonce/gateway/ingress"
	"github.com/replyonce/gateway/signatures"
)

// docs/security.md lists the providers whose default sources refuse
// replays; the list is the registry's, so it must stay equal to it.
func TestReplayDocsListTheRegistry(t *testing.T) {
	doc, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "Providers covered by default:")
	if !ok {
		t.Fatal("docs/security.md has no \"Providers covered by default:\" list")
	}
	para, _, _ := strings.Cut(rest, "\n\n")
	var listed []string
	for _, m := range regexp.MustCompile("`([a-z0-9-]+)`").FindAllStringSubmatch(para, -1) {
		listed = append(listed, m[1])
	}
	var covered []string
	for _, p := range signatures.Providers() {
		info, _ := signatures.Lookup(p)
		if !strings.Contains(strings.Join(info.EventID, " "), "{header:") {
			continue // no header in the default id: nothing unsigned to vary
		}
		src, err := ingress.NewSource(ingress.SourceConfig{Name: "s", Provider: p,
			Signature: signatures.Config{Secrets: []string{"whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"}, URL: "https://hooks.example.com/hooks/s"},
			Forward:   ingress.ForwardConfig{Target: forward.Target{URL: "http://127.0.0.1:9/"}}})
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if src.RefusesReplays() {
			covered = append(covered, p)
		}
	}
	if !slices.Equal(listed, covered) {
		t.Fatalf("docs/security.md lists %v\nthe registry covers %v", listed, covered)
	}
}
