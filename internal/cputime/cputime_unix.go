//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package cputime

import (
	"syscall"
	"time"
)

// Self returns this process's user plus system CPU time so far.
func Self() (time.Duration, bool) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, false
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), true
}
