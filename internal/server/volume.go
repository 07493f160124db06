package server

import (
	"path"

	"github.com/tidelog/tide/internal/frontend"
)

// volumeIntervalMs is how often the loop measures the partition
// directory's volume for DescribeLogDirs: a statfs is cheap, but the
// numbers need not be fresher than a second.
const volumeIntervalMs = 1000

// partitionsDir is where the node keeps the partition logs.
func (c Config) partitionsDir() string { return path.Join(c.DataDir, "partitions") }

// measureVolume hands the front end the volume under the partition logs,
// at most once per volumeIntervalMs (the front end keeps the last value,
// frontend.SetVolume). A directory that cannot be measured reports
// frontend.UnknownVolume rather than stale numbers.
func (s *Server) measureVolume(nowMs int64) {
	if nowMs-s.volumeMeasuredMs < volumeIntervalMs {
		return
	}
	s.volumeMeasuredMs = nowMs
	volume, err := statVolume(s.config.DataDir)
	if err != nil {
		volume = frontend.UnknownVolume
	}
	s.frontend.SetVolume(volume)
}
