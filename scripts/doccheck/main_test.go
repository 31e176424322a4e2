package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// The fixture module in testdata/drift holds the drift the checker was
// built for, each as it was found in this repository: a package doc naming
// a constant that was renamed (handoffWait), a field comment naming a
// field that was removed (BodyTooLarge), a comment naming a function that
// was folded into another (braintreeFormFast), and a package doc citing a
// file that is not in the repository ("PROVIDERS.md"). Beside them, what must
// pass: product names, quoted JSON keys, another language's function after
// its possessive, a line citing another project's code, a regular
// expression, doc links and qualified names that resolve.
func TestFindsTheDriftAndNothingElse(t *testing.T) {
	findings, err := checkTree("testdata/drift")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range findings {
		got = append(got, fmt.Sprintf("%s:%d %s", f.pos.Filename, f.pos.Line, f.name))
	}
	want := []string{
		"dispatch/doc.go:2 handoffWait",
		"dispatch/doc.go:10 [time.Durationn]",
		"dispatch/doc.go:10 [Missing]",
		"dispatch/doc.go:17 queue.go",
		"forward/forward.go:14 BodyTooLarge",
		"forward/forward.go:16 url.ParseQueryFast",
		"signatures/doc.go:2 PROVIDERS.md",
		"signatures/fields.go:3 braintreeFormFast",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("findings:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// The command exits 1 and prints each finding with its file and line, so
// that CI fails on drift and says where.
func TestExitsNonZeroOnDrift(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run([]string{"testdata/drift"}, &out, &errb); code != 1 {
		t.Fatalf("exit %d, want 1; stderr: %s", code, errb.String())
	}
	if !strings.Contains(out.String(), `forward/forward.go:14: "BodyTooLarge"`) {
		t.Errorf("output does not name the drift with its place:\n%s", out.String())
	}
}
