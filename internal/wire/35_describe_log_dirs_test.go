package wire

import (
	"fmt"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// Every partition for a null topic list, only the named ones (and none
// this broker lacks) otherwise; the volume's bytes from v4.
func TestDescribeLogDirs(t *testing.T) {
	for _, version := range testVersions(t, 35) {
		backend := newFakeBackend()
		backend.addTopic("orders", 2, 0)
		backend.addTopic("events", 1, 0)
		backend.topics["orders"].partitions[1].batches = [][]byte{make([]byte, 70), make([]byte, 30)}
		h := newTestHandler(t, backend)

		request := kmsg.NewPtrDescribeLogDirsRequest()
		request.Version = version
		response := roundTrip(t, h, request).(*kmsg.DescribeLogDirsResponse)
		if got := describeDirs(response); got != "/fake/data: events-0=0 orders-0=0 orders-1=100" {
			t.Fatalf("v%d: all partitions: %s", version, got)
		}
		dir := response.Dirs[0]
		wantTotal, wantUsable := int64(-1), int64(-1) // not on the wire before v4
		if version >= 4 {
			wantTotal, wantUsable = 1<<20, 1<<19
		}
		if dir.TotalBytes != wantTotal || dir.UsableBytes != wantUsable || dir.ErrorCode != 0 {
			t.Fatalf("v%d: total %d usable %d code %d", version, dir.TotalBytes, dir.UsableBytes, dir.ErrorCode)
		}

		named := kmsg.NewDescribeLogDirsRequestTopic()
		named.Topic, named.Partitions = "orders", []int32{1, 7}
		missing := kmsg.NewDescribeLogDirsRequestTopic()
		missing.Topic, missing.Partitions = "missing", []int32{0}
		request.Topics = []kmsg.DescribeLogDirsRequestTopic{named, missing}
		response = roundTrip(t, h, request).(*kmsg.DescribeLogDirsResponse)
		if got := describeDirs(response); got != "/fake/data: orders-1=100" {
			t.Fatalf("v%d: named partitions: %s", version, got)
		}

		request.Topics = []kmsg.DescribeLogDirsRequestTopic{}
		response = roundTrip(t, h, request).(*kmsg.DescribeLogDirsResponse)
		if got := describeDirs(response); got != "/fake/data:" {
			t.Fatalf("v%d: no partitions: %s", version, got)
		}
	}
}

func describeDirs(response *kmsg.DescribeLogDirsResponse) string {
	out := ""
	for _, dir := range response.Dirs {
		out += dir.Dir + ":"
		for _, topic := range dir.Topics {
			for _, p := range topic.Partitions {
				out += fmt.Sprintf(" %s-%d=%d", topic.Topic, p.Partition, p.Size)
				if p.OffsetLag != 0 || p.IsFuture {
					out += "!"
				}
			}
		}
	}
	return out
}
