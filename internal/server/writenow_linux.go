package server

import (
	"errors"
	"net"
	"syscall"

	"golang.org/x/sys/unix"
)

// maxWriteNowBuffers bounds the pieces of one writeNow (writev takes at
// most IOV_MAX, 1024); a response in more pieces goes to its writer.
const maxWriteNowBuffers = 64

// writeNow writes as much of buffers as the socket takes at once, without
// waiting (Go's sockets are non-blocking underneath): one writev on the
// calling goroutine. It returns how many bytes went; fewer than all, with
// a nil error, when the socket's buffer is full or the connection is not
// a plain socket (nothing goes then). The caller hands what is left to a
// goroutine that may wait. An error is the connection's.
//
// The node loop answers with it in the pass that let an answer out, so an
// acks=all answer or a follower's fetch answer leaves without waking the
// connection's writer goroutine first, a hand-off that costs a thread
// wake-up (tens to hundreds of microseconds on a loaded machine) on each
// of the acks path's three hops (docs/benchmarks.md, "One acknowledged
// write").
func writeNow(c net.Conn, buffers [][]byte) (int, error) {
	if len(buffers) > maxWriteNowBuffers {
		return 0, nil
	}
	sc, ok := c.(syscall.Conn)
	if !ok {
		return 0, nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return 0, nil
	}
	written, writeErr := 0, error(nil)
	err = raw.Write(func(fd uintptr) bool {
		written, writeErr = unix.Writev(int(fd), buffers)
		return true // never wait for the socket: that is the writer's job
	})
	switch {
	case err != nil:
		return 0, err
	case writeErr == nil:
		return written, nil
	case errors.Is(writeErr, unix.EAGAIN), errors.Is(writeErr, unix.EINTR):
		return 0, nil
	}
	return 0, writeErr
}
