package wire

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeCluster: v0-v1.
//
// The cluster id, the controller and the brokers, as Metadata has them,
// for admin clients (KIP-700). v0 is flexible.
//
//   - v1 EndpointType (KIP-919): tide's Kafka listener is a broker endpoint,
//     so BROKERS (1) is answered, CONTROLLERS (2) is
//     MISMATCHED_ENDPOINT_TYPE and any other type UNSUPPORTED_ENDPOINT_TYPE.
//   - ClusterAuthorizedOperations is Kafka's "not requested" value: there
//     are no ACLs.
//   - v2 (IncludeFencedBrokers, KIP-1073) is not served.

func init() { register(60, 0, 1, (*Handler).handleDescribeCluster) }

const (
	endpointTypeBrokers     = 1
	endpointTypeControllers = 2
)

func (h *Handler) handleDescribeCluster(x *exchange) error {
	request := x.request.(*kmsg.DescribeClusterRequest)
	response := request.ResponseKind().(*kmsg.DescribeClusterResponse)
	response.EndpointType = request.EndpointType
	switch request.EndpointType {
	case endpointTypeBrokers:
	case endpointTypeControllers:
		response.ErrorCode = kerr.MismatchedEndpointType.Code
	default:
		response.ErrorCode = kerr.UnsupportedEndpointType.Code
	}
	if response.ErrorCode != 0 {
		x.respond(response)
		return nil
	}
	cluster := h.backend.Cluster()
	response.ClusterID, response.ControllerID = cluster.ClusterID, int32(cluster.ControllerID)
	for _, broker := range cluster.Brokers {
		entry := kmsg.NewDescribeClusterResponseBroker()
		entry.NodeID, entry.Host, entry.Port = int32(broker.ID), broker.Host, broker.Port
		if broker.Rack != "" {
			entry.Rack = &broker.Rack
		}
		response.Brokers = append(response.Brokers, entry)
	}
	x.respond(response)
	return nil
}
