package wire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDescribeCluster(t *testing.T) {
	h := newTestHandler(t, newFakeBackend())
	for _, version := range testVersions(t, 60) {
		request := kmsg.NewPtrDescribeClusterRequest()
		request.Version = version
		response := roundTrip(t, h, request).(*kmsg.DescribeClusterResponse)
		if response.ErrorCode != 0 || response.ClusterID != "tide-test" || response.ControllerID != 1 || len(response.Brokers) != 2 {
			t.Fatalf("v%d: %+v", version, response)
		}
		if b := response.Brokers[0]; b.NodeID != 1 || b.Port != 9092 || b.Rack == nil || *b.Rack != "a" || response.Brokers[1].Rack != nil {
			t.Fatalf("v%d: brokers %+v", version, response.Brokers)
		}
	}
	for endpoint, want := range map[int8]int16{2: kerr.MismatchedEndpointType.Code, 7: kerr.UnsupportedEndpointType.Code} {
		request := kmsg.NewPtrDescribeClusterRequest()
		request.Version, request.EndpointType = 1, endpoint
		if got := roundTrip(t, h, request).(*kmsg.DescribeClusterResponse).ErrorCode; got != want {
			t.Fatalf("endpoint type %d: error %d, want %d", endpoint, got, want)
		}
	}
}
