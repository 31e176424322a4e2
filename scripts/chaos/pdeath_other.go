//go:build unix && !linux

package main

import "syscall"

// setParentDeath: only Linux has a parent-death signal; elsewhere the
// deferred stops are all there is.
func setParentDeath(*syscall.SysProcAttr) {}
