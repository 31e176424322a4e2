package main

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func demoApp(env map[string]string) (*App, *bytes.Buffer) {
	var out bytes.Buffer
	return &App{
		Stdout: &out, Stderr: &bytes.Buffer{},
		LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	}, &out
}

func TestDemoCommandDefault(t *testing.T) {
	a, out := demoApp(nil)
	if err := a.demo(context.Background(), nil); err != nil {
		t.Fatalf("demo: %v\n%s", err, out)
	}
	got := out.String()
	for _, want := range []string{
		"100 simulated support conversations", "seed 7, memory store",
		"without the gateway", "with the gateway", "No customer message was answered twice with the gateway.",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "\x1b[") {
		t.Errorf("colour written to a buffer with neither NO_COLOR nor FORCE_COLOR:\n%q", got)
	}
	// Same seed, same bytes.
	b, again := demoApp(nil)
	if err := b.demo(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	if again.String() != got {
		t.Errorf("two runs of the default seed differ:\n%s\n---\n%s", got, again)
	}
}

func TestDemoCommandSeedsDiffer(t *testing.T) {
	outs := map[string]string{}
	for _, seed := range []string{"7", "8"} {
		a, out := demoApp(nil)
		if err := a.demo(context.Background(), []string{"--seed", seed, "--conversations", "40"}); err != nil {
			t.Fatal(err)
		}
		outs[seed] = strings.Replace(out.String(), "seed "+seed+",", "seed N,", 1)
	}
	if outs["7"] == outs["8"] {
		t.Error("seeds 7 and 8 print the same report")
	}
}

func TestDemoCommandColour(t *testing.T) {
	for _, c := range []struct {
		env  map[string]string
		want bool
	}{
		{map[string]string{"FORCE_COLOR": "1"}, true},
		{map[string]string{"NO_COLOR": "1"}, false},
		{map[string]string{"NO_COLOR": "1", "FORCE_COLOR": "1"}, true},
		{nil, false},
	} {
		a, out := demoApp(c.env)
		if err := a.demo(context.Background(), []string{"--conversations", "5"}); err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(out.String(), "\x1b["); got != c.want {
			t.Errorf("env %v: colour %v, want %v", c.env, got, c.want)
		}
	}
}

func TestDemoCommandBolt(t *testing.T) {
	path := filepath.Join(t.TempDir(), "demo.db")
	a, out := demoApp(nil)
	if err := a.demo(context.Background(), []string{"--store", "bolt", "--store-path", path, "--conversations", "20"}); err != nil {
		t.Fatalf("demo on bolt: %v\n%s", err, out)
	}
	if !strings.Contains(out.String(), "bolt store") {
		t.Errorf("output does not name the store:\n%s", out)
	}
	if _, err := os.Stat(path); err != nil {
		t.Errorf("--store-path file: %v", err)
	}
}

func TestDemoCommandUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--store", "postgres"},
		{"--conversations", "0"},
		{"--store-path", "x.db"},
		{"extra"},
		{"--seed", "-1"},
	} {
		a, _ := demoApp(nil)
		err := a.demo(context.Background(), args)
		var u usageError
		if !errors.As(err, &u) {
			t.Errorf("demo %v: err = %v, want a usage error", args, err)
		}
	}
}
