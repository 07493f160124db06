package metadata

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/tidelog/tide/internal/record"
)

// The metadata log's bytes. The quorum replicates records as bytes (a raft
// entry holds one batch of records) and snapshots the image as bytes; this
// file is the one place that turns them into values and back.
//
// Format: a version byte, then varint-framed fields. A batch is its record
// count and the records, each a type byte and its fields; an image is its
// next offset, its brokers and its topics. Strings and lists carry their
// length first. Every length is checked against what is left and against
// the limits below before anything is allocated, so a corrupt or hostile
// input gets an ErrCorrupt, never a panic or an allocation it did not pay
// for with its own bytes.

// codecVersion is the first byte of every encoding.
const codecVersion = 1

// Limits on what a decoder accepts.
const (
	maxNameBytes          = 249 // Kafka's topic name limit; incarnations are shorter
	maxReplicasPerSet     = 1024
	maxPartitionsPerTopic = 1 << 20
)

// ErrCorrupt means bytes are not a valid encoding of records or an image.
var ErrCorrupt = errors.New("metadata: corrupt encoding")

// Record type tags, stable on disk.
const (
	tagRegisterBroker          = 1
	tagUnfenceBroker           = 2
	tagFenceBroker             = 3
	tagBeginControlledShutdown = 4
	tagUnregisterBroker        = 5
	tagCreateTopic             = 6
	tagDeleteTopic             = 7
	tagPartitionChange         = 8
)

// EncodeRecords appends a batch of records to dst.
func EncodeRecords(dst []byte, records []Record) []byte {
	w := encoder{dst}
	w.byte(codecVersion)
	w.uvarint(uint64(len(records)))
	for _, r := range records {
		w.record(r)
	}
	return w.b
}

// DecodeRecords reads a batch of records.
func DecodeRecords(b []byte) ([]Record, error) {
	r := decoder{b: b}
	if version := r.byte(); version != codecVersion {
		return nil, r.fail(fmt.Errorf("version %d", version))
	}
	count := r.length(1)
	records := make([]Record, 0, count)
	for i := 0; i < count && r.err == nil; i++ {
		records = append(records, r.record())
	}
	return records, r.finish()
}

type encoder struct{ b []byte }

func (w *encoder) byte(v byte)      { w.b = append(w.b, v) }
func (w *encoder) uvarint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }
func (w *encoder) varint(v int64)   { w.b = binary.AppendVarint(w.b, v) }
func (w *encoder) bool(v bool) {
	if v {
		w.byte(1)
	} else {
		w.byte(0)
	}
}
func (w *encoder) string(v string)    { w.uvarint(uint64(len(v))); w.b = append(w.b, v...) }
func (w *encoder) broker(id BrokerID) { w.varint(int64(id)) }

func (w *encoder) brokers(ids []BrokerID) {
	// A nil list (an unchanged assignment in PartitionChange) is told apart
	// from an empty one.
	if ids == nil {
		w.varint(-1)
		return
	}
	w.varint(int64(len(ids)))
	for _, id := range ids {
		w.broker(id)
	}
}

func (w *encoder) record(r Record) {
	switch r := r.(type) {
	case RegisterBroker:
		w.byte(tagRegisterBroker)
		w.brokerEpoch(r.ID, r.Epoch)
		w.string(r.Incarnation)
	case UnfenceBroker:
		w.byte(tagUnfenceBroker)
		w.brokerEpoch(r.ID, r.Epoch)
	case FenceBroker:
		w.byte(tagFenceBroker)
		w.brokerEpoch(r.ID, r.Epoch)
	case BeginControlledShutdown:
		w.byte(tagBeginControlledShutdown)
		w.brokerEpoch(r.ID, r.Epoch)
	case UnregisterBroker:
		w.byte(tagUnregisterBroker)
		w.brokerEpoch(r.ID, r.Epoch)
	case CreateTopic:
		w.byte(tagCreateTopic)
		w.string(r.Name)
		w.topicConfig(r.Config)
		w.uvarint(uint64(len(r.Partitions)))
		for _, p := range r.Partitions {
			w.partitionState(p)
		}
	case DeleteTopic:
		w.byte(tagDeleteTopic)
		w.string(r.Name)
	case PartitionChange:
		w.byte(tagPartitionChange)
		w.partitionState(PartitionState{TopicPartition: r.TopicPartition, Replicas: r.Replicas, ISR: r.ISR, ELR: r.ELR,
			Leader: r.Leader, LeaderEpoch: r.LeaderEpoch, PartitionEpoch: r.PartitionEpoch, LeaderRecoveryState: r.LeaderRecoveryState})
	default:
		// The record set is sealed: a type missing here is a programmer
		// error caught by the codec's round-trip test.
		panic(fmt.Sprintf("metadata: no encoding for record %T", r))
	}
}

func (w *encoder) brokerEpoch(id BrokerID, epoch BrokerEpoch) {
	w.broker(id)
	w.varint(int64(epoch))
}

func (w *encoder) topicConfig(c TopicConfig) {
	w.varint(int64(c.ReplicationFactor))
	w.varint(int64(c.MinInsyncReplicas))
	w.bool(c.UncleanLeaderElection)
}

func (w *encoder) partitionState(p PartitionState) {
	w.string(p.Topic)
	w.varint(int64(p.Partition))
	w.brokers(p.Replicas)
	w.brokers(p.ISR)
	w.brokers(p.ELR)
	w.broker(p.Leader)
	w.varint(int64(p.LeaderEpoch))
	w.varint(int64(p.PartitionEpoch))
	w.byte(byte(p.LeaderRecoveryState))
}

// decoder reads an encoding; the first error sticks and every later read
// returns a zero value, so decoding code reads straight through and checks
// once at the end.
type decoder struct {
	b   []byte
	err error
}

func (r *decoder) fail(err error) error {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %v", ErrCorrupt, err)
		r.b = nil
	}
	return r.err
}

func (r *decoder) finish() error {
	if r.err == nil && len(r.b) != 0 {
		r.fail(fmt.Errorf("%d bytes after the end", len(r.b)))
	}
	return r.err
}

func (r *decoder) byte() byte {
	if len(r.b) < 1 {
		r.fail(errors.New("truncated"))
		return 0
	}
	v := r.b[0]
	r.b = r.b[1:]
	return v
}

func (r *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail(errors.New("bad varint"))
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *decoder) varint() int64 {
	v, n := binary.Varint(r.b)
	if n <= 0 {
		r.fail(errors.New("bad varint"))
		return 0
	}
	r.b = r.b[n:]
	return v
}

// int32 reads a varint that must fit an int32.
func (r *decoder) int32() int32 {
	v := r.varint()
	if v < math.MinInt32 || v > math.MaxInt32 {
		r.fail(fmt.Errorf("%d does not fit 32 bits", v))
		return 0
	}
	return int32(v)
}

// length reads a count of items each taking at least minBytes, refusing one
// the remaining bytes cannot hold.
func (r *decoder) length(minBytes int) int {
	v := r.uvarint()
	if v > uint64(len(r.b)/minBytes) {
		r.fail(fmt.Errorf("length %d with %d bytes left", v, len(r.b)))
		return 0
	}
	return int(v)
}

func (r *decoder) bool() bool {
	switch r.byte() {
	case 0:
		return false
	case 1:
		return true
	}
	r.fail(errors.New("bad bool"))
	return false
}

func (r *decoder) string() string {
	n := r.length(1)
	if n > maxNameBytes {
		r.fail(fmt.Errorf("name of %d bytes", n))
		return ""
	}
	v := string(r.b[:n])
	r.b = r.b[n:]
	return v
}

func (r *decoder) broker() BrokerID { return BrokerID(r.int32()) }

func (r *decoder) brokers() []BrokerID {
	n := r.varint()
	switch {
	case n == -1:
		return nil
	case n < 0 || n > maxReplicasPerSet || n > int64(len(r.b)):
		r.fail(fmt.Errorf("broker list of %d", n))
		return nil
	}
	ids := make([]BrokerID, n)
	for i := range ids {
		ids[i] = r.broker()
	}
	return ids
}

func (r *decoder) brokerEpoch() (BrokerID, BrokerEpoch) {
	return r.broker(), BrokerEpoch(r.varint())
}

func (r *decoder) record() Record {
	switch tag := r.byte(); tag {
	case tagRegisterBroker:
		id, epoch := r.brokerEpoch()
		return RegisterBroker{ID: id, Epoch: epoch, Incarnation: r.string()}
	case tagUnfenceBroker:
		id, epoch := r.brokerEpoch()
		return UnfenceBroker{ID: id, Epoch: epoch}
	case tagFenceBroker:
		id, epoch := r.brokerEpoch()
		return FenceBroker{ID: id, Epoch: epoch}
	case tagBeginControlledShutdown:
		id, epoch := r.brokerEpoch()
		return BeginControlledShutdown{ID: id, Epoch: epoch}
	case tagUnregisterBroker:
		id, epoch := r.brokerEpoch()
		return UnregisterBroker{ID: id, Epoch: epoch}
	case tagCreateTopic:
		return r.createTopic()
	case tagDeleteTopic:
		return DeleteTopic{Name: r.string()}
	case tagPartitionChange:
		p := r.partitionState()
		return PartitionChange{TopicPartition: p.TopicPartition, Leader: p.Leader, ISR: p.ISR, ELR: p.ELR, Replicas: p.Replicas,
			LeaderEpoch: p.LeaderEpoch, PartitionEpoch: p.PartitionEpoch, LeaderRecoveryState: p.LeaderRecoveryState}
	default:
		r.fail(fmt.Errorf("record type %d", tag))
		return nil
	}
}

func (r *decoder) createTopic() Record {
	topic := CreateTopic{Name: r.string(), Config: r.topicConfig()}
	n := r.length(1)
	if n > maxPartitionsPerTopic {
		r.fail(fmt.Errorf("%d partitions", n))
	}
	for i := 0; i < n && r.err == nil; i++ {
		topic.Partitions = append(topic.Partitions, r.partitionState())
	}
	return topic
}

func (r *decoder) topicConfig() TopicConfig {
	return TopicConfig{ReplicationFactor: int(r.int32()), MinInsyncReplicas: int(r.int32()), UncleanLeaderElection: r.bool()}
}

func (r *decoder) partitionState() PartitionState {
	p := PartitionState{TopicPartition: TopicPartition{Topic: r.string(), Partition: r.int32()}}
	p.Replicas, p.ISR, p.ELR = r.brokers(), r.brokers(), r.brokers()
	p.Leader = r.broker()
	p.LeaderEpoch = record.LeaderEpoch(r.int32())
	p.PartitionEpoch = PartitionEpoch(r.int32())
	p.LeaderRecoveryState = LeaderRecoveryState(r.byte())
	return p
}

// EncodeImage appends a snapshot of the image to dst: what a controller
// writes into a raft snapshot, and what a broker too far behind the
// metadata log loads instead of the records it missed.
func EncodeImage(dst []byte, img *Image) []byte {
	w := encoder{dst}
	w.byte(codecVersion)
	w.varint(img.nextOffset)
	ids := img.brokerIDs()
	w.uvarint(uint64(len(ids)))
	for _, id := range ids {
		registration := img.brokers[id]
		state := registration.state
		w.brokerEpoch(state.ID, state.Epoch)
		w.bool(state.Fenced)
		w.bool(state.ShuttingDown)
		w.varint(int64(state.ServedEpoch))
		w.string(registration.incarnation)
	}
	names := img.Topics()
	w.uvarint(uint64(len(names)))
	for _, name := range names {
		topic := img.topics[name]
		w.record(CreateTopic{Name: name, Config: topic.config, Partitions: topic.partitions})
	}
	return w.b
}

// DecodeImage reads a snapshot of an image and checks every invariant of
// Image on it: a snapshot is trusted no more than a record.
func DecodeImage(b []byte) (*Image, error) {
	r := decoder{b: b}
	if version := r.byte(); version != codecVersion {
		return nil, r.fail(fmt.Errorf("version %d", version))
	}
	img := &Image{nextOffset: r.varint(), brokers: map[BrokerID]brokerRegistration{}, topics: map[string]*topicImage{}}
	count := r.length(1)
	for i := 0; i < count && r.err == nil; i++ {
		id, epoch := r.brokerEpoch()
		state := BrokerState{ID: id, Epoch: epoch, Fenced: r.bool(), ShuttingDown: r.bool(), ServedEpoch: BrokerEpoch(r.varint())}
		registration := brokerRegistration{state: state, incarnation: r.string()}
		if _, taken := img.brokers[id]; taken || id < 0 {
			r.fail(fmt.Errorf("broker %d twice or negative", id))
		}
		img.brokers[id] = registration
	}
	count = r.length(1)
	for i := 0; i < count && r.err == nil; i++ {
		topic, ok := r.record().(CreateTopic)
		if !ok {
			r.fail(errors.New("a topic that is not one"))
			break
		}
		if _, taken := img.topics[topic.Name]; taken {
			r.fail(fmt.Errorf("topic %q twice", topic.Name))
		}
		img.topics[topic.Name] = &topicImage{config: topic.Config, partitions: topic.Partitions}
	}
	if err := r.finish(); err != nil {
		return nil, err
	}
	if err := img.validate(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrCorrupt, err)
	}
	return img, nil
}

// validate checks every invariant of Image over the whole image.
func (img *Image) validate() error {
	if img.nextOffset < 0 {
		return fmt.Errorf("next offset %d", img.nextOffset)
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
		for i, p := range topic.partitions {
			if p.Topic != name || p.Partition != int32(i) {
				return fmt.Errorf("topic %q holds partition %s at %d", name, p.TopicPartition, i)
			}
			if err := img.validatePartition(p, topic.config); err != nil {
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
