package field_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/replyonce/gateway/ingress/field"
)

func TestErrorNamesItsFieldAndLine(t *testing.T) {
	e := field.Errorf("sources.s.forward.timeout", "must be positive")
	if got := e.Error(); got != "sources.s.forward.timeout: must be positive" {
		t.Errorf("without a line: %q", got)
	}
	e.Line = 7
	if got := e.Error(); got != "sources.s.forward.timeout: must be positive (line 7)" {
		t.Errorf("with a line: %q", got)
	}
}

func TestListFindsEveryProblemInJoins(t *testing.T) {
	inner := errors.New("boom")
	err := errors.Join(
		field.Errorf("a", "one"),
		errors.Join(field.Wrap("b", inner), errors.New("not a field error")),
		fmt.Errorf("wrapped: %w", field.Errorf("c", "three")),
	)
	got := field.List(err)
	if len(got) != 3 || got[0].Field != "a" || got[1].Field != "b" || got[2].Field != "c" {
		t.Fatalf("List = %v", got)
	}
	if !errors.Is(got[1], inner) {
		t.Error("Wrap must keep the cause for errors.Is")
	}
	if field.List(nil) != nil {
		t.Error("List(nil) must be nil")
	}
}
