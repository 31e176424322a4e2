//go:build unix && !linux

package testservers

import "syscall"

// setParentDeathSignal does nothing where the kernel offers no such signal:
// the testing helpers' cleanups still stop the servers.
func setParentDeathSignal(*syscall.SysProcAttr) {}
