//go:build !windows

package main

import (
	"os"
	"syscall"
	"time"
)

// reloadSignals are the signals that make serve reload its TLS files.
func reloadSignals() []os.Signal { return []os.Signal{syscall.SIGHUP} }

// defaultTLSCheck is how often serve looks at its TLS files when
// tls.check_every is unset: never, since SIGHUP reloads them here.
const defaultTLSCheck time.Duration = 0
