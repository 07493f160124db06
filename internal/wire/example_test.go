package wire_test

import (
	crand "crypto/rand"
	"encoding/binary"
	"fmt"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/replica"
	"github.com/tidelog/tide/internal/wire"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// emptyBroker is a Backend with no topics, enough for ApiVersions and
// Metadata.
type emptyBroker struct{}

func (emptyBroker) Cluster() wire.Cluster {
	return wire.Cluster{ClusterID: "example", BrokerID: 1, ControllerID: 1,
		Brokers: []wire.Broker{{ID: 1, Host: "127.0.0.1", Port: 9092}}}
}
func (emptyBroker) Topic(string) (metadata.Topic, bool) { return metadata.Topic{}, false }
func (emptyBroker) TopicNames() []string                { return nil }
func (emptyBroker) Produce(_ metadata.TopicPartition, r replica.ProduceRequest, done func(replica.ProduceAnswer)) {
	done(replica.ProduceAnswer{ID: r.ID, ErrorCode: 3})
}
func (emptyBroker) Fetch(r wire.FetchRequest, done func([]replica.FetchResponse)) {
	done(make([]replica.FetchResponse, len(r.Partitions)))
}
func (emptyBroker) ListOffsets(_ metadata.TopicPartition, r replica.ListOffsetsRequest, done func(replica.ListOffsetsAnswer)) {
	done(replica.ListOffsetsAnswer{ID: r.ID, ErrorCode: 3})
}
func (emptyBroker) DeleteRecords(_ metadata.TopicPartition, r replica.DeleteRecordsRequest, done func(replica.DeleteRecordsAnswer)) {
	done(replica.DeleteRecordsAnswer{ID: r.ID, ErrorCode: 3, LowWatermark: -1})
}
func (emptyBroker) OffsetsForLeaderEpoch(_ metadata.TopicPartition, r replica.OffsetsForLeaderEpochRequest,
	done func(replica.OffsetsForLeaderEpochAnswer)) {
	done(replica.OffsetsForLeaderEpochAnswer{ID: r.ID, ErrorCode: 3})
}
func (emptyBroker) InitProducerID(_ wire.InitProducerIDRequest, done func(wire.InitProducerIDAnswer)) {
	done(wire.InitProducerIDAnswer{ProducerID: 1})
}
func (emptyBroker) CreateTopics(r wire.CreateTopicsRequest, done func([]int16)) {
	done(make([]int16, len(r.Topics)))
}
func (emptyBroker) CreatePartitions(r wire.CreatePartitionsRequest, done func([]int16)) {
	done(make([]int16, len(r.Topics)))
}
func (emptyBroker) LogDir() wire.LogDir {
	return wire.LogDir{Path: "/data", TotalBytes: -1, UsableBytes: -1}
}
func (emptyBroker) TopicByID(metadata.TopicID) (metadata.Topic, bool) { return metadata.Topic{}, false }
func (emptyBroker) AutoCreateTopic(controller.CreateTopicRequest)     {}
func (emptyBroker) DeleteTopics(names []wire.TopicRef, _ int64, done func([]int16)) {
	done(make([]int16, len(names)))
}
func (emptyBroker) Reassign(moves []controller.ReassignRequest, _ int64, done func([]int16)) {
	done(make([]int16, len(moves)))
}
func (emptyBroker) ElectLeaders(_ []metadata.TopicPartition, _ int64, done func(controller.ElectLeadersResponse)) {
	done(controller.ElectLeadersResponse{})
}
func (emptyBroker) AlterConfigs(_ controller.AlterConfigsRequest, _ bool, done func(int16, string)) {
	done(0, "")
}
func (emptyBroker) GroupCoordinator(string) (metadata.BrokerID, int16) { return metadata.NoBroker, 15 }
func (emptyBroker) GroupPartition(string) int32                        { return wire.NoGroupPartition }
func (emptyBroker) Group(_ string, _ wire.GroupClient, _ kmsg.Request, done func(kmsg.Response, int16)) {
	done(nil, 15)
}
func (emptyBroker) ListGroups(_ *kmsg.ListGroupsRequest, done func([]*kmsg.ListGroupsResponse)) {
	done(nil)
}

// A server reads a 4-byte size and that many bytes, hands them to Handle
// on its node loop, and writes the response it gets back behind its own
// 4-byte size; an error closes the connection.
func ExampleHandler_Handle() {
	config := wire.DefaultConfig()
	config.Random = crand.Reader
	h, err := wire.New(config, emptyBroker{})
	if err != nil {
		panic(err)
	}
	request := kmsg.NewPtrApiVersionsRequest()
	request.Version = 3
	request.ClientSoftwareName, request.ClientSoftwareVersion = "example", "1.0"
	framed := kmsg.NewRequestFormatter().AppendRequest(nil, request, 42)
	h.Handle(framed[4:], func(response []byte, err error) {
		if err != nil {
			fmt.Println("close the connection:", err)
			return
		}
		decoded := kmsg.NewPtrApiVersionsResponse()
		decoded.Version = 3
		if err := decoded.ReadFrom(response[4:]); err != nil { // the header is the correlation id
			panic(err)
		}
		fmt.Println("correlation id", binary.BigEndian.Uint32(response), "error", decoded.ErrorCode, "keys", len(decoded.ApiKeys))
	})
	// Output: correlation id 42 error 0 keys 32
}
