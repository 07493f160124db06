//go:build !linux

package server

import (
	"net"
	"syscall"
	"time"
)

// setUnackedTimeout is TCP_USER_TIMEOUT where the system has it (see
// usertimeout_linux.go); elsewhere TCP's own retransmission limits apply.
func setUnackedTimeout(syscall.RawConn, time.Duration) error { return nil }

func unackedTimeoutOf(net.Conn) (time.Duration, error) { return 0, nil }
