package redis

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"
)

// ServerCPU reads the CPU time the Redis server has used since it started
// (INFO cpu: its threads' user plus system time). The difference between two
// readings is what a workload cost the server, which is part of a request's
// price when the server shares the machine's cores.
func ServerCPU(ctx context.Context, client goredis.UniversalClient) (time.Duration, error) {
	info, err := client.Info(ctx, "cpu").Result()
	if err != nil {
		return 0, fmt.Errorf("redis INFO cpu: %w", err)
	}
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
