package server

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/wire"
)

// sendFile writes a file range to a connection: with sendfile(2) at an
// explicit offset when the connection is TCP (the file's own offset is
// shared by every connection reading it, so it is never used), else by
// reading it. The file's descriptor is held for the call, so a log that
// closes the file meanwhile closes it only afterwards; a range the file no
// longer holds (a truncated segment) is an error, and the connection, with
// a response cut short, is closed by the caller.
func sendFile(c net.Conn, file wire.FileRange) error {
	tcp, ok := c.(*net.TCPConn)
	osFile, real := file.File.(disk.OSFile)
	if !ok || !real {
		return copyFile(c, file)
	}
	fileRaw, err := osFile.OSFile().SyscallConn()
	if err != nil {
		return copyFile(c, file)
	}
	connRaw, err := tcp.SyscallConn()
	if err != nil {
		return err
	}
	offset, remaining := file.Position, file.Size
	var sendErr error
	controlErr := fileRaw.Control(func(fileFD uintptr) {
		sendErr = connRaw.Write(func(connFD uintptr) bool {
			for remaining > 0 {
				n, err := syscall.Sendfile(int(connFD), int(fileFD), &offset, int(min(remaining, 1<<30)))
				if n > 0 {
					remaining -= int64(n)
				}
				switch {
				case errors.Is(err, syscall.EAGAIN):
					return false // wait until the socket can take more
				case errors.Is(err, syscall.EINTR):
					continue
				case err != nil:
					sendErr = err
					return true
				case n == 0:
					sendErr = fmt.Errorf("sendfile %s: %w at %d", file.File.Name(), io.ErrUnexpectedEOF, offset)
					return true
				}
			}
			return true
		})
		if sendErr == nil && remaining > 0 {
			sendErr = fmt.Errorf("sendfile %s: %d bytes left", file.File.Name(), remaining)
		}
	})
	return errors.Join(controlErr, sendErr)
}

// copyFile writes a file range by reading it, for connections sendfile
// cannot write to.
func copyFile(c net.Conn, file wire.FileRange) error {
	n, err := io.Copy(c, io.NewSectionReader(file.File, file.Position, file.Size))
	if err == nil && n < file.Size {
		err = fmt.Errorf("read %s: %w", file.File.Name(), io.ErrUnexpectedEOF)
	}
	return err
}
