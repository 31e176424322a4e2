package main

import (
	"context"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
)

// Every `gateway <command>` the README shows is a command the binary has,
// and every flag it shows for it is one the command accepts.
func TestReadmeCommandsExist(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	// Command lines in code blocks: "gateway serve --config ...", "go run ./cmd/gateway demo".
	line := regexp.MustCompile(`(?m)^\s*(?:go run \./cmd/gateway|gateway)\s+([a-z]+)((?:\s+[^#\n]*)?)`)
	flag := regexp.MustCompile(`--([a-z][a-z-]*)`)
	matches := line.FindAllStringSubmatch(string(readme), -1)
	if len(matches) < 5 {
		t.Fatalf("found only %d command lines in the README", len(matches))
	}
	for _, m := range matches {
		cmd, rest := m[1], m[2]
		app := &App{Stdout: io.Discard, Stderr: io.Discard, LookupEnv: func(string) (string, bool) { return "", false }}
		if cmd == "version" {
			if err := app.Run(context.Background(), []string{cmd}); err != nil {
				t.Errorf("README shows %q: %v", strings.TrimSpace(m[0]), err)
			}
			continue
		}
		if cmd == "ledger" {
			// ledger has sub-commands: check the first word after it.
			words := strings.Fields(rest)
			if len(words) == 0 || strings.HasPrefix(words[0], "-") || strings.Contains(words[0], "|") {
				continue
			}
			cmd = "ledger " + words[0]
		}
		args := append(strings.Fields(cmd), "-h")
		err := app.Run(context.Background(), args)
		if err != nil && strings.Contains(err.Error(), "unknown command") {
			t.Errorf("README shows %q, but %q is not a command", strings.TrimSpace(m[0]), cmd)
			continue
		}
		if strings.Contains(rest, " | ") {
			continue // a synopsis of alternatives: its flags belong to different sub-commands
		}
		for _, f := range flag.FindAllStringSubmatch(rest, -1) {
			err := app.Run(context.Background(), append(strings.Fields(cmd), "--"+f[1]+"=x", "-h"))
			if err != nil && strings.Contains(err.Error(), "flag provided but not defined") {
				t.Errorf("README shows %q with --%s, which %s does not accept", strings.TrimSpace(m[0]), f[1], cmd)
			}
		}
	}
}
