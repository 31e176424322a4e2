//go:build windows

package cputime

import (
	"syscall"
	"time"
)

// Self returns this process's user plus kernel CPU time so far.
func Self() (time.Duration, bool) {
	h, err := syscall.GetCurrentProcess()
	if err != nil {
		return 0, false
	}
	var created, exited, kernel, user syscall.Filetime
	if err := syscall.GetProcessTimes(h, &created, &exited, &kernel, &user); err != nil {
		return 0, false
	}
	return ticks(kernel) + ticks(user), true
}

// ticks reads a FILETIME that holds a duration, in units of 100 ns.
// Filetime.Nanoseconds would not do: it reads the value as a date and
// subtracts the 1601-to-1970 offset.
func ticks(ft syscall.Filetime) time.Duration {
	return time.Duration(int64(ft.HighDateTime)<<32|int64(ft.LowDateTime)) * 100
}
