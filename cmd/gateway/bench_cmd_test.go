package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func benchApp(env map[string]string) (*App, *bytes.Buffer, *bytes.Buffer) {
	var out, errOut bytes.Buffer
	return &App{Stdout: &out, Stderr: &errOut, Clock: time.Now, LookupEnv: func(k string) (string, bool) {
		v, ok := env[k]
		return v, ok
	}}, &out, &errOut
}

func TestBenchCommandJSON(t *testing.T) {
	a, out, errOut := benchApp(nil)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	err := a.bench(ctx, []string{"--n", "200", "--half-n", "100", "--concurrency", "8", "--duplicates", "0.2", "--json"})
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, errOut)
	}
	var rep struct {
		Store   string
		Repeats []struct {
			Gateway struct {
				Requests     int     `json:"requests"`
				Redeliveries int     `json:"redeliveries"`
				Duplicate    int     `json:"answered_duplicate"`
				PerUnique    float64 `json:"forwards_per_unique_event"`
			} `json:"gateway"`
			ThroughputRatio float64  `json:"throughput_ratio"`
			AddedHalf       *float64 `json:"added_p99_half_ms"`
		} `json:"repeats"`
	}
	if err := json.Unmarshal(out.Bytes(), &rep); err != nil {
		t.Fatalf("--json printed something else: %v\n%s", err, out)
	}
	if rep.Store != "memory" || len(rep.Repeats) != 1 {
		t.Fatalf("report %+v", rep)
	}
	r := rep.Repeats[0]
	if r.Gateway.Requests != 200 || r.Gateway.PerUnique != 1 || r.Gateway.Redeliveries == 0 || r.Gateway.Duplicate != r.Gateway.Redeliveries {
		t.Errorf("gateway pass %+v", r.Gateway)
	}
	if r.ThroughputRatio <= 0 || r.AddedHalf == nil {
		t.Errorf("ratios missing: %+v", r)
	}
	if !strings.Contains(errOut.String(), "gateway@half") {
		t.Errorf("no progress lines on stderr: %q", errOut)
	}
}

func TestBenchCommandTable(t *testing.T) {
	a, out, errOut := benchApp(nil)
	err := a.bench(context.Background(), []string{"--n", "100", "--half-n", "-1", "--concurrency", "4", "--quiet", "--store", "bolt", "--dir", t.TempDir()})
	if err != nil {
		t.Fatalf("bench: %v\n%s", err, errOut)
	}
	for _, want := range []string{"store=bolt", "fsync on", "throughput ratio", "gateway forwards per unique event"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	for _, line := range strings.Split(out.String(), "\n") {
		if strings.Contains(line, "gateway forwards per unique event") && !strings.HasSuffix(strings.TrimSpace(line), "1.00") {
			t.Errorf("forwards line %q does not say 1.00", line)
		}
	}
	if errOut.Len() != 0 {
		t.Errorf("--quiet still wrote %q", errOut)
	}
}

func TestBenchCommandUsage(t *testing.T) {
	for _, args := range [][]string{
		{"--store", "sqlite"},
		{"--duplicates", "1.5"},
		{"--store", "postgres"}, // no DSN anywhere
		{"extra"},
	} {
		a, _, _ := benchApp(nil)
		err := a.bench(context.Background(), args)
		var u usageError
		if !errors.As(err, &u) {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}
