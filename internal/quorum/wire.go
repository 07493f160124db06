package quorum

import (
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/tidelog/tide/internal/codec"
	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
)

// The controller protocol's bytes: requests from brokers and the answers
// to them, as they cross the controller listener. Raft's own messages
// travel as raftpb's protobuf bytes beside them. Bytes from the network
// get a typed error (wrapping codec.ErrCorrupt), never a panic.

const wireVersion = 1

// Limits on what a decoder accepts from the network.
const (
	maxWireName       = 249
	maxWireItems      = 1 << 16
	maxSnapshotBytes  = 256 << 20
	maxIncarnationLen = 128
	maxEndpointLen    = 260
)

// Request kinds on the wire.
const (
	kindRegister byte = iota + 1
	kindHeartbeat
	kindAlterPartition
	kindCreateTopic
	kindDeleteTopic
	kindElectPreferred
	kindAllocateProducerIDs
	// kindDeleteTopicID is a DeleteTopic with a topic id; one by name
	// alone keeps kindDeleteTopic, as sent before topic ids.
	kindDeleteTopicID
	kindCreatePartitions
	// kindFetchMetadata is a metadata long poll; its answer has the
	// heartbeat answer's kind and shape.
	kindFetchMetadata
	// kindCreateTopicConfigs is a CreateTopic with topic configs (a count,
	// then key and value pairs); one without keeps kindCreateTopic.
	kindCreateTopicConfigs
	// kindAlterConfigs is an AlterConfigs request, and its answer.
	kindAlterConfigs
)

// Bounds on a CreateTopic's configs: Kafka's config names are short and no
// supported value is long (internal/logconfig).
const (
	maxWireConfigs     = 256
	maxWireConfigKey   = 255
	maxWireConfigValue = 4096
)

// EncodeRequest appends a request to dst.
func EncodeRequest(dst []byte, r Request) []byte {
	e := &codec.Encoder{B: dst}
	e.Byte(wireVersion)
	e.Uvarint(r.ID)
	e.Varint(int64(r.From))
	switch {
	case r.Register != nil:
		e.Byte(kindRegister)
		e.String(r.Register.Incarnation)
		e.Varint(int64(r.Register.PreviousEpoch))
		e.String(r.Register.Endpoint)
	case r.Heartbeat != nil:
		e.Byte(kindHeartbeat)
		e.Varint(int64(r.Heartbeat.Epoch))
		e.Varint(r.Heartbeat.AppliedOffset)
		e.Bool(r.Heartbeat.WantShutdown)
		e.Varint(int64(r.Heartbeat.MaxEntries))
	case r.AlterPartition != nil:
		e.Byte(kindAlterPartition)
		encodeAlterPartition(e, r.AlterPartition)
	case r.CreateTopic != nil:
		encodeCreateTopic(e, r.CreateTopic)
	case r.DeleteTopic != nil && r.DeleteTopic.ID.IsZero():
		e.Byte(kindDeleteTopic)
		e.String(r.DeleteTopic.Name)
	case r.DeleteTopic != nil:
		e.Byte(kindDeleteTopicID)
		e.String(r.DeleteTopic.Name)
		e.Bytes(r.DeleteTopic.ID[:])
	case r.ElectPreferred != nil:
		e.Byte(kindElectPreferred)
		encodePartitions(e, r.ElectPreferred.Partitions)
	case r.AllocateProducerIDs != nil:
		e.Byte(kindAllocateProducerIDs)
		e.Varint(int64(r.AllocateProducerIDs.BrokerEpoch))
	case r.CreatePartitions != nil:
		e.Byte(kindCreatePartitions)
		encodeCreatePartitions(e, r.CreatePartitions)
	case r.FetchMetadata != nil:
		e.Byte(kindFetchMetadata)
		e.Varint(int64(r.FetchMetadata.Epoch))
		e.Varint(r.FetchMetadata.AppliedOffset)
		e.Varint(int64(r.FetchMetadata.MaxEntries))
		e.Varint(r.FetchMetadata.MaxWaitTicks)
	case r.AlterConfigs != nil:
		e.Byte(kindAlterConfigs)
		encodeAlterConfigs(e, r.AlterConfigs)
	case r.Reassign != nil:
		e.Byte(kindReassign)
		encodeReassign(e, r.Reassign)
	default:
		e.Byte(0)
	}
	return e.B
}

func encodeAlterPartition(e *codec.Encoder, r *controller.AlterPartitionRequest) {
	e.Varint(int64(r.BrokerEpoch))
	e.Uvarint(uint64(len(r.Partitions)))
	for _, item := range r.Partitions {
		e.String(item.Topic)
		e.Varint(int64(item.Partition))
		e.Varint(int64(item.LeaderEpoch))
		e.Varint(int64(item.PartitionEpoch))
		e.Uvarint(uint64(len(item.NewISR)))
		for _, member := range item.NewISR {
			e.Varint(int64(member.ID))
			e.Varint(int64(member.Epoch))
		}
	}
}

func encodePartitions(e *codec.Encoder, partitions []metadata.TopicPartition) {
	e.Uvarint(uint64(len(partitions)))
	for _, tp := range partitions {
		e.String(tp.Topic)
		e.Varint(int64(tp.Partition))
	}
}

// DecodeRequest reads a request; one that carries no known payload is an
// error.
func DecodeRequest(b []byte) (Request, error) {
	d := codec.NewDecoder(b)
	if version := d.Byte(); version != wireVersion {
		return Request{}, d.Fail(fmt.Errorf("version %d", version))
	}
	r := Request{ID: d.Uvarint(), From: metadata.BrokerID(d.Int32())}
	switch kind := d.Byte(); kind {
	case kindRegister:
		r.Register = &RegisterRequest{Incarnation: d.String(maxIncarnationLen), PreviousEpoch: metadata.BrokerEpoch(d.Varint()),
			Endpoint: d.String(maxEndpointLen)}
	case kindHeartbeat:
		r.Heartbeat = &HeartbeatRequest{Epoch: metadata.BrokerEpoch(d.Varint()), AppliedOffset: d.Varint(), WantShutdown: d.Bool(),
			MaxEntries: int(d.Int32())}
	case kindAlterPartition:
		r.AlterPartition = decodeAlterPartition(d)
	case kindCreateTopic, kindCreateTopicConfigs:
		r.CreateTopic = decodeCreateTopic(d, kind == kindCreateTopicConfigs)
	case kindDeleteTopic:
		r.DeleteTopic = &DeleteTopicRequest{Name: d.String(maxWireName)}
	case kindDeleteTopicID:
		r.DeleteTopic = &DeleteTopicRequest{Name: d.String(maxWireName)}
		if id := d.Bytes(len(r.DeleteTopic.ID)); len(id) == len(r.DeleteTopic.ID) {
			copy(r.DeleteTopic.ID[:], id)
		} else {
			d.Fail(fmt.Errorf("topic id of %d bytes", len(id)))
		}
	case kindElectPreferred:
		r.ElectPreferred = &ElectPreferredRequest{Partitions: decodePartitions(d)}
	case kindAllocateProducerIDs:
		r.AllocateProducerIDs = &AllocateProducerIDsRequest{BrokerEpoch: metadata.BrokerEpoch(d.Varint())}
	case kindCreatePartitions:
		r.CreatePartitions = decodeCreatePartitions(d)
	case kindFetchMetadata:
		r.FetchMetadata = &FetchMetadataRequest{Epoch: metadata.BrokerEpoch(d.Varint()), AppliedOffset: d.Varint(), MaxEntries: int(d.Int32()),
			MaxWaitTicks: d.Varint()}
	case kindAlterConfigs:
		r.AlterConfigs = decodeAlterConfigs(d)
	case kindReassign:
		r.Reassign = decodeReassign(d)
	default:
		d.Fail(fmt.Errorf("request kind %d", kind))
	}
	return r, d.Finish()
}

func decodeAlterPartition(d *codec.Decoder) *controller.AlterPartitionRequest {
	r := &controller.AlterPartitionRequest{BrokerEpoch: metadata.BrokerEpoch(d.Varint())}
	n := d.Length(4, maxWireItems)
	for i := 0; i < n && d.Err() == nil; i++ {
		item := controller.AlterPartitionItem{TopicPartition: metadata.TopicPartition{Topic: d.String(maxWireName), Partition: d.Int32()},
			LeaderEpoch: record.LeaderEpoch(d.Int32()), PartitionEpoch: metadata.PartitionEpoch(d.Int32())}
		members := d.Length(2, maxWireItems)
		for j := 0; j < members && d.Err() == nil; j++ {
			item.NewISR = append(item.NewISR, controller.BrokerIDAndEpoch{ID: metadata.BrokerID(d.Int32()), Epoch: metadata.BrokerEpoch(d.Varint())})
		}
		r.Partitions = append(r.Partitions, item)
	}
	return r
}

// encodeCreatePartitions writes the topic, the new count, and the explicit
// assignments, a nil list of lists (the controller places the replicas)
// told apart from an empty one.
func encodeCreatePartitions(e *codec.Encoder, r *controller.CreatePartitionsRequest) {
	e.String(r.Topic)
	e.Varint(int64(r.Count))
	if r.Assignments == nil {
		e.Varint(-1)
		return
	}
	e.Varint(int64(len(r.Assignments)))
	for _, replicas := range r.Assignments {
		metadata.AppendBrokers(e, replicas)
	}
}

func decodeCreatePartitions(d *codec.Decoder) *controller.CreatePartitionsRequest {
	r := &controller.CreatePartitionsRequest{Topic: d.String(maxWireName), Count: int(d.Int32())}
	n := d.Varint()
	switch {
	case n == -1:
		return r
	case n < 0 || n > maxWireItems || n > int64(len(d.B)):
		d.Fail(fmt.Errorf("%d assignments", n))
		return r
	}
	r.Assignments = make([][]metadata.BrokerID, 0, n)
	for i := int64(0); i < n && d.Err() == nil; i++ {
		r.Assignments = append(r.Assignments, metadata.ReadBrokers(d))
	}
	return r
}

func decodePartitions(d *codec.Decoder) []metadata.TopicPartition {
	n := d.Length(2, maxWireItems)
	var partitions []metadata.TopicPartition
	for i := 0; i < n && d.Err() == nil; i++ {
		partitions = append(partitions, metadata.TopicPartition{Topic: d.String(maxWireName), Partition: d.Int32()})
	}
	return partitions
}

// EncodeAnswer appends an answer to dst.
func EncodeAnswer(dst []byte, a Answer) []byte {
	e := &codec.Encoder{B: dst}
	e.Byte(wireVersion)
	e.Uvarint(a.ID)
	e.Varint(int64(a.To))
	e.Uvarint(a.ControllerEpoch)
	e.Varint(int64(a.Leader))
	e.Varint(int64(a.ErrorCode))
	switch {
	case a.Register != nil:
		e.Byte(kindRegister)
		e.Varint(int64(a.Register.Epoch))
	case a.Heartbeat != nil:
		e.Byte(kindHeartbeat)
		encodeHeartbeatAnswer(e, a.Heartbeat)
	case a.AlterPartition != nil:
		e.Byte(kindAlterPartition)
		e.Varint(int64(a.AlterPartition.ErrorCode))
		e.Uvarint(uint64(len(a.AlterPartition.Partitions)))
		for _, result := range a.AlterPartition.Partitions {
			e.String(result.Topic)
			e.Varint(int64(result.TopicPartition.Partition))
			e.Varint(int64(result.ErrorCode))
			metadata.AppendPartitionState(e, result.Partition)
		}
	case a.ElectPreferred != nil:
		e.Byte(kindElectPreferred)
		e.Varint(int64(a.ElectPreferred.ErrorCode))
		e.Uvarint(uint64(len(a.ElectPreferred.Results)))
		for _, result := range a.ElectPreferred.Results {
			e.String(result.Topic)
			e.Varint(int64(result.Partition))
			e.Varint(int64(result.ErrorCode))
		}
	case a.ProducerIDs != nil:
		e.Byte(kindAllocateProducerIDs)
		e.Varint(a.ProducerIDs.FirstProducerID)
		e.Varint(a.ProducerIDs.Length)
	case a.AlterConfigs != nil:
		e.Byte(kindAlterConfigs)
		e.String(a.AlterConfigs.Message)
		encodeConfigs(e, a.AlterConfigs.Configs)
	default:
		e.Byte(0)
	}
	return e.B
}

func encodeHeartbeatAnswer(e *codec.Encoder, a *HeartbeatAnswer) {
	e.Bool(a.Fenced)
	e.Bool(a.ShuttingDown)
	e.Bytes(a.Snapshot)
	e.Uvarint(uint64(len(a.Entries)))
	if len(a.Entries) > 0 {
		// Entries are consecutive: the first offset and the records.
		e.Varint(a.Entries[0].Offset)
		for _, entry := range a.Entries {
			metadata.AppendRecord(e, entry.Record)
		}
	}
}

// DecodeAnswer reads an answer.
func DecodeAnswer(b []byte) (Answer, error) {
	d := codec.NewDecoder(b)
	if version := d.Byte(); version != wireVersion {
		return Answer{}, d.Fail(fmt.Errorf("version %d", version))
	}
	a := Answer{ID: d.Uvarint(), To: metadata.BrokerID(d.Int32()), ControllerEpoch: d.Uvarint(), Leader: metadata.BrokerID(d.Int32()),
		ErrorCode: d.Int16()}
	switch kind := d.Byte(); kind {
	case 0:
	case kindRegister:
		a.Register = &RegisterAnswer{Epoch: metadata.BrokerEpoch(d.Varint())}
	case kindHeartbeat:
		a.Heartbeat = decodeHeartbeatAnswer(d)
	case kindAlterPartition:
		a.AlterPartition = &controller.AlterPartitionResponse{ErrorCode: d.Int16()}
		n := d.Length(4, maxWireItems)
		for i := 0; i < n && d.Err() == nil; i++ {
			result := controller.AlterPartitionResult{TopicPartition: metadata.TopicPartition{Topic: d.String(maxWireName), Partition: d.Int32()},
				ErrorCode: d.Int16()}
			result.Partition = metadata.ReadPartitionState(d)
			a.AlterPartition.Partitions = append(a.AlterPartition.Partitions, result)
		}
	case kindElectPreferred:
		a.ElectPreferred = &controller.ElectLeadersResponse{ErrorCode: d.Int16()}
		n := d.Length(3, maxWireItems)
		for i := 0; i < n && d.Err() == nil; i++ {
			a.ElectPreferred.Results = append(a.ElectPreferred.Results, controller.ElectionResult{
				TopicPartition: metadata.TopicPartition{Topic: d.String(maxWireName), Partition: d.Int32()}, ErrorCode: d.Int16()})
		}
	case kindAllocateProducerIDs:
		a.ProducerIDs = &controller.ProducerIDBlock{FirstProducerID: d.Varint(), Length: d.Varint()}
	case kindAlterConfigs:
		a.AlterConfigs = &AlterConfigsAnswer{Message: d.String(maxWireConfigValue), Configs: decodeConfigs(d)}
	default:
		d.Fail(fmt.Errorf("answer kind %d", kind))
	}
	return a, d.Finish()
}

func decodeHeartbeatAnswer(d *codec.Decoder) *HeartbeatAnswer {
	a := &HeartbeatAnswer{Fenced: d.Bool(), ShuttingDown: d.Bool()}
	if snapshot := d.Bytes(maxSnapshotBytes); len(snapshot) > 0 {
		a.Snapshot = append([]byte(nil), snapshot...)
	}
	n := d.Length(1, 1<<24)
	if n > 0 {
		offset := d.Varint()
		for i := 0; i < n && d.Err() == nil; i++ {
			a.Entries = append(a.Entries, metadata.Entry{Offset: offset + int64(i), Record: metadata.ReadRecord(d)})
		}
	}
	return a
}

func encodeCreateTopic(e *codec.Encoder, r *controller.CreateTopicRequest) {
	kind := kindCreateTopic
	if len(r.Configs) > 0 {
		kind = kindCreateTopicConfigs
	}
	e.Byte(kind)
	e.String(r.Name)
	e.Varint(int64(r.Partitions))
	e.Varint(int64(r.ReplicationFactor))
	e.Varint(int64(r.Config.MinInsyncReplicas))
	e.Bool(r.Config.UncleanLeaderElection)
	if kind == kindCreateTopicConfigs {
		encodeConfigs(e, r.Configs)
	}
}

// encodeConfigs writes a count, then key and value pairs in key order.
func encodeConfigs(e *codec.Encoder, configs map[string]string) {
	e.Uvarint(uint64(len(configs)))
	for _, key := range slices.Sorted(maps.Keys(configs)) {
		e.String(key)
		e.String(configs[key])
	}
}

// decodeConfigs reads what encodeConfigs wrote; a key twice is an error.
func decodeConfigs(d *codec.Decoder) map[string]string {
	n := d.Length(2, maxWireConfigs)
	configs := make(map[string]string, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		key := d.String(maxWireConfigKey)
		if _, twice := configs[key]; twice && d.Err() == nil {
			d.Fail(fmt.Errorf("config %q twice", key))
		}
		configs[key] = d.String(maxWireConfigValue)
	}
	return configs
}

func encodeAlterConfigs(e *codec.Encoder, r *controller.AlterConfigsRequest) {
	e.Byte(byte(r.Resource.Type))
	e.String(r.Resource.Name)
	e.Bool(r.Incremental)
	e.Uvarint(uint64(len(r.Changes)))
	for _, change := range r.Changes {
		e.String(change.Key)
		e.Byte(byte(change.Op))
		e.String(change.Value)
	}
}

func decodeAlterConfigs(d *codec.Decoder) *controller.AlterConfigsRequest {
	r := &controller.AlterConfigsRequest{Resource: metadata.ConfigResource{Type: metadata.ConfigResourceType(d.Byte()), Name: d.String(maxWireName)}}
	r.Incremental = d.Bool()
	n := d.Length(3, maxWireConfigs)
	for i := 0; i < n && d.Err() == nil; i++ {
		r.Changes = append(r.Changes, controller.ConfigChange{Key: d.String(maxWireConfigKey), Op: controller.ConfigOp(d.Byte()),
			Value: d.String(maxWireConfigValue)})
	}
	return r
}

func decodeCreateTopic(d *codec.Decoder, withConfigs bool) *controller.CreateTopicRequest {
	r := &controller.CreateTopicRequest{Name: d.String(maxWireName), Partitions: int(d.Int32()), ReplicationFactor: int(d.Int32())}
	r.Config = metadata.TopicConfig{MinInsyncReplicas: int(d.Int32()), UncleanLeaderElection: d.Bool()}
	if !withConfigs {
		return r
	}
	r.Configs = decodeConfigs(d)
	if len(r.Configs) == 0 && d.Err() == nil {
		// The encoder writes kindCreateTopic for a topic without configs:
		// an empty section is bytes no controller sent.
		d.Fail(errors.New("a create-topic-with-configs names no config"))
	}
	return r
}
