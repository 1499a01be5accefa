//go:build !linux

package workerpool

import "syscall"

// sysProcAttr: outside Linux a worker outlives a pool that dies without stopping it,
// until its runner closes the control stream.
func sysProcAttr() *syscall.SysProcAttr { return nil }
