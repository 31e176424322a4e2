package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"testing"
)

// Every command's --help exits 0 and prints a description, its flags and
// an example on stdout.
func TestEveryCommandHasHelp(t *testing.T) {
	for _, args := range [][]string{
		{"serve"}, {"check"}, {"send"}, {"migrate"}, {"demo"}, {"bench"}, {"health"},
		{"ledger", "history"}, {"ledger", "ambiguous"}, {"ledger", "resolve"},
		{"events", "list"}, {"events", "show"}, {"events", "replay"}, {"sources", "pause"}, {"sources", "resume"},
	} {
		for _, flag := range []string{"--help", "-h"} {
			var out bytes.Buffer
			app := &App{Stdout: &out, Stderr: io.Discard, LookupEnv: noEnv}
			if err := app.Run(context.Background(), append(append([]string{}, args...), flag)); err != nil {
				t.Errorf("%v %s: %v", args, flag, err)
				continue
			}
			text := out.String()
			name := strings.Join(args, " ")
			first, _, _ := strings.Cut(text, "\n")
			if len(first) < 10 || !strings.HasSuffix(first, ".") {
				t.Errorf("%s --help: first line %q is not a description", name, first)
			}
			if !strings.Contains(text, "usage: gateway "+name) || !strings.Contains(text, "flags:\n  -") || !strings.Contains(text, "example:\n  gateway ") {
				t.Errorf("%s --help:\n%s", name, text)
			}
		}
	}
}

func TestUnknownCommandsSuggest(t *testing.T) {
	app := &App{Stdout: io.Discard, Stderr: io.Discard, LookupEnv: noEnv}
	for args, want := range map[string]string{
		"serv":           "did you mean `serve`?",
		"chekc":          "did you mean `check`?",
		"ledger histroy": "did you mean `history`?",
	} {
		err := app.Run(context.Background(), strings.Fields(args))
		var u usageError
		if !errors.As(err, &u) || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", args, err, want)
		}
	}
	// A bad flag is one message, naming the way to help.
	err := app.Run(context.Background(), []string{"check", "--confg", "x"})
	if err == nil || !strings.Contains(err.Error(), "-confg") || !strings.Contains(err.Error(), "gateway check --help") {
		t.Errorf("bad flag: %v", err)
	}
}
