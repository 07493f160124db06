package frontend

import (
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/wire"
)

// Volume is what the runtime measured of the disk under the log directory
// (tide serve: statfs; the simulator: its disk's space limit). The front
// end keeps no file system of its own: the runtime hands the numbers in as
// a value (SetVolume), and DescribeLogDirs reports the last ones.
type Volume struct {
	// TotalBytes is the volume's size, UsableBytes what is still free for
	// the broker; -1 for either means not known.
	TotalBytes  int64
	UsableBytes int64
}

// UnknownVolume is the volume before the runtime measured one: Kafka's
// UNKNOWN_VOLUME_BYTES (-1) for both sizes.
var UnknownVolume = Volume{TotalBytes: -1, UsableBytes: -1}

// SetVolume gives the front end the runtime's latest measure of the log
// directory's volume.
func (fe *FrontEnd) SetVolume(volume Volume) { fe.volume = volume }

// LogDir describes this broker's log directory (DescribeLogDirs, KIP-113):
// every partition whose log is open, its size and its offset lag, and the
// volume the runtime last measured. A partition whose log failed to open
// is not listed (it has no log to describe; Metadata reports it offline),
// and a broker not yet running its node lists none.
//
// The offset lag is Kafka's: the replica's high watermark minus its log
// end offset, never below 0. A leader's log end is never below its high
// watermark, so it is 0 there; so it is on a follower, whose high
// watermark is the leader's capped at its own log end.
func (b *backend) LogDir() wire.LogDir {
	dir := wire.LogDir{Path: b.config.LogDir, TotalBytes: b.volume.TotalBytes, UsableBytes: b.volume.UsableBytes}
	node := b.node()
	if node == nil {
		return dir
	}
	for _, tp := range node.Partitions() { // sorted by topic and partition
		r, log, ok := node.Replica(tp)
		if !ok {
			continue
		}
		lag := offsetLag(r.HighWatermark(), r.LogEndOffset())
		dir.Partitions = append(dir.Partitions, wire.LogDirPartition{TopicPartition: tp, SizeBytes: log.SizeBytes(), OffsetLag: lag})
	}
	return dir
}

// offsetLag is Kafka's DescribeLogDirs offset lag of a current (not
// future) replica (ReplicaManager.getLogEndOffsetLag): its high watermark
// less its log end offset, never below 0. A negative lag would tell an
// operator a replica is ahead of what is committed, which is always so
// for a leader with uncommitted records and says nothing.
func offsetLag(highWatermark, logEndOffset record.Offset) int64 {
	return max(int64(highWatermark-logEndOffset), 0)
}
