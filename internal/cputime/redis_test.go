package cputime

import (
	"strings"
	"testing"
	"time"
)

// The server's user and system time are added; an answer without both, or
// with a figure that is not a number, is an error rather than a zero.
func TestRedisServerAddsUserAndSystem(t *testing.T) {
	info := "# CPU\r\nused_cpu_sys:1.250000\r\nused_cpu_user:2.500000\r\nused_cpu_sys_children:9.000000\r\n"
	got, err := RedisServer(info)
	if err != nil || got != 3750*time.Millisecond {
		t.Fatalf("RedisServer = %v, %v; want 3.75s", got, err)
	}
	for _, bad := range []string{"# CPU\r\nused_cpu_sys:1.0\r\n", "used_cpu_sys:x\r\nused_cpu_user:1\r\n"} {
		if _, err := RedisServer(bad); err == nil || !strings.Contains(err.Error(), "INFO cpu") {
			t.Errorf("RedisServer(%q) = %v, want an INFO cpu error", bad, err)
		}
	}
}
