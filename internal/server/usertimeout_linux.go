package server

import (
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// setUnackedTimeout sets TCP_USER_TIMEOUT: the kernel aborts the
// connection once data it sent stays unacknowledged that long. It is the
// blackhole rule for the links brokers keep to each other (controller
// links and replica fetcher connections): a peer whose packets are
// dropped silently leaves the connection open, and without it TCP goes
// on retransmitting into the void, each try twice as late as the last,
// so after a long isolation the first retransmission that gets through
// can come a minute after the network healed (measured: an isolated
// broker unfenced 51-55 s after a 60 s isolation ended). Aborted, the
// connection is redialed by its dial loop, within backoffMax of the heal.
func setUnackedTimeout(raw syscall.RawConn, timeout time.Duration) error {
	var sockErr error
	err := raw.Control(func(fd uintptr) {
		sockErr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(timeout.Milliseconds()))
	})
	if err != nil {
		return err
	}
	return sockErr
}

// unackedTimeoutOf reads TCP_USER_TIMEOUT back, for tests.
func unackedTimeoutOf(c net.Conn) (time.Duration, error) {
	raw, err := c.(syscall.Conn).SyscallConn()
	if err != nil {
		return 0, err
	}
	var ms int
	var sockErr error
	if err := raw.Control(func(fd uintptr) {
		ms, sockErr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
	}); err != nil {
		return 0, err
	}
	return time.Duration(ms) * time.Millisecond, sockErr
}
