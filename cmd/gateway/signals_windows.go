//go:build windows

package main

import (
	"os"
	"time"
)

// reloadSignals is empty: Windows has no SIGHUP, and no other signal one
// process can send another. The TLS files are checked on a timer instead.
func reloadSignals() []os.Signal { return nil }

// defaultTLSCheck is how often serve looks at its TLS files when
// tls.check_every is unset: a renewed certificate is served within a
// minute, for one stat of each file.
const defaultTLSCheck = time.Minute
