package wire

import (
	"bytes"
	"maps"
	"slices"
	"sort"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/logconfig"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// fakeBackend is an in-memory Backend: one log per partition, led by this
// broker, with a high watermark that follows the log end at once. It
// answers synchronously unless told to hold answers, and parks fetches that
// find no data until a produce or an expiry, like a broker's long poll.
type fakeBackend struct {
	// autoCreated are the topics AutoCreateTopic was asked for.
	autoCreated []controller.CreateTopicRequest
	cluster     Cluster
	topics      map[string]*fakeTopic
	producerID  ProducerID
	// holdProduce keeps produce answers in held until releaseProduce.
	holdProduce bool
	held        []func()
	// parkFetches keeps empty fetches with MinBytes > 0 until data arrives
	// or tick has run MaxWaitTicks times.
	parkFetches bool
	parked      []*parkedFetch
	now         int64
	// offsetNotAvailable makes ListOffsets(latest) answer
	// OFFSET_NOT_AVAILABLE, as a new leader does (KIP-207).
	offsetNotAvailable bool
	// diverging makes fetches with a LastFetchedEpoch above the given
	// epoch answer with that epoch and end offset.
	diverging *replica.EpochEndOffset
	// produceAnswer, when set, answers every produce to a known partition
	// with its code, message and record errors, and appends nothing.
	produceAnswer *replica.ProduceAnswer
	// calls records the Backend calls, for tests of what reaches it.
	produces     []replica.ProduceRequest
	fetches      []FetchRequest
	createTopics []CreateTopicsRequest
	grows        []CreatePartitionsRequest
	alterConfigs []controller.AlterConfigsRequest
	reassigns    []controller.ReassignRequest
	// nextTopicID numbers the topics' ids.
	nextTopicID byte
	// groupPartitions is __consumer_offsets' partition count, 0 while it
	// does not exist; groupCodes the code each partition's coordinator
	// answers instead of serving (NOT_COORDINATOR and the like);
	// groupServe, when set, serves the group requests that reach a
	// coordinator, which groupRequests records with their partition.
	groupPartitions int32
	groupCodes      map[int32]int16
	groupServe      func(partition int32, request kmsg.Request) kmsg.Response
	groupRequests   []fakeGroupRequest
}

// fakeGroupRequest is a group request as it reached the fake's coordinator
// of partition.
type fakeGroupRequest struct {
	partition int32
	request   kmsg.Request
}

type fakeTopic struct {
	id         metadata.TopicID
	config     metadata.TopicConfig
	configs    map[string]string
	partitions []*fakePartition
}

type fakePartition struct {
	state   metadata.PartitionState
	batches [][]byte
	end     record.Offset
	// epochs is the leader-epoch cache: each epoch with its start offset,
	// both increasing.
	epochs []replica.EpochEndOffset
}

// becomeLeader starts a new leader epoch at the log end, as a new leader
// caches (epoch, log end offset) before any write (KAFKA-7415).
func (p *fakePartition) becomeLeader(epoch record.LeaderEpoch) {
	p.state.LeaderEpoch = epoch
	p.epochs = append(p.epochs, replica.EpochEndOffset{Epoch: epoch, EndOffset: p.end})
}

// endOffsetFor is the epoch cache lookup of KIP-279: the largest epoch at
// or below the one asked for and the start of the next one (the log end
// for the current epoch); an epoch below the whole cache ends where the
// cache starts.
func (p *fakePartition) endOffsetFor(epoch record.LeaderEpoch) (record.LeaderEpoch, record.Offset) {
	if epoch < p.epochs[0].Epoch {
		return epoch, p.epochs[0].EndOffset
	}
	for i := len(p.epochs) - 1; i >= 0; i-- {
		if p.epochs[i].Epoch <= epoch {
			if i == len(p.epochs)-1 {
				return p.epochs[i].Epoch, p.end
			}
			return p.epochs[i].Epoch, p.epochs[i+1].EndOffset
		}
	}
	return record.NoLeaderEpoch, -1
}

type parkedFetch struct {
	request  FetchRequest
	deadline int64
	done     func([]replica.FetchResponse)
}

func newFakeBackend() *fakeBackend {
	return &fakeBackend{
		cluster: Cluster{
			ClusterID: "tide-test", BrokerID: 1, ControllerID: 1,
			Brokers: []Broker{{ID: 1, Host: "127.0.0.1", Port: 9092, Rack: "a"}, {ID: 2, Host: "127.0.0.1", Port: 9093}},
			Config: BrokerConfig{DefaultPartitions: 1, DefaultReplicationFactor: 1, MinInsyncReplicas: 1,
				SegmentBytes: 1 << 30, RetentionBytes: -1, RetentionMs: 7 * 24 * 3600 * 1000, MessageMaxBytes: 1 << 20},
		},
		topics:     map[string]*fakeTopic{},
		producerID: 1000,
	}
}

// addTopic creates a topic whose partitions are led by broker 1 at the
// given leader epoch, with replicas 1 and 2 (2 listed as offline when
// replicas includes 3).
func (f *fakeBackend) addTopic(name string, partitions int, leaderEpoch record.LeaderEpoch, replicas ...metadata.BrokerID) {
	if len(replicas) == 0 {
		replicas = []metadata.BrokerID{1}
	}
	f.nextTopicID++
	topic := &fakeTopic{id: metadata.TopicID{0: 't', 15: f.nextTopicID},
		config: metadata.TopicConfig{ReplicationFactor: len(replicas), MinInsyncReplicas: 1}}
	for p := range partitions {
		state := metadata.PartitionState{
			TopicPartition: metadata.TopicPartition{Topic: name, Partition: int32(p)},
			Replicas:       slices.Clone(replicas), ISR: slices.Clone(replicas),
			Leader: replicas[0], LeaderEpoch: leaderEpoch,
		}
		p := &fakePartition{state: state}
		p.becomeLeader(leaderEpoch)
		topic.partitions = append(topic.partitions, p)
	}
	f.topics[name] = topic
}

func (f *fakeBackend) partition(tp metadata.TopicPartition) (*fakePartition, bool) {
	topic, ok := f.topics[tp.Topic]
	if !ok || tp.Partition < 0 || int(tp.Partition) >= len(topic.partitions) {
		return nil, false
	}
	return topic.partitions[tp.Partition], true
}

func (f *fakeBackend) Cluster() Cluster { return f.cluster }

func (f *fakeBackend) Topic(name string) (metadata.Topic, bool) {
	topic, ok := f.topics[name]
	if !ok {
		return metadata.Topic{}, false
	}
	result := metadata.Topic{Name: name, ID: topic.id, Config: topic.config, Configs: topic.configs}
	for _, p := range topic.partitions {
		result.Partitions = append(result.Partitions, p.state.Clone())
	}
	return result, true
}

func (f *fakeBackend) TopicByID(id metadata.TopicID) (metadata.Topic, bool) {
	for name, topic := range f.topics {
		if topic.id == id && !id.IsZero() {
			return f.Topic(name)
		}
	}
	return metadata.Topic{}, false
}

func (f *fakeBackend) TopicNames() []string {
	names := make([]string, 0, len(f.topics))
	for name := range f.topics {
		names = append(names, name)
	}
	sort.Strings(names)
	return names
}

// checkEpoch is the KIP-320 rule: FENCED for an older epoch, UNKNOWN for
// a newer one.
func checkEpoch(current, requested record.LeaderEpoch) int16 {
	switch {
	case requested == record.NoLeaderEpoch || requested == current:
		return 0
	case requested < current:
		return kerr.FencedLeaderEpoch.Code
	default:
		return kerr.UnknownLeaderEpoch.Code
	}
}

func (f *fakeBackend) Produce(tp metadata.TopicPartition, request replica.ProduceRequest, done func(replica.ProduceAnswer)) {
	f.produces = append(f.produces, request)
	answer := f.append(tp, request)
	if f.holdProduce {
		f.held = append(f.held, func() { done(answer) })
		return
	}
	done(answer)
}

func (f *fakeBackend) append(tp metadata.TopicPartition, request replica.ProduceRequest) replica.ProduceAnswer {
	answer := replica.ProduceAnswer{ID: request.ID, BaseOffset: -1, LogStartOffset: -1}
	p, ok := f.partition(tp)
	if !ok {
		answer.ErrorCode = kerr.UnknownTopicOrPartition.Code
		return answer
	}
	if f.produceAnswer != nil {
		answer = *f.produceAnswer
		answer.ID = request.ID
		return answer
	}
	headers, err := record.ValidateAll(request.Batches, record.DefaultLimits())
	if err != nil || len(headers) == 0 {
		answer.ErrorCode = kerr.CorruptMessage.Code
		return answer
	}
	answer.BaseOffset, answer.LogStartOffset = p.end, 0
	position := 0
	for _, header := range headers {
		batch := request.Batches[position : position+header.Size()]
		position += header.Size()
		record.SetBaseOffset(batch, p.end)
		record.SetPartitionLeaderEpoch(batch, p.state.LeaderEpoch)
		p.batches = append(p.batches, batch)
		p.end += record.Offset(header.LastOffsetDelta) + 1
	}
	f.wakeFetches()
	return answer
}

// releaseProduce gives the held produce answers, in order.
func (f *fakeBackend) releaseProduce() {
	held := f.held
	f.held = nil
	for _, give := range held {
		give()
	}
}

func (f *fakeBackend) Fetch(request FetchRequest, done func([]replica.FetchResponse)) {
	f.fetches = append(f.fetches, request)
	responses, bytes := f.read(request)
	if f.parkFetches && bytes == 0 && request.MinBytes > 0 && request.MaxWaitTicks > 0 && !anyError(responses) {
		f.parked = append(f.parked, &parkedFetch{request: request, deadline: f.now + request.MaxWaitTicks, done: done})
		return
	}
	done(responses)
}

func anyError(responses []replica.FetchResponse) bool {
	return slices.ContainsFunc(responses, func(r replica.FetchResponse) bool { return r.ErrorCode != 0 })
}

func (f *fakeBackend) read(request FetchRequest) ([]replica.FetchResponse, int) {
	responses := make([]replica.FetchResponse, len(request.Partitions))
	total := 0
	for i, part := range request.Partitions {
		responses[i] = f.readPartition(part)
		total += len(responses[i].Records)
	}
	return responses, total
}

func (f *fakeBackend) readPartition(part FetchPartition) replica.FetchResponse {
	response := replica.FetchResponse{ID: part.ID, HighWatermark: -1, LogStartOffset: -1, LogEndOffset: -1}
	p, ok := f.partition(part.TopicPartition)
	if !ok {
		response.ErrorCode = kerr.UnknownTopicOrPartition.Code
		return response
	}
	response.HighWatermark, response.LogStartOffset, response.LogEndOffset = p.end, 0, p.end
	response.LeaderEpoch = p.state.LeaderEpoch
	if code := checkEpoch(p.state.LeaderEpoch, part.CurrentLeaderEpoch); code != 0 {
		response.ErrorCode = code
		return response
	}
	if f.diverging != nil && part.LastFetchedEpoch > f.diverging.Epoch {
		diverging := *f.diverging
		response.DivergingEpoch = &diverging
		return response
	}
	if part.FetchOffset < 0 || part.FetchOffset > p.end {
		response.ErrorCode = kerr.OffsetOutOfRange.Code
		return response
	}
	var chosen [][]byte
	size := 0
	for _, batch := range p.batches {
		header, _ := record.ParseHeader(batch)
		if header.NextOffset() > part.FetchOffset && (size == 0 || int64(size+len(batch)) <= part.MaxBytes) {
			chosen = append(chosen, batch)
			size += len(batch)
		}
	}
	if size > 0 {
		response.Records = bytes.Join(chosen, nil) // one copy, as a read from the log makes
	}
	return response
}

// wakeFetches answers the parked fetches that now find data or an error.
func (f *fakeBackend) wakeFetches() {
	kept := f.parked[:0]
	for _, parked := range f.parked {
		responses, bytes := f.read(parked.request)
		if bytes > 0 || anyError(responses) {
			parked.done(responses)
			continue
		}
		kept = append(kept, parked)
	}
	f.parked = kept
}

// expireFetches answers every parked fetch, as if its wait had ended.
func (f *fakeBackend) expireFetches() {
	parked := f.parked
	f.parked = nil
	for _, p := range parked {
		responses, _ := f.read(p.request)
		p.done(responses)
	}
}

// tick advances the fake's clock and answers the fetches whose wait ended.
func (f *fakeBackend) tick() {
	f.now++
	kept := f.parked[:0]
	for _, parked := range f.parked {
		if f.now >= parked.deadline {
			responses, _ := f.read(parked.request)
			parked.done(responses)
			continue
		}
		kept = append(kept, parked)
	}
	f.parked = kept
}

func (f *fakeBackend) ListOffsets(tp metadata.TopicPartition, request replica.ListOffsetsRequest, done func(replica.ListOffsetsAnswer)) {
	answer := replica.ListOffsetsAnswer{ID: request.ID, Offset: -1, LeaderEpoch: record.NoLeaderEpoch, TimestampMs: -1}
	p, ok := f.partition(tp)
	switch {
	case !ok:
		answer.ErrorCode = kerr.UnknownTopicOrPartition.Code
	case checkEpoch(p.state.LeaderEpoch, request.CurrentLeaderEpoch) != 0:
		answer.ErrorCode = checkEpoch(p.state.LeaderEpoch, request.CurrentLeaderEpoch)
	case request.Timestamp == replica.EarliestTimestamp:
		answer.Offset, answer.LeaderEpoch = 0, p.state.LeaderEpoch
	case request.Timestamp == replica.LatestTimestamp && f.offsetNotAvailable:
		answer.ErrorCode = kerr.OffsetNotAvailable.Code
	case request.Timestamp == replica.LatestTimestamp:
		answer.Offset, answer.LeaderEpoch = p.end, p.state.LeaderEpoch
	default:
		answer.ErrorCode = kerr.InvalidRequest.Code
	}
	done(answer)
}

func (f *fakeBackend) DeleteRecords(tp metadata.TopicPartition, request replica.DeleteRecordsRequest, done func(replica.DeleteRecordsAnswer)) {
	answer := replica.DeleteRecordsAnswer{ID: request.ID, LowWatermark: -1}
	p, ok := f.partition(tp)
	offset := request.Offset
	if ok && offset == replica.DeleteRecordsHighWatermark {
		offset = p.end
	}
	switch {
	case !ok:
		answer.ErrorCode = kerr.UnknownTopicOrPartition.Code
	case offset < 0 || offset > p.end:
		answer.ErrorCode = kerr.OffsetOutOfRange.Code
	default:
		answer.LowWatermark = offset
	}
	done(answer)
}

func (f *fakeBackend) OffsetsForLeaderEpoch(tp metadata.TopicPartition, request replica.OffsetsForLeaderEpochRequest,
	done func(replica.OffsetsForLeaderEpochAnswer)) {
	answer := replica.OffsetsForLeaderEpochAnswer{ID: request.ID, LeaderEpoch: record.NoLeaderEpoch, EndOffset: -1}
	p, ok := f.partition(tp)
	switch {
	case !ok:
		answer.ErrorCode = kerr.UnknownTopicOrPartition.Code
	case checkEpoch(p.state.LeaderEpoch, request.CurrentLeaderEpoch) != 0:
		answer.ErrorCode = checkEpoch(p.state.LeaderEpoch, request.CurrentLeaderEpoch)
	case request.LeaderEpoch <= p.state.LeaderEpoch:
		answer.LeaderEpoch, answer.EndOffset = p.endOffsetFor(request.LeaderEpoch)
	}
	done(answer)
}

func (f *fakeBackend) InitProducerID(request InitProducerIDRequest, done func(InitProducerIDAnswer)) {
	if request.ProducerID != NoProducerID {
		done(InitProducerIDAnswer{ProducerID: request.ProducerID, ProducerEpoch: request.ProducerEpoch + 1})
		return
	}
	f.producerID++
	done(InitProducerIDAnswer{ProducerID: f.producerID, ProducerEpoch: 0})
}

func (f *fakeBackend) CreateTopics(request CreateTopicsRequest, done func([]int16)) {
	f.createTopics = append(f.createTopics, request)
	codes := make([]int16, len(request.Topics))
	for i, topic := range request.Topics {
		switch {
		case f.topics[topic.Name] != nil:
			codes[i] = kerr.TopicAlreadyExists.Code
		case topic.Partitions < 1 || topic.Partitions > 100 || len(f.topics) > 100: // the fuzzer's creations stay small
			codes[i] = kerr.InvalidPartitions.Code
		case topic.ReplicationFactor < 1 || topic.ReplicationFactor > len(f.cluster.Brokers):
			codes[i] = kerr.InvalidReplicationFactor.Code
		case !request.ValidateOnly:
			replicas := []metadata.BrokerID{1, 2}[:topic.ReplicationFactor]
			f.addTopic(topic.Name, topic.Partitions, 0, replicas...)
			f.topics[topic.Name].config = topic.Config
		}
	}
	done(codes)
}

// LogDir describes every partition of the fake, each its records' bytes,
// led here (no lag), on a 1 MiB volume.
func (f *fakeBackend) LogDir() LogDir {
	dir := LogDir{Path: "/fake/data", TotalBytes: 1 << 20, UsableBytes: 1 << 19}
	for _, name := range f.TopicNames() {
		for _, p := range f.topics[name].partitions {
			size := 0
			for _, batch := range p.batches {
				size += len(batch)
			}
			dir.Partitions = append(dir.Partitions, LogDirPartition{TopicPartition: p.state.TopicPartition, SizeBytes: int64(size)})
		}
	}
	return dir
}

func (f *fakeBackend) CreatePartitions(request CreatePartitionsRequest, done func([]int16)) {
	f.grows = append(f.grows, request)
	codes := make([]int16, len(request.Topics))
	for i, grow := range request.Topics {
		topic := f.topics[grow.Topic]
		switch {
		case topic == nil:
			codes[i] = kerr.UnknownTopicOrPartition.Code
		case grow.Count <= len(topic.partitions) || grow.Count > 100:
			codes[i] = kerr.InvalidPartitions.Code
		case grow.Assignments != nil && len(grow.Assignments) != grow.Count-len(topic.partitions):
			codes[i] = kerr.InvalidReplicaAssignment.Code
		case !request.ValidateOnly:
			for p := len(topic.partitions); p < grow.Count; p++ {
				state := topic.partitions[0].state.Clone()
				state.Partition = int32(p)
				partition := &fakePartition{state: state}
				partition.becomeLeader(state.LeaderEpoch)
				topic.partitions = append(topic.partitions, partition)
			}
		}
	}
	done(codes)
}

// AutoCreateTopic records the creation; the topic exists from the next
// request on, as a front end's would once its metadata shows it.
func (f *fakeBackend) AutoCreateTopic(topic controller.CreateTopicRequest) {
	f.autoCreated = append(f.autoCreated, topic)
}

func (f *fakeBackend) DeleteTopics(topics []TopicRef, timeoutTicks int64, done func([]int16)) {
	codes := make([]int16, len(topics))
	for i, ref := range topics {
		name := ref.Name
		if !ref.ID.IsZero() {
			topic, ok := f.TopicByID(ref.ID)
			if !ok {
				codes[i] = kerr.UnknownTopicID.Code
				continue
			}
			name = topic.Name
		}
		if f.topics[name] == nil {
			codes[i] = kerr.UnknownTopicOrPartition.Code
			continue
		}
		delete(f.topics, name)
	}
	done(codes)
}

// Reassign records the moves and starts each on a known partition as the
// controller would, the target first and the replicas it leaves after.
func (f *fakeBackend) Reassign(moves []controller.ReassignRequest, _ int64, done func([]int16)) {
	codes := make([]int16, len(moves))
	for i, move := range moves {
		f.reassigns = append(f.reassigns, move)
		p, ok := f.partition(move.TopicPartition)
		switch {
		case !ok:
			codes[i] = kerr.UnknownTopicOrPartition.Code
		case move.Replicas == nil && !p.state.Reassigning():
			codes[i] = kerr.NoReassignmentInProgress.Code
		case move.Replicas == nil:
			p.state.Replicas = slices.DeleteFunc(p.state.Replicas, func(id metadata.BrokerID) bool { return slices.Contains(p.state.Adding, id) })
			p.state.Adding, p.state.Removing = nil, nil
		default:
			p.state.Adding, p.state.Removing = nil, nil
			for _, id := range move.Replicas {
				if !p.state.IsReplica(id) {
					p.state.Adding = append(p.state.Adding, id)
				}
			}
			for _, id := range p.state.Replicas {
				if !slices.Contains(move.Replicas, id) {
					p.state.Removing = append(p.state.Removing, id)
				}
			}
			p.state.Replicas = append(slices.Clone(move.Replicas), p.state.Removing...)
		}
	}
	done(codes)
}

func (f *fakeBackend) ElectLeaders(partitions []metadata.TopicPartition, timeoutTicks int64, done func(controller.ElectLeadersResponse)) {
	var response controller.ElectLeadersResponse
	for _, tp := range partitions {
		result := controller.ElectionResult{TopicPartition: tp}
		p, ok := f.partition(tp)
		switch {
		case !ok:
			result.ErrorCode = kerr.UnknownTopicOrPartition.Code
		case p.state.Leader == p.state.Replicas[0]:
			result.ErrorCode = kerr.ElectionNotNeeded.Code
		default:
			p.state.Leader = p.state.Replicas[0]
			p.becomeLeader(p.state.LeaderEpoch + 1)
		}
		response.Results = append(response.Results, result)
	}
	done(response)
}

// recordingBackend records the requests that reach a fakeBackend method.
type recordingBackend struct {
	*fakeBackend
	offsetsForLeaderEpoch *[]replica.OffsetsForLeaderEpochRequest
}

func (r *recordingBackend) OffsetsForLeaderEpoch(tp metadata.TopicPartition, request replica.OffsetsForLeaderEpochRequest,
	done func(replica.OffsetsForLeaderEpochAnswer)) {
	*r.offsetsForLeaderEpoch = append(*r.offsetsForLeaderEpoch, request)
	r.fakeBackend.OffsetsForLeaderEpoch(tp, request, done)
}

// AlterConfigs applies SET and DELETE to a topic's configs, validated by
// logconfig, as the controller's decision would for these cases.
func (f *fakeBackend) AlterConfigs(request controller.AlterConfigsRequest, validateOnly bool, done func(int16, string)) {
	f.alterConfigs = append(f.alterConfigs, request)
	topic := f.topics[request.Resource.Name]
	switch {
	case request.Resource.Type != metadata.ConfigTopic:
		done(kerr.InvalidRequest.Code, "the fake alters topics only")
		return
	case topic == nil:
		done(kerr.UnknownTopicOrPartition.Code, "unknown topic "+request.Resource.Name)
		return
	}
	next := map[string]string{}
	if request.Incremental {
		next = maps.Clone(topic.configs)
	}
	for _, change := range request.Changes {
		if change.Op == controller.ConfigDelete {
			delete(next, change.Key)
		} else if next[change.Key] = change.Value; next == nil {
			next = map[string]string{change.Key: change.Value}
		}
	}
	if err := logconfig.ValidateTopicConfigs(next, topic.config.ReplicationFactor); err != nil {
		done(kerr.InvalidConfig.Code, err.Error())
		return
	}
	if !validateOnly {
		topic.configs = next
	}
	done(0, "")
}

// GroupCoordinator is broker 1 (this broker), or COORDINATOR_NOT_AVAILABLE
// while there is no __consumer_offsets.
func (b *fakeBackend) GroupCoordinator(groupID string) (metadata.BrokerID, int16) {
	if b.groupPartitions == 0 {
		return metadata.NoBroker, kerr.CoordinatorNotAvailable.Code
	}
	return b.cluster.BrokerID, 0
}

// GroupPartition is the group id's length modulo the partition count: a
// placement tests can choose.
func (b *fakeBackend) GroupPartition(groupID string) int32 {
	if b.groupPartitions == 0 {
		return NoGroupPartition
	}
	return int32(len(groupID)) % b.groupPartitions
}

func (b *fakeBackend) Group(groupID string, _ GroupClient, request kmsg.Request, done func(kmsg.Response, int16)) {
	partition := b.GroupPartition(groupID)
	if code := b.groupCodes[partition]; code != 0 || partition == NoGroupPartition || b.groupServe == nil {
		done(nil, orNotCoordinator(code))
		return
	}
	b.groupRequests = append(b.groupRequests, fakeGroupRequest{partition: partition, request: request})
	done(b.groupServe(partition, request), 0)
}

func (b *fakeBackend) ListGroups(request *kmsg.ListGroupsRequest, done func([]*kmsg.ListGroupsResponse)) {
	var answers []*kmsg.ListGroupsResponse
	for partition := range b.groupPartitions {
		if code := b.groupCodes[partition]; code != 0 || b.groupServe == nil {
			answer := request.ResponseKind().(*kmsg.ListGroupsResponse)
			answer.ErrorCode = orNotCoordinator(code)
			answers = append(answers, answer)
			continue
		}
		answers = append(answers, b.groupServe(partition, request).(*kmsg.ListGroupsResponse))
	}
	done(answers)
}

// orNotCoordinator is code, or NOT_COORDINATOR for none.
func orNotCoordinator(code int16) int16 {
	if code == 0 {
		return kerr.NotCoordinator.Code
	}
	return code
}
