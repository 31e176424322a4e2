package cputime

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// RedisServer reads the CPU time a Redis server has used since it started
// from its answer to INFO cpu: its threads' user plus system time. The
// difference between two readings is what a workload cost the server,
// which is part of a request's price when the server shares the machine's
// cores. The caller sends INFO itself, so this package needs no client.
func RedisServer(info string) (time.Duration, error) {
	var total float64
	found := 0
	for line := range strings.SplitSeq(info, "\r\n") {
		for _, k := range []string{"used_cpu_sys:", "used_cpu_user:"} {
			if v, ok := strings.CutPrefix(line, k); ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return 0, fmt.Errorf("redis INFO cpu: %s: %w", strings.TrimSuffix(k, ":"), err)
				}
				total += f
				found++
			}
		}
	}
	if found != 2 {
		return 0, errors.New("redis INFO cpu: no used_cpu_sys and used_cpu_user")
	}
	return time.Duration(total * float64(time.Second)), nil
}
