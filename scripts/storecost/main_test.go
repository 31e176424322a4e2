//go:build unix

package main

import (
	"testing"
)

// The counts come from INFO commandstats as Redis writes it; this
// program's own commands (INFO, CONFIG RESETSTAT) are left out.
func TestParseCommandStats(t *testing.T) {
	info := "# Commandstats\r\n" +
		"cmdstat_evalsha:calls=5054,usec=112682,usec_per_call=22.30,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_zrem:calls=12635,usec=5741,usec_per_call=0.45,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_info:calls=4,usec=197,usec_per_call=49.25,rejected_calls=0,failed_calls=0\r\n" +
		"cmdstat_config|resetstat:calls=1,usec=20,usec_per_call=20.00,rejected_calls=0,failed_calls=0\r\n"
	rows, totals := parseCommandStats(info)
	if len(rows) != 2 || rows[0].what != "evalsha" || rows[0].calls != 5054 || rows[0].ms != 112.682 {
		t.Fatalf("rows %+v", rows)
	}
	if totals["calls"] != 5054+12635 || totals["ms"] != 112.682+5.741 {
		t.Fatalf("totals %v", totals)
	}
}

// A /proc/PID/stat line: the name may hold spaces and parentheses; the
// CPU is utime + stime + cutime + cstime.
func TestStatCPU(t *testing.T) {
	line := "4242 (postgres: a (b) c) S 4200 4242 4242 0 -1 4194560 1210 0 0 0 11 7 5 3 20 0 1 0 123 456 789\n"
	ppid, ticks, err := statCPU(line)
	if err != nil || ppid != 4200 || ticks != 11+7+5+3 {
		t.Fatalf("statCPU = %d, %d, %v; want 4200, 26", ppid, ticks, err)
	}
	if _, _, err := statCPU("4242 (x) S 1"); err == nil {
		t.Fatal("a short line was read")
	}
}
