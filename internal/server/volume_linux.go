package server

import (
	"golang.org/x/sys/unix"

	"github.com/tidelog/tide/internal/frontend"
)

// statVolume measures the volume holding dir: its size, and the bytes
// available to an unprivileged process (f_bavail, what Kafka reports as
// usable space: root's reserve is not the broker's).
func statVolume(dir string) (frontend.Volume, error) {
	var stat unix.Statfs_t
	if err := unix.Statfs(dir, &stat); err != nil {
		return frontend.UnknownVolume, err
	}
	blockBytes := int64(stat.Bsize)
	return frontend.Volume{TotalBytes: int64(stat.Blocks) * blockBytes, UsableBytes: int64(stat.Bavail) * blockBytes}, nil
}
