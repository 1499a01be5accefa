package workerpool

import "syscall"

// sysProcAttr makes the kernel kill a worker whose pool dies without stopping it.
// Pdeathsig fires when the thread that started the worker exits; Go exits threads only
// for goroutines that lock one and return, which the pool's goroutines never do.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
