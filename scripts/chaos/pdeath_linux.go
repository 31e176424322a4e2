package main

import "syscall"

// setParentDeath has the kernel kill a gateway when this program dies.
func setParentDeath(attr *syscall.SysProcAttr) { attr.Pdeathsig = syscall.SIGKILL }
