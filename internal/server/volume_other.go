//go:build !linux

package server

import "github.com/tidelog/tide/internal/frontend"

// statVolume is not measured off Linux: DescribeLogDirs reports the
// volume as unknown (-1), as Kafka does when it cannot tell.
func statVolume(string) (frontend.Volume, error) { return frontend.UnknownVolume, nil }
