package hostutil

import (
	"context"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// Listen binds a TCP address. With reusePort it sets SO_REUSEPORT first, as gRPC servers do
// by default in Python and C++ (the reference's agent and TF Serving): the dense MPS agents
// of one host then share the agent port, and the kernel spreads connections over them.
func Listen(ctx context.Context, addr string, reusePort bool) (net.Listener, error) {
	var lc net.ListenConfig
	if reusePort {
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var opErr error
			if err := c.Control(func(fd uintptr) {
				opErr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			}); err != nil {
				return err
			}
			return opErr
		}
	}
	return lc.Listen(ctx, "tcp", addr)
}
