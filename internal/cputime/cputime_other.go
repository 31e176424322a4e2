//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly || windows)

package cputime

import "time"

// Self reports that this platform gives no CPU time the package can read
// (Plan 9, WebAssembly, Solaris, AIX...).
func Self() (time.Duration, bool) { return 0, false }
