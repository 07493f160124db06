package frontend

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/broker"
	"github.com/tidelog/tide/internal/commitlog"
	"github.com/tidelog/tide/internal/group"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
	"github.com/tidelog/tide/internal/rules"
	"github.com/tidelog/tide/internal/wire"
)

// The consumer groups' host: for every __consumer_offsets partition this
// broker leads, one group.Coordinator, which decides everything about the
// groups that hash to it; the host feeds it the partition's committed
// records, hands it requests, writes its appends through the partition's
// leader replica and tells it when they are committed.
//
// A coordinator's life follows the partition's leadership: created when
// this broker leads the partition in a new leader epoch, it loads the
// partition's records once the high watermark has reached the log end
// (every record of earlier epochs is then committed; rule
// load-committed-only: a record above the high watermark may yet be
// truncated by the next leader, and a coordinator that replayed it would
// answer from state the log then loses), in slices of at most
// GroupLoadBytesPerTick a tick, and serves after the last one. Until then
// it answers COORDINATOR_LOAD_IN_PROGRESS itself. When the broker no
// longer leads the partition (or leads it in a newer epoch) the
// coordinator is unloaded: its waiting requests are answered
// NOT_COORDINATOR, as are requests for any partition without a hosted
// coordinator, and clients look the coordinator up again.

// Defaults and limits of the group host.
const (
	// DefaultOffsetsTopicPartitions is offsets.topic.num.partitions.
	DefaultOffsetsTopicPartitions = 50
	// DefaultOffsetsTopicReplicationFactor is offsets.topic.replication.factor,
	// lowered to the brokers registered when there are fewer.
	DefaultOffsetsTopicReplicationFactor = 3
	// GroupLoadBytesPerTick bounds the __consumer_offsets bytes one tick
	// reads and replays for loading coordinators, over all of them, so that
	// loading a large partition does not hold up the broker's loop.
	GroupLoadBytesPerTick = 1 << 20
	// offsetsCommitTimeoutMs is offsets.commit.timeout.ms: how long a
	// coordinator's append may wait for the high watermark before it fails
	// (REQUEST_TIMED_OUT, which the coordinator answers as
	// COORDINATOR_NOT_AVAILABLE).
	offsetsCommitTimeoutMs = 5000
)

// groupHost is the front end's share of the consumer groups.
type groupHost struct {
	// coordinators are the hosted coordinators, by partition.
	coordinators map[int32]*hostedCoordinator
	// waiting are the requests handed to a coordinator and not yet
	// answered, by request id.
	waiting     map[group.RequestID]func(kmsg.Response, int16)
	nextRequest group.RequestID
	// creating is set while this broker has asked the controller for
	// __consumer_offsets and has no answer yet.
	creating bool
	// followedNode and followedOffset are the node and metadata offset
	// the coordinators were last matched against (followOffsetsLeadership),
	// and partitionCount __consumer_offsets' partitions then: leadership
	// changes only with the metadata, so a tick with neither changed need
	// not look again (every sweepEveryTicks it looks all the same, for a
	// replica that took its role late).
	followedNode   *broker.Node
	followedOffset int64
	partitionCount int
	// topics are the image's topics at followedOffset, as the
	// coordinators' KIP-848 assignors see them (groupTopics): every
	// coordinator is given them before it finishes loading and again at
	// every metadata change, so a topic created, deleted or grown reaches
	// the target assignments at the groups' next heartbeats.
	topics map[string]group.TopicInfo
	// loadSkipped counts records a coordinator could not load (not in a
	// format it reads); they are skipped, as Kafka skips unknown records.
	loadSkipped int64
}

// hostedCoordinator is one coordinator and the partition state it was
// created for.
type hostedCoordinator struct {
	partition   int32
	leaderEpoch record.LeaderEpoch
	coordinator *group.Coordinator
	// loading is set until FinishLoad; loadEnd is the offset loading reads
	// up to, -1 until the high watermark has reached the log end; loadNext
	// is the next offset to read.
	loading  bool
	loadEnd  record.Offset
	loadNext record.Offset
	// appends counts the appends handed to the replica and not yet
	// answered.
	appends int
	// refused is set once an append of this coordinator was refused
	// (answered with an error, or found without write room before it went
	// out); while it is, later appends are not sent but reported as never
	// written (rule ordered-coordinator-appends). It is cleared once no
	// append is in flight when the coordinator hands out more: by then
	// every earlier append has been reported, and what it hands out was
	// built knowing their fate.
	refused bool
}

func newGroupHost() groupHost {
	return groupHost{coordinators: map[int32]*hostedCoordinator{}, waiting: map[group.RequestID]func(kmsg.Response, int16){}}
}

// groupConfig is the coordinators' configuration, Kafka's defaults unless
// the runtime gave one.
func (fe *FrontEnd) groupConfig() group.Config {
	if fe.config.Groups != nil {
		return *fe.config.Groups
	}
	return group.DefaultConfig()
}

// nowMs is the runtime's clock for the coordinators, 0 before it gave one.
func (fe *FrontEnd) nowMs() int64 { return max(fe.clockMs, 0) }

// tickGroups follows the offsets partitions' leadership, loads, ticks the
// coordinators and carries out what they have.
func (fe *FrontEnd) tickGroups() {
	node := fe.Node()
	if node == nil {
		return
	}
	changed := node != fe.groups.followedNode || node.MetadataOffset() != fe.groups.followedOffset
	if changed {
		fe.groups.topics = groupTopics(node.Image())
		for _, hosted := range fe.hostedCoordinators() {
			hosted.coordinator.SetTopics(fe.groups.topics)
		}
	}
	if changed || fe.now%sweepEveryTicks == 0 {
		fe.followOffsetsLeadership(node)
		fe.groups.followedNode, fe.groups.followedOffset = node, node.MetadataOffset()
	}
	budget := int64(GroupLoadBytesPerTick)
	for _, hosted := range fe.hostedCoordinators() {
		if hosted.loading {
			budget -= fe.load(node, hosted, budget)
			continue
		}
		hosted.coordinator.Tick(fe.nowMs())
		fe.carryOut(hosted)
	}
}

// hostedCoordinators lists the coordinators in partition order.
func (fe *FrontEnd) hostedCoordinators() []*hostedCoordinator {
	hosted := make([]*hostedCoordinator, 0, len(fe.groups.coordinators))
	for partition := range int32(fe.groups.partitionCount) {
		if c, ok := fe.groups.coordinators[partition]; ok {
			hosted = append(hosted, c)
		}
	}
	if len(hosted) < len(fe.groups.coordinators) { // partitions gone from the image
		hosted = hosted[:0]
		for _, partition := range sortedPartitionKeys(fe.groups.coordinators) {
			hosted = append(hosted, fe.groups.coordinators[partition])
		}
	}
	return hosted
}

// offsetsPartitionCount is __consumer_offsets' partition count in this
// broker's image, 0 while it does not exist.
func (fe *FrontEnd) offsetsPartitionCount() int {
	if node := fe.Node(); node != nil {
		if topic, ok := node.Image().Topic(wire.OffsetsTopic); ok {
			return len(topic.Partitions)
		}
	}
	return 0
}

// followOffsetsLeadership creates a coordinator for every offsets partition
// this broker now leads in an epoch it has none for, and unloads the ones
// it no longer leads in theirs.
func (fe *FrontEnd) followOffsetsLeadership(node *broker.Node) {
	topic, _ := node.Image().Topic(wire.OffsetsTopic)
	fe.groups.partitionCount = len(topic.Partitions)
	leading := map[int32]record.LeaderEpoch{}
	for _, state := range topic.Partitions {
		r, _, ok := node.Replica(state.TopicPartition)
		if ok && state.Leader == fe.config.ID && r.Role() == replica.Leader {
			leading[state.Partition] = state.LeaderEpoch
		}
	}
	for _, partition := range sortedPartitionKeys(fe.groups.coordinators) {
		hosted := fe.groups.coordinators[partition]
		if epoch, ok := leading[partition]; !ok || epoch != hosted.leaderEpoch {
			fe.unload(hosted)
		}
	}
	for _, state := range topic.Partitions {
		epoch, ok := leading[state.Partition]
		if _, hosted := fe.groups.coordinators[state.Partition]; ok && !hosted {
			fe.groups.coordinators[state.Partition] = fe.newHostedCoordinator(state.Partition, epoch)
		}
	}
}

// newHostedCoordinator is a loading coordinator of partition for this
// broker's leadership in epoch.
func (fe *FrontEnd) newHostedCoordinator(partition int32, epoch record.LeaderEpoch) *hostedCoordinator {
	coordinator := group.NewCoordinator(fe.groupConfig(), partition)
	// Member ids mix in the leadership: two coordinators of the partition
	// that load the same log in the same millisecond must not issue the
	// same ids.
	coordinator.SetLeadership(uint64(fe.config.ID)<<32 | uint64(uint32(epoch)))
	coordinator.SetTopics(fe.groups.topics)
	return &hostedCoordinator{partition: partition, leaderEpoch: epoch, coordinator: coordinator, loading: true, loadEnd: -1}
}

// groupTopics is the image's topics as a group coordinator takes them
// (group.TopicInfo): id, partition count, and whether internal.
func groupTopics(image *metadata.Image) map[string]group.TopicInfo {
	names := image.Topics()
	topics := make(map[string]group.TopicInfo, len(names))
	for _, name := range names {
		topic, _ := image.Topic(name)
		topics[name] = group.TopicInfo{ID: topic.ID, Partitions: int32(len(topic.Partitions)), Internal: wire.InternalTopic(name)}
	}
	return topics
}

// unload ends a coordinator whose leadership is gone: what it holds is
// answered NOT_COORDINATOR, and its appends' answers, when they come, are
// dropped.
func (fe *FrontEnd) unload(hosted *hostedCoordinator) {
	delete(fe.groups.coordinators, hosted.partition)
	hosted.coordinator.Unload()
	fe.carryOut(hosted)
}

// load replays at most budget bytes of the partition's committed records
// into a loading coordinator and returns the bytes read; after the last
// record below the load's end it finishes the load.
func (fe *FrontEnd) load(node *broker.Node, hosted *hostedCoordinator, budget int64) int64 {
	r, log, ok := node.Replica(offsetsPartition(hosted.partition))
	if !ok {
		return 0
	}
	if hosted.loadEnd < 0 {
		if !fe.groupConfig().Rules.On(rules.LoadCommittedOnly) {
			// The legacy switch: load the whole log at once, records that
			// may yet be truncated included.
			hosted.loadEnd, hosted.loadNext = r.LogEndOffset(), r.LogStartOffset()
		} else if !fe.loadable(r) {
			return 0 // records of an earlier epoch may yet be truncated
		} else {
			hosted.loadEnd, hosted.loadNext = r.HighWatermark(), r.LogStartOffset()
		}
	}
	hosted.loadNext = max(hosted.loadNext, r.LogStartOffset())
	read := int64(0)
	if budget > 0 && hosted.loadNext < hosted.loadEnd {
		result, err := log.Read(hosted.loadNext, budget, hosted.loadEnd)
		if err != nil {
			return 0 // the log moved under the read (its start, a failure): again next tick
		}
		read = result.SizeBytes
		if err := fe.replay(hosted, result); err != nil {
			return read
		}
		hosted.loadNext = max(hosted.loadNext, result.NextOffset)
	}
	if hosted.loadNext >= hosted.loadEnd {
		hosted.loading = false
		hosted.coordinator.FinishLoad(fe.nowMs())
		fe.carryOut(hosted)
	}
	return read
}

// loadable reports whether a new leader's log may be loaded: every record
// in it is committed (rule load-committed-only), so its high watermark has
// reached its log end.
func (fe *FrontEnd) loadable(r *replica.Replica) bool {
	return r.HighWatermark() >= r.LogEndOffset()
}

// replay hands a read's records to the coordinator, in log order, skipping
// control batches and records below the load's position.
func (fe *FrontEnd) replay(hosted *hostedCoordinator, result commitlog.ReadResult) error {
	buffer, err := result.AppendTo(nil)
	if err != nil {
		return err
	}
	limits := record.Limits{MaxBatchBytes: len(buffer), MaxDecompressedBatchBytes: 64 << 20}
	batches := record.NewIterator(buffer, limits)
	for batches.Next() {
		header := batches.Header()
		if header.IsControl() {
			continue
		}
		_, records, err := record.DecodeRecords(batches.Batch(), limits.MaxBatchBytes, limits.MaxDecompressedBatchBytes)
		if err != nil {
			fe.groups.loadSkipped += int64(header.RecordCount)
			continue
		}
		for _, stored := range records {
			offset := header.BaseOffset + record.Offset(stored.OffsetDelta)
			if offset < hosted.loadNext || offset >= hosted.loadEnd {
				continue
			}
			if hosted.coordinator.Load(int64(offset), group.Record{Key: stored.Key, Value: stored.Value}) != nil {
				fe.groups.loadSkipped++
			}
		}
	}
	return batches.Err()
}

// offsetsPartition names a __consumer_offsets partition.
func offsetsPartition(partition int32) metadata.TopicPartition {
	return metadata.TopicPartition{Topic: wire.OffsetsTopic, Partition: partition}
}

// carryOut takes what a coordinator has: its appends go to the partition's
// leader replica as one acks=all batch each, its answers to their callers.
//
// An append reported refused here, without going out, may give the
// coordinator more to carry out (its answer, an unload's answers): it is
// taken until nothing is left.
func (fe *FrontEnd) carryOut(hosted *hostedCoordinator) {
	for {
		ready := hosted.coordinator.Ready()
		if len(ready.Appends) == 0 && len(ready.Answers) == 0 {
			break
		}
		if hosted.appends == 0 {
			hosted.refused = false
		}
		for _, write := range ready.Appends {
			fe.appendRecords(hosted, write)
		}
		for _, answer := range ready.Answers {
			done, ok := fe.groups.waiting[answer.Request]
			if !ok {
				continue
			}
			delete(fe.groups.waiting, answer.Request)
			done(answer.Response, 0)
		}
	}
	fe.replaceIfStopped(hosted)
}

// replaceIfStopped replaces a coordinator that stopped serving by itself
// (an append whose fate only the log can tell: Unloaded) with a new one
// for the same leadership, which loads the log once its high watermark has
// reached its end, so that the failed append's records are in its state
// exactly if they are committed. A coordinator this broker unloaded, or
// one already replaced, is left alone.
func (fe *FrontEnd) replaceIfStopped(hosted *hostedCoordinator) {
	if !hosted.coordinator.Unloaded() || fe.groups.coordinators[hosted.partition] != hosted {
		return
	}
	fe.groups.coordinators[hosted.partition] = fe.newHostedCoordinator(hosted.partition, hosted.leaderEpoch)
}

// appendRecords writes one Append as one batch with acks=all through the
// partition's leader replica, and reports it to the coordinator when the
// replica answers: committed (the high watermark passed it, rule
// answer-after-commit) or failed. A coordinator unloaded meanwhile is not
// told: it has answered everything NOT_COORDINATOR already.
func (fe *FrontEnd) appendRecords(hosted *hostedCoordinator, write group.Append) {
	if len(write.Records) == 0 {
		hosted.coordinator.AppendDone(write.ID, 0)
		return
	}
	now := fe.nowMs()
	request := replica.ProduceRequest{ID: uint64(write.ID), Batches: offsetsBatch(write.Records, now), Acks: replica.AcksAll,
		TimeoutTicks: fe.ticksFor(offsetsCommitTimeoutMs), AppendTimeMs: now}
	ordered := fe.groupConfig().Rules.On(rules.OrderedCoordinatorAppends)
	if ordered && !hosted.refused && !fe.hasWriteRoomForProduce(offsetsPartition(hosted.partition), request.Batches) {
		// The broker would refuse it before its replica decides, as it
		// refuses any producer's (REQUEST_TIMED_OUT, which the coordinator
		// could only take for an append of unknown fate): refuse it here,
		// now, not when the answer comes back after later appends went out.
		hosted.refused = true
	}
	if ordered && hosted.refused {
		// Never sent, so never written: NOT_ENOUGH_REPLICAS is the error
		// the coordinator takes for that (a classic group or offsets keep
		// serving, a consumer group's coordinator unloads all the same),
		// and its callers get COORDINATOR_NOT_AVAILABLE, as for a timeout.
		hosted.coordinator.AppendDone(write.ID, kerr.NotEnoughReplicas.Code)
		return
	}
	hosted.appends++
	(*backend)(fe).Produce(offsetsPartition(hosted.partition), request, func(answer replica.ProduceAnswer) {
		hosted.appends--
		hosted.refused = hosted.refused || answer.ErrorCode != 0
		if fe.groups.coordinators[hosted.partition] != hosted {
			return
		}
		hosted.coordinator.AppendDone(write.ID, answer.ErrorCode)
		fe.carryOut(hosted)
	})
}

// hasWriteRoomForProduce asks the node whether it would take a produce of
// batches to partition now, past its write-backlog check; without a node
// the produce is refused anyway.
func (fe *FrontEnd) hasWriteRoomForProduce(partition metadata.TopicPartition, batches []byte) bool {
	node := (*backend)(fe).node()
	return node == nil || node.HasWriteRoomForProduce(partition, batches)
}

// offsetsBatch is one uncompressed batch of a coordinator's records,
// stamped nowMs, as a producer without idempotence writes it.
func offsetsBatch(records []group.Record, nowMs int64) []byte {
	built := make([]record.Record, len(records))
	for i, r := range records {
		built[i] = record.Record{Key: r.Key, Value: r.Value}
	}
	return record.Build(record.BuildOptions{LeaderEpoch: record.NoLeaderEpoch, BaseTimestampMs: nowMs, Records: built})
}

// ticksFor converts milliseconds to ticks of the wire's clock, rounding up.
func (fe *FrontEnd) ticksFor(milliseconds int64) int64 {
	tickMs := fe.config.Wire.Tick.Milliseconds()
	if tickMs <= 0 {
		return milliseconds
	}
	return (milliseconds + tickMs - 1) / tickMs
}

// sortedPartitionKeys lists a map's partitions in order.
func sortedPartitionKeys[V any](values map[int32]V) []int32 {
	keys := make([]int32, 0, len(values))
	for key := range values {
		keys = append(keys, key)
	}
	slices.Sort(keys)
	return keys
}

// handleGroup hands one request to the coordinator of partition; done gets
// its answer, or NOT_COORDINATOR when this broker hosts none there.
func (fe *FrontEnd) handleGroup(partition int32, client wire.GroupClient, request kmsg.Request, done func(kmsg.Response, int16)) {
	hosted, ok := fe.groups.coordinators[partition]
	if !ok || !fe.mayServeCoordinator(hosted) {
		done(nil, kerr.NotCoordinator.Code)
		return
	}
	fe.groups.nextRequest++
	id := fe.groups.nextRequest
	fe.groups.waiting[id] = done
	hosted.coordinator.HandleFrom(fe.nowMs(), id, group.Client{ID: client.ID, Host: client.Host}, request)
	fe.carryOut(hosted)
}

// mayServeCoordinator reports whether the coordinator of hosted may answer
// a request now (rule coordinator-lease): its broker's image still names it
// leader of the partition in the coordinator's leader epoch (the image may
// have moved since the last tick followed it), and the controller cannot
// yet have fenced the broker (broker.Lifecycle HoldsSessionLease). Past the
// lease the controller may have moved the partition to a broker that has
// since acknowledged a newer commit, which this coordinator's state lacks.
func (fe *FrontEnd) mayServeCoordinator(hosted *hostedCoordinator) bool {
	if !fe.groupConfig().Rules.On(rules.CoordinatorLease) {
		return true
	}
	node := fe.Node()
	if node == nil || !fe.lifecycle.HoldsSessionLease() {
		return false
	}
	r, _, ok := node.Replica(offsetsPartition(hosted.partition))
	return ok && r.Role() == replica.Leader && r.LeaderEpoch() == hosted.leaderEpoch
}
