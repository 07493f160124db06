package metadata

import (
	"errors"
	"fmt"
	"slices"

	"github.com/tidelog/tide/internal/codec"
	"github.com/tidelog/tide/internal/record"
)

// The metadata log's bytes. The quorum replicates records as bytes (a raft
// entry holds one batch of records) and snapshots the image as bytes; this
// file is the one place that turns them into values and back.
//
// Format: a version byte, then varint-framed fields (internal/codec). A
// batch is its record count and the records, each a type byte and its
// fields; an image is its next offset, its brokers and its topics. Strings
// and lists carry their length first. A corrupt or hostile input gets an
// ErrCorrupt, never a panic.

// codecVersion is the first byte of every encoding.
const codecVersion = 1

// Limits on what a decoder accepts.
const (
	maxNameBytes          = 249 // Kafka's topic name limit; incarnations are shorter
	maxReplicasPerSet     = 1024
	maxPartitionsPerTopic = 1 << 20
)

// ErrCorrupt means bytes are not a valid encoding of records or an image.
var ErrCorrupt = codec.ErrCorrupt

// Record type tags, stable on disk.
const (
	tagRegisterBroker          byte = 1
	tagUnfenceBroker           byte = 2
	tagFenceBroker             byte = 3
	tagBeginControlledShutdown byte = 4
	tagUnregisterBroker        byte = 5
	tagCreateTopic             byte = 6
	tagDeleteTopic             byte = 7
	tagPartitionChange         byte = 8
	tagProducerIDs             byte = 9
	// tagRegisterBrokerEndpoint is a RegisterBroker with an endpoint; one
	// without keeps tagRegisterBroker, as written before endpoints.
	tagRegisterBrokerEndpoint byte = 10
	// tagCreateTopicID is a CreateTopic with its topic id; one without
	// (written before topic ids) keeps tagCreateTopic. Tags 11 to 15 are
	// left to the topic config records.
	tagCreateTopicID byte = 16
	tagAssignTopicID byte = 17
	// tagCreatePartitions (18) is in partitions.go, tagReassignment (19)
	// in reassignment.go.
)

// imageEndpointsVersion is the image encoding with each broker's endpoint,
// written when some broker has one; codecVersion images have none.
const imageEndpointsVersion = 2

// imageTrailingVersion is imageEndpointsVersion plus a trailing section: a
// count, then records (AppendRecord) that rebuild image state CreateTopic
// does not carry, applied after the topics (today the config records).
// It is written only when there is such state, so an image without any
// keeps its older encoding.
const imageTrailingVersion = 3

// maxEndpointBytes bounds an endpoint: a host name (253) and a port.
const maxEndpointBytes = 260

// EncodeRecords appends a batch of records to dst.
func EncodeRecords(dst []byte, records []Record) []byte {
	e := &codec.Encoder{B: dst}
	e.Byte(codecVersion)
	e.Uvarint(uint64(len(records)))
	for _, r := range records {
		AppendRecord(e, r)
	}
	return e.B
}

// DecodeRecords reads a batch of records.
func DecodeRecords(b []byte) ([]Record, error) {
	d := codec.NewDecoder(b)
	if version := d.Byte(); version != codecVersion {
		return nil, d.Fail(fmt.Errorf("version %d", version))
	}
	count := d.Length(1, len(b))
	records := make([]Record, 0, count)
	for i := 0; i < count && d.Err() == nil; i++ {
		records = append(records, ReadRecord(d))
	}
	return records, d.Finish()
}

// AppendBrokers writes a list of broker ids; a nil list (an unchanged
// assignment in PartitionChange) is told apart from an empty one.
func AppendBrokers(e *codec.Encoder, ids []BrokerID) {
	if ids == nil {
		e.Varint(-1)
		return
	}
	e.Varint(int64(len(ids)))
	for _, id := range ids {
		e.Varint(int64(id))
	}
}

// ReadBrokers reads what AppendBrokers wrote.
func ReadBrokers(d *codec.Decoder) []BrokerID {
	n := d.Varint()
	switch {
	case n == -1:
		return nil
	case n < 0 || n > maxReplicasPerSet || n > int64(len(d.B)):
		d.Fail(fmt.Errorf("broker list of %d", n))
		return nil
	}
	ids := make([]BrokerID, n)
	for i := range ids {
		ids[i] = BrokerID(d.Int32())
	}
	return ids
}

// AppendRecord writes one record, its type tag first.
func AppendRecord(e *codec.Encoder, r Record) {
	switch r := r.(type) {
	case RegisterBroker:
		if r.Endpoint == "" {
			appendBrokerEpoch(e, tagRegisterBroker, r.ID, r.Epoch)
			e.String(r.Incarnation)
			break
		}
		appendBrokerEpoch(e, tagRegisterBrokerEndpoint, r.ID, r.Epoch)
		e.String(r.Incarnation)
		e.String(r.Endpoint)
	case UnfenceBroker:
		appendBrokerEpoch(e, tagUnfenceBroker, r.ID, r.Epoch)
	case FenceBroker:
		appendBrokerEpoch(e, tagFenceBroker, r.ID, r.Epoch)
	case BeginControlledShutdown:
		appendBrokerEpoch(e, tagBeginControlledShutdown, r.ID, r.Epoch)
	case UnregisterBroker:
		appendBrokerEpoch(e, tagUnregisterBroker, r.ID, r.Epoch)
	case CreateTopic:
		if r.ID.IsZero() {
			e.Byte(tagCreateTopic)
		} else {
			e.Byte(tagCreateTopicID)
			e.Bytes(r.ID[:])
		}
		e.String(r.Name)
		appendTopicConfig(e, r.Config)
		e.Uvarint(uint64(len(r.Partitions)))
		for _, p := range r.Partitions {
			AppendPartitionState(e, p)
		}
	case DeleteTopic:
		e.Byte(tagDeleteTopic)
		e.String(r.Name)
	case AssignTopicID:
		e.Byte(tagAssignTopicID)
		e.Bytes(r.ID[:])
		e.String(r.Name)
	case PartitionChange:
		e.Byte(tagPartitionChange)
		AppendPartitionState(e, PartitionState{TopicPartition: r.TopicPartition, Replicas: r.Replicas, ISR: r.ISR, ELR: r.ELR,
			Leader: r.Leader, LeaderEpoch: r.LeaderEpoch, PartitionEpoch: r.PartitionEpoch, LeaderRecoveryState: r.LeaderRecoveryState})
	case CreatePartitions:
		appendCreatePartitions(e, r)
	case ProducerIDs:
		appendBrokerEpoch(e, tagProducerIDs, r.BrokerID, r.BrokerEpoch)
		e.Varint(r.NextProducerID)
	case ConfigRecord:
		appendConfigRecord(e, r)
	case Reassignment:
		appendReassignment(e, r)
	default:
		// The record set is sealed: a type missing here is a programmer
		// error caught by the codec's round-trip test.
		panic(fmt.Sprintf("metadata: no encoding for record %T", r))
	}
}

func appendBrokerEpoch(e *codec.Encoder, tag byte, id BrokerID, epoch BrokerEpoch) {
	e.Byte(tag)
	e.Varint(int64(id))
	e.Varint(int64(epoch))
}

func appendTopicConfig(e *codec.Encoder, c TopicConfig) {
	e.Varint(int64(c.ReplicationFactor))
	e.Varint(int64(c.MinInsyncReplicas))
	e.Bool(c.UncleanLeaderElection)
}

// AppendPartitionState writes a partition's state.
func AppendPartitionState(e *codec.Encoder, p PartitionState) {
	e.String(p.Topic)
	e.Varint(int64(p.Partition))
	AppendBrokers(e, p.Replicas)
	AppendBrokers(e, p.ISR)
	AppendBrokers(e, p.ELR)
	e.Varint(int64(p.Leader))
	e.Varint(int64(p.LeaderEpoch))
	e.Varint(int64(p.PartitionEpoch))
	e.Byte(byte(p.LeaderRecoveryState))
}

func readBrokerEpoch(d *codec.Decoder) (BrokerID, BrokerEpoch) {
	return BrokerID(d.Int32()), BrokerEpoch(d.Varint())
}

// ReadRecord reads what AppendRecord wrote.
func ReadRecord(d *codec.Decoder) Record {
	switch tag := d.Byte(); tag {
	case tagRegisterBroker:
		id, epoch := readBrokerEpoch(d)
		return RegisterBroker{ID: id, Epoch: epoch, Incarnation: d.String(maxNameBytes)}
	case tagRegisterBrokerEndpoint:
		id, epoch := readBrokerEpoch(d)
		return RegisterBroker{ID: id, Epoch: epoch, Incarnation: d.String(maxNameBytes), Endpoint: d.String(maxEndpointBytes)}
	case tagUnfenceBroker:
		id, epoch := readBrokerEpoch(d)
		return UnfenceBroker{ID: id, Epoch: epoch}
	case tagFenceBroker:
		id, epoch := readBrokerEpoch(d)
		return FenceBroker{ID: id, Epoch: epoch}
	case tagBeginControlledShutdown:
		id, epoch := readBrokerEpoch(d)
		return BeginControlledShutdown{ID: id, Epoch: epoch}
	case tagUnregisterBroker:
		id, epoch := readBrokerEpoch(d)
		return UnregisterBroker{ID: id, Epoch: epoch}
	case tagCreateTopic:
		return readCreateTopic(d, NoTopicID)
	case tagCreateTopicID:
		return readCreateTopic(d, readTopicID(d))
	case tagAssignTopicID:
		id := readTopicID(d)
		return AssignTopicID{ID: id, Name: d.String(maxNameBytes)}
	case tagDeleteTopic:
		return DeleteTopic{Name: d.String(maxNameBytes)}
	case tagPartitionChange:
		p := ReadPartitionState(d)
		return PartitionChange{TopicPartition: p.TopicPartition, Leader: p.Leader, ISR: p.ISR, ELR: p.ELR, Replicas: p.Replicas,
			LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, LeaderRecoveryState: p.LeaderRecoveryState}
	case tagCreatePartitions:
		return readCreatePartitions(d)
	case tagProducerIDs:
		id, epoch := readBrokerEpoch(d)
		return ProducerIDs{BrokerID: id, BrokerEpoch: epoch, NextProducerID: d.Varint()}
	case tagConfigRecord:
		return readConfigRecord(d)
	case tagReassignment:
		return readReassignment(d)
	default:
		d.Fail(fmt.Errorf("record type %d", tag))
		return nil
	}
}

func readTopicID(d *codec.Decoder) TopicID {
	var id TopicID
	if b := d.Bytes(len(id)); len(b) == len(id) {
		copy(id[:], b)
	} else if d.Err() == nil {
		d.Fail(fmt.Errorf("topic id of %d bytes", len(b)))
	}
	return id
}

func readCreateTopic(d *codec.Decoder, id TopicID) Record {
	topic := CreateTopic{Name: d.String(maxNameBytes), ID: id, Config: readTopicConfig(d)}
	n := d.Length(1, maxPartitionsPerTopic)
	for i := 0; i < n && d.Err() == nil; i++ {
		topic.Partitions = append(topic.Partitions, ReadPartitionState(d))
	}
	return topic
}

func readTopicConfig(d *codec.Decoder) TopicConfig {
	return TopicConfig{ReplicationFactor: int(d.Int32()), MinInsyncReplicas: int(d.Int32()), UncleanLeaderElection: d.Bool()}
}

// ReadPartitionState reads what AppendPartitionState wrote.
func ReadPartitionState(d *codec.Decoder) PartitionState {
	p := PartitionState{TopicPartition: TopicPartition{Topic: d.String(maxNameBytes), Partition: d.Int32()}}
	p.Replicas, p.ISR, p.ELR = ReadBrokers(d), ReadBrokers(d), ReadBrokers(d)
	p.Leader = BrokerID(d.Int32())
	p.LeaderEpoch = record.LeaderEpoch(d.Int32())
	p.PartitionEpoch = PartitionEpoch(d.Int32())
	p.LeaderRecoveryState = LeaderRecoveryState(d.Byte())
	return p
}

// EncodeImage appends a snapshot of the image to dst: what a controller
// writes into a raft snapshot, and what a broker too far behind the
// metadata log loads instead of the records it missed.
func EncodeImage(dst []byte, img *Image) []byte {
	e := &codec.Encoder{B: dst}
	ids := img.brokerIDs()
	version := byte(codecVersion)
	for _, id := range ids {
		if img.brokers[id].endpoint != "" {
			version = imageEndpointsVersion
		}
	}
	trailing := img.configRecords()
	if len(trailing) > 0 {
		version = imageTrailingVersion
	}
	if reassignments := img.reassignmentRecords(); len(reassignments) > 0 {
		trailing = append(trailing, reassignments...)
		version = imageReassignmentsVersion
	}
	e.Byte(version)
	e.Varint(img.nextOffset)
	e.Varint(img.nextProducerID)
	e.Uvarint(uint64(len(ids)))
	for _, id := range ids {
		registration := img.brokers[id]
		state := registration.state
		e.Varint(int64(state.ID))
		e.Varint(int64(state.Epoch))
		e.Bool(state.Fenced)
		e.Bool(state.ShuttingDown)
		e.Varint(int64(state.ServedEpoch))
		e.String(registration.incarnation)
		if version >= imageEndpointsVersion {
			e.String(registration.endpoint)
		}
	}
	names := img.Topics()
	e.Uvarint(uint64(len(names)))
	for _, name := range names {
		topic := img.topics[name]
		AppendRecord(e, CreateTopic{Name: name, ID: topic.id, Config: topic.config, Partitions: topic.partitions})
	}
	if version >= imageTrailingVersion {
		e.Uvarint(uint64(len(trailing)))
		for _, r := range trailing {
			AppendRecord(e, r)
		}
	}
	return e.B
}

// DecodeImage reads a snapshot of an image and checks every invariant of
// Image on it: a snapshot is trusted no more than a record.
func DecodeImage(b []byte) (*Image, error) {
	d := codec.NewDecoder(b)
	version := d.Byte()
	if version < codecVersion || version > imageReassignmentsVersion {
		return nil, d.Fail(fmt.Errorf("version %d", version))
	}
	img := &Image{nextOffset: d.Varint(), nextProducerID: d.Varint(), brokers: map[BrokerID]brokerRegistration{}, topics: map[string]*topicImage{}}
	count := d.Length(1, len(b))
	for i := 0; i < count && d.Err() == nil; i++ {
		id, epoch := readBrokerEpoch(d)
		state := BrokerState{ID: id, Epoch: epoch, Fenced: d.Bool(), ShuttingDown: d.Bool(), ServedEpoch: BrokerEpoch(d.Varint())}
		registration := brokerRegistration{state: state, incarnation: d.String(maxNameBytes)}
		if version >= imageEndpointsVersion {
			registration.endpoint = d.String(maxEndpointBytes)
		}
		if _, taken := img.brokers[id]; taken || id < 0 {
			d.Fail(fmt.Errorf("broker %d twice or negative", id))
		}
		img.brokers[id] = registration
	}
	count = d.Length(1, len(b))
	for i := 0; i < count && d.Err() == nil; i++ {
		topic, ok := ReadRecord(d).(CreateTopic)
		if !ok {
			d.Fail(errors.New("a topic that is not one"))
			break
		}
		if _, taken := img.topics[topic.Name]; taken {
			d.Fail(fmt.Errorf("topic %q twice", topic.Name))
		}
		img.topics[topic.Name] = &topicImage{id: topic.ID, config: topic.Config, partitions: topic.Partitions}
	}
	if version >= imageTrailingVersion {
		readTrailing(d, img, len(b), version)
	}
	if err := d.Finish(); err != nil {
		return nil, err
	}
	if err := img.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return img, nil
}

// validate checks every invariant of Image over the whole image.
func (img *Image) validate() error {
	if img.nextOffset < 0 || img.nextProducerID < 0 {
		return fmt.Errorf("next offset %d, next producer id %d", img.nextOffset, img.nextProducerID)
	}
	for _, id := range img.brokerIDs() {
		state := img.brokers[id].state
		if state.ID != id || state.Epoch < 0 || state.ServedEpoch > state.Epoch {
			return fmt.Errorf("broker %d: %+v", id, state)
		}
	}
	for _, name := range img.Topics() {
		topic := img.topics[name]
		if name == "" || len(topic.partitions) == 0 {
			return fmt.Errorf("topic %q with %d partitions", name, len(topic.partitions))
		}
		if other, taken := img.TopicByID(topic.id); (taken && other != name) || (!topic.id.IsZero() && !topic.id.Usable()) {
			return fmt.Errorf("topic %q with id %s", name, topic.id)
		}
		for i, p := range topic.partitions {
			if p.Topic != name || p.Partition != int32(i) {
				return fmt.Errorf("topic %q holds partition %s at %d", name, p.TopicPartition, i)
			}
			if err := img.validatePartition(p, effectiveConfig(topic, img.brokerDefaults)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Equal reports whether two images hold the same metadata at the same
// offset: for tests, and for checking that every controller and broker
// built the same image from the same log.
func (img *Image) Equal(other *Image) bool {
	return slices.Equal(EncodeImage(nil, img), EncodeImage(nil, other))
}

// readTrailing reads an image's trailing section and applies its records
// after the topics. Only records that rebuild state CreateTopic does not
// carry belong there (config records, and from imageReassignmentsVersion
// on the reassignments in progress); any other is a corrupt snapshot.
func readTrailing(d *codec.Decoder, img *Image, size int, version byte) {
	count := d.Length(1, size)
	for i := 0; i < count && d.Err() == nil; i++ {
		r := ReadRecord(d)
		if d.Err() != nil {
			return
		}
		var err error
		switch r := r.(type) {
		case ConfigRecord:
			if r.Delete {
				err = fmt.Errorf("trailing record %v", r)
				break
			}
			// Set without the checks of applyConfig: the order of the
			// section (defaults, then topics) may pass through states that
			// break an invariant the whole image keeps; validate checks that.
			_, err = img.applyConfigUnchecked(r)
		case Reassignment:
			if version < imageReassignmentsVersion {
				err = fmt.Errorf("trailing record %v", r)
				break
			}
			var applied bool
			applied, err = img.applyReassignment(r)
			if err == nil && !applied {
				err = fmt.Errorf("stale trailing record %v", r)
			}
		default:
			err = fmt.Errorf("trailing record %v", r)
		}
		if err != nil {
			d.Fail(err)
			return
		}
	}
}
