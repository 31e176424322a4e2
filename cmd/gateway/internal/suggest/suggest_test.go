package suggest

import "testing"

func TestClosest(t *testing.T) {
	fields := []string{"provider", "secrets", "forward", "max_body", "event_id", "runs"}
	for word, want := range map[string]string{
		"forwrd":   "forward",
		"fowrard":  "forward",
		"secret":   "secrets",
		"provder":  "provider",
		"maxbody":  "max_body",
		"colour":   "",
		"x":        "",
		"retries":  "",
		"event-id": "event_id",
	} {
		if got := Closest(word, fields); got != want {
			t.Errorf("Closest(%q) = %q, want %q", word, got, want)
		}
	}
	if got := Hint("forwrd", fields); got != ", did you mean `forward`?" {
		t.Errorf("Hint = %q", got)
	}
	if got := Hint("zzzzzz", fields); got != "" {
		t.Errorf("Hint for nothing close = %q", got)
	}
}
