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
