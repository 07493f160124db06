package group

import (
	"fmt"
	"math"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/rules"
)

// RequestID is the host's handle for one request; the coordinator hands it
// back with the request's answer.
type RequestID uint64

// AppendID names one Append until the host reports it with AppendDone.
type AppendID uint64

// Record is one __consumer_offsets record: key and value in Kafka's
// formats (records.go). A nil Value is a tombstone.
type Record struct{ Key, Value []byte }

// Append is records the host writes to the coordinator's partition as ONE
// batch, with acks=all, and reports with AppendDone once the high
// watermark has passed it (or the write failed).
type Append struct {
	ID      AppendID
	Records []Record
}

// Answer is the response to one request, at the request's version.
type Answer struct {
	Request  RequestID
	Response kmsg.Response
}

// Ready is what the coordinator has for the host: appends to write, in
// order, and answers to send. Answers to OffsetCommit and SyncGroup are
// only ever here after AppendDone reported their records committed (rule
// answer-after-commit).
type Ready struct {
	Appends []Append
	Answers []Answer
}

// Client is who sent a request, from its header and connection: kept with
// a member (DescribeGroups shows it) and used in new member ids, as Kafka
// does.
type Client struct {
	ID   string
	Host string
}

// phase is where a coordinator is in its life.
type phase int8

const (
	// loading: replaying committed records; requests get
	// COORDINATOR_LOAD_IN_PROGRESS.
	loading phase = iota
	// serving: FinishLoad was called.
	serving
	// unloaded: the partition's leadership is gone; requests get
	// NOT_COORDINATOR.
	unloaded
)

// pendingAppend is an Append handed out and not yet reported.
type pendingAppend struct {
	records []Record
	// decoded are the records as decoded from their bytes.
	decoded []decodedRecord
	// groups are the groups the records are of, once each.
	groups []string
	// offsets are the offset keys the records set or delete, by group.
	offsets map[string][]topicPartition
	// consumer is set when the records include consumer group records (or
	// tombstone a classic group a consumer group replaced): the live state
	// already moved past them, so any failure unloads the coordinator.
	consumer bool
	// appliedEarly is set when rule answer-after-commit is off: the records
	// were applied and their requests answered before the write was known
	// to be committed.
	appliedEarly bool
	// done runs when the append is reported, with 0 when it is committed
	// and otherwise the error to answer (mapped as Kafka maps append
	// errors).
	done func(errorCode int16)
}

// Coordinator is the classic group coordinator of one __consumer_offsets
// partition that this broker leads: the groups that hash to it
// (PartitionFor) and their committed offsets.
//
// It keeps two views. The durable view (durable) holds what the partition's
// committed records say: it is built only by applying records, on Load and
// when AppendDone reports a write committed, so a coordinator that loads
// the log reaches the same view (the replay property in the tests).
// OffsetFetch answers from it. The live view (groups) holds membership,
// rebalances and timers, which Kafka does not persist beyond the group
// metadata record.
//
// It does no I/O and reads no clock: time comes in as nowMs on every call.
type Coordinator struct {
	config    Config
	partition int32
	phase     phase
	nowMs     int64

	durable map[string]*durableGroup
	groups  map[string]*group
	// consumerGroups are the KIP-848 consumer groups (consumer_group.go);
	// a group id is in groups or here, never both.
	consumerGroups map[string]*consumerGroup
	// topics and topicNames are the metadata image's topics (SetTopics).
	topics     map[string]TopicInfo
	topicNames map[[16]byte]string
	// consumerWaits are consumer group answers held until earlier appends
	// of their group are reported.
	consumerWaits []consumerWait

	nextAppend AppendID
	pending    map[AppendID]*pendingAppend
	// pendingByGroup counts the appends in flight with records of each
	// group.
	pendingByGroup map[string]int
	// reports holds AppendDone reports that came before an earlier
	// append's; nextReport is the append to complete next.
	reports      map[AppendID]int16
	nextReport   AppendID
	ready        Ready
	parked       int
	stableWaits  []stableFetch
	loadedOffset int64

	// incarnation and memberCounter make member ids unique across
	// coordinators of the partition (see newMemberID).
	incarnation   uint64
	memberCounter uint64
	// leadership is what the host said of the partition's leadership
	// (SetLeadership), mixed into the incarnation.
	leadership uint64

	// stopping is set when an append is reported failed in a way that
	// unloads the coordinator once the appends before it are reported
	// (completeAppend): from then on it hands out no append (canWrite).
	// Its live state counts the failed records, and every later append is
	// a change computed on them; written after records that never reached
	// the log, it would leave a log no coordinator ever held, as a member's
	// fencing refused and its partitions' handover to another member
	// written (the simulator's partition-two-owners, seed 799).
	stopping bool

	nextExpiryCheckMs int64
	// nextDeadlineMs is at or before the earliest timer of any group
	// (sessions, pending member ids, join and sync phases): Tick looks at
	// the groups only once it has passed.
	nextDeadlineMs int64
}

// durableGroup is one group as the committed records describe it.
type durableGroup struct {
	metadata *groupMetadata
	offsets  map[topicPartition]committedOffset
	// consumer holds a KIP-848 consumer group's records, the latest value
	// of each key.
	consumer map[consumerKey][]byte
}

// NewCoordinator returns a coordinator for partition, loading: feed it the
// committed records with Load, then call FinishLoad. It panics on a
// configuration Validate rejects, a programming error of its host.
func NewCoordinator(config Config, partition int32) *Coordinator {
	if err := config.Validate(); err != nil {
		panic(err)
	}
	return &Coordinator{config: config, partition: partition, durable: map[string]*durableGroup{}, groups: map[string]*group{},
		consumerGroups: map[string]*consumerGroup{}, topics: map[string]TopicInfo{}, topicNames: map[[16]byte]string{},
		pending: map[AppendID]*pendingAppend{}, pendingByGroup: map[string]int{}, reports: map[AppendID]int16{}, nextReport: 1, loadedOffset: -1}
}

// Load applies one committed record, read from the partition in log order.
// The host passes only records below the high watermark (rule
// load-committed-only): a record above it may still be truncated, and a
// coordinator that served it would answer from state the log then loses.
// A record it cannot decode is an error; the host decides whether to skip
// it (Kafka logs and skips unknown types, which decode as skipped here).
func (c *Coordinator) Load(offset int64, record Record) error {
	if c.phase != loading {
		return fmt.Errorf("group: Load at offset %d after FinishLoad", offset)
	}
	if offset <= c.loadedOffset {
		return fmt.Errorf("group: Load at offset %d after offset %d", offset, c.loadedOffset)
	}
	c.loadedOffset = offset
	decoded, err := decodeRecord(record)
	if err != nil {
		return err
	}
	c.apply(decoded)
	return nil
}

// SetLeadership tells the coordinator which leadership of its partition it
// serves (for example the broker id and the leader epoch), before
// FinishLoad. It only feeds the member ids it hands out: without it, two
// coordinators of the partition that began serving in the same millisecond
// after loading the same log would issue the same ids.
func (c *Coordinator) SetLeadership(value uint64) { c.leadership = value }

// FinishLoad ends the replay: each loaded group becomes live (Stable with
// its members, or Empty), every member's session starts now, and the
// coordinator serves.
func (c *Coordinator) FinishLoad(nowMs int64) {
	if c.phase != loading {
		return
	}
	c.phase = serving
	c.nowMs = nowMs
	c.incarnation = mix([]byte(fmt.Sprintf("%d/%d/%d", nowMs, c.loadedOffset, c.leadership)))
	c.nextExpiryCheckMs = nowMs + c.config.OffsetsRetentionCheckIntervalMs
	c.nextDeadlineMs = nowMs // the loaded members' sessions
	for _, id := range sortedKeys(c.durable) {
		if records := c.durable[id].consumer; len(records) > 0 {
			group := c.consumerGroupFromDurable(id, records, nowMs)
			c.consumerGroups[id] = group
			c.at(group.earliestDeadlineMs())
			continue
		}
		group := groupFromDurable(id, c.durable[id], c.config, nowMs)
		c.groups[id] = group
		c.at(group.earliestDeadlineMs()) // a stored timeout may be negative: its deadline is already past
		if len(group.members) > int(c.config.MaxSize) || (len(group.members) > 0 && group.protocol == "") {
			// group.max.size was lowered (members beyond it are refused
			// as they rejoin), or the record names no protocol for its
			// members: the group rebalances.
			c.prepareRebalance(group)
		}
	}
}

// Unload ends the coordinator when the broker loses the partition's
// leadership: every parked request and every request waiting on an append
// is answered NOT_COORDINATOR, and later requests get the same, so clients
// look the coordinator up again.
func (c *Coordinator) Unload() {
	if c.phase == unloaded {
		return
	}
	c.phase = unloaded
	for _, id := range sortedAppendIDs(c.pending) {
		write := c.pending[id]
		c.forget(id, write)
		if !write.appliedEarly {
			write.done(int16(kerr.NotCoordinator.Code))
		}
	}
	for _, id := range sortedKeys(c.groups) {
		c.groups[id].answerParked(c, int16(kerr.NotCoordinator.Code))
	}
	for _, wait := range c.stableWaits {
		c.answer(wait.request, errorResponse(wait.fetch, int16(kerr.NotCoordinator.Code)))
	}
	c.stableWaits = nil
	c.parked = 0
	for _, wait := range c.consumerWaits {
		wait.done(int16(kerr.NotCoordinator.Code))
	}
	c.consumerWaits = nil
}

// Ready drains what the coordinator has for the host.
func (c *Coordinator) Ready() Ready {
	ready := c.ready
	c.ready = Ready{}
	return ready
}

// AppendDone reports an Append: errorCode 0 once the high watermark has
// passed all of its records; otherwise the produce error. Reports may come
// in any order; the coordinator takes them in the order it handed the
// appends out, as the high watermark passes them.
//
// An error must be final. One that says the records were never written
// (NOT_ENOUGH_REPLICAS, too large, an unknown partition) leaves the
// coordinator serving. Any other (a timeout waiting for the high watermark,
// NOT_ENOUGH_REPLICAS_AFTER_APPEND, a lost leadership) leaves records in
// the log that may yet be committed or truncated: the coordinator answers
// the request with Kafka's mapping of the error and then stops serving
// (Unloaded reports it), because its durable view could no longer be
// trusted to match the log; the host replaces it with one that loads the
// log.
func (c *Coordinator) AppendDone(id AppendID, errorCode int16) {
	if _, ok := c.pending[id]; !ok || c.phase == unloaded {
		return
	}
	c.reports[id] = errorCode
	if write := c.pending[id]; errorCode != 0 && !write.appliedEarly && (!neverWritten(errorCode) || write.consumer) {
		c.stopping = true // completeAppend unloads once the appends before it are reported
	}
	for c.phase != unloaded {
		code, reported := c.reports[c.nextReport]
		if !reported {
			break
		}
		delete(c.reports, c.nextReport)
		c.completeAppend(c.nextReport, code)
		c.nextReport++
	}
	c.answerStableFetches()
	c.answerConsumerWaits()
}

// completeAppend carries out one reported append, in order.
func (c *Coordinator) completeAppend(id AppendID, errorCode int16) {
	write := c.pending[id]
	c.forget(id, write)
	if write.appliedEarly {
		return
	}
	if errorCode == 0 {
		c.applyAll(write.decoded)
		write.done(0)
		return
	}
	write.done(appendErrorToResponse(errorCode))
	// A consumer group's live state ran ahead of the log with these
	// records (and any appended after them): whatever the error, it can no
	// longer be trusted, and a coordinator that loads the log takes over.
	if !neverWritten(errorCode) || write.consumer {
		c.Unload()
	}
}

// neverWritten reports whether a produce error means the records were
// refused before they reached the log.
func neverWritten(errorCode int16) bool {
	switch errorCode {
	case kerr.NotEnoughReplicas.Code, kerr.UnknownTopicOrPartition.Code, kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code,
		kerr.InvalidFetchSize.Code, kerr.CorruptMessage.Code, kerr.InvalidRecord.Code:
		return true
	}
	return false
}

// Unloaded reports whether the coordinator has stopped serving: Unload was
// called, or an append failed in a way that leaves its fate to the log.
// The host then drops it, and if it still leads the partition, starts a
// new one that loads the log.
func (c *Coordinator) Unloaded() bool { return c.phase == unloaded }

// Handle takes one request from an unknown client; see HandleFrom.
func (c *Coordinator) Handle(nowMs int64, id RequestID, request kmsg.Request) {
	c.HandleFrom(nowMs, id, Client{}, request)
}

// HandleFrom takes one request for groups of this partition (the host
// splits requests naming groups of several partitions and merges the
// answers). Its answer comes out of Ready, now or later.
func (c *Coordinator) HandleFrom(nowMs int64, id RequestID, client Client, request kmsg.Request) {
	if request == nil {
		return
	}
	if nowMs > c.nowMs {
		c.nowMs = nowMs
	}
	switch c.phase {
	case loading:
		c.answer(id, errorResponse(request, int16(kerr.CoordinatorLoadInProgress.Code)))
		return
	case unloaded:
		c.answer(id, errorResponse(request, int16(kerr.NotCoordinator.Code)))
		return
	}
	if c.refuseClassicRequest(id, request) {
		return
	}
	switch request := request.(type) {
	case *kmsg.OffsetCommitRequest:
		c.handleOffsetCommit(id, request)
	case *kmsg.OffsetFetchRequest:
		c.handleOffsetFetch(id, request)
	case *kmsg.DescribeGroupsRequest:
		c.handleDescribeGroups(id, request)
	case *kmsg.ListGroupsRequest:
		c.handleListGroups(id, request)
	case *kmsg.JoinGroupRequest:
		c.handleJoinGroup(id, client, request)
	case *kmsg.SyncGroupRequest:
		c.handleSyncGroup(id, request)
	case *kmsg.HeartbeatRequest:
		c.handleHeartbeat(id, request)
	case *kmsg.LeaveGroupRequest:
		c.handleLeaveGroup(id, request)
	case *kmsg.DeleteGroupsRequest:
		c.handleDeleteGroups(id, request)
	case *kmsg.OffsetDeleteRequest:
		c.handleOffsetDelete(id, request)
	case *kmsg.ConsumerGroupHeartbeatRequest:
		c.handleConsumerGroupHeartbeat(id, client, request)
	case *kmsg.ConsumerGroupDescribeRequest:
		c.handleConsumerGroupDescribe(id, request)
	default:
		c.answer(id, errorResponse(request, int16(kerr.InvalidRequest.Code)))
	}
}

// Tick runs the timers due by nowMs: sessions, join and sync phases, the
// initial rebalance delay, and the periodic expiry of offsets.
func (c *Coordinator) Tick(nowMs int64) {
	if c.phase != serving {
		return
	}
	if nowMs > c.nowMs {
		c.nowMs = nowMs
	}
	if c.nowMs >= c.nextDeadlineMs {
		c.nextDeadlineMs = math.MaxInt64
		for _, id := range sortedKeys(c.groups) {
			if group, ok := c.groups[id]; ok {
				group.tick(c)
				c.at(group.earliestDeadlineMs())
			}
		}
		for _, id := range sortedKeys(c.consumerGroups) {
			group := c.consumerGroups[id]
			c.tickConsumerGroup(group)
			c.at(group.earliestDeadlineMs())
		}
	}
	if c.nowMs >= c.nextExpiryCheckMs {
		c.nextExpiryCheckMs = c.nowMs + c.config.OffsetsRetentionCheckIntervalMs
		c.expireOffsets()
	}
}

// at notes a deadline set on a group, so Tick looks at the groups once it
// is due, and returns it.
func (c *Coordinator) at(deadlineMs int64) int64 {
	c.nextDeadlineMs = min(c.nextDeadlineMs, deadlineMs)
	return deadlineMs
}

// answer queues a response, at the request's version.
func (c *Coordinator) answer(id RequestID, response kmsg.Response) {
	c.ready.Answers = append(c.ready.Answers, Answer{Request: id, Response: response})
}

// write hands records out as one append; done runs once the host reports
// it. With rule answer-after-commit off (the simulator's legacy switch),
// the records are applied and done runs at once, before anything is known
// to be committed: the failure the rule prevents.
func (c *Coordinator) write(records []Record, done func(errorCode int16)) {
	c.nextAppend++
	id := c.nextAppend
	c.ready.Appends = append(c.ready.Appends, Append{ID: id, Records: records})
	pending := &pendingAppend{records: records, done: done, offsets: map[string][]topicPartition{}}
	for _, record := range records {
		// Decoded from the bytes written, so the durable view is built
		// from exactly what a coordinator that loads the log will read.
		decoded, err := decodeRecord(record)
		if err != nil {
			panic(fmt.Sprintf("group: a record this coordinator wrote does not decode: %v", err))
		}
		pending.decoded = append(pending.decoded, decoded)
		if len(pending.groups) == 0 || pending.groups[len(pending.groups)-1] != decoded.group {
			pending.groups = append(pending.groups, decoded.group)
			c.pendingByGroup[decoded.group]++
		}
		pending.consumer = pending.consumer || decoded.consumer != nil
		if decoded.partition != nil {
			pending.offsets[decoded.group] = append(pending.offsets[decoded.group], *decoded.partition)
		}
	}
	c.pending[id] = pending
	if !c.config.Rules.On(rules.AnswerAfterCommit) {
		pending.appliedEarly = true
		c.applyAll(pending.decoded)
		done(0)
	}
}

// forget drops a reported append from the appends in flight.
func (c *Coordinator) forget(id AppendID, write *pendingAppend) {
	delete(c.pending, id)
	for _, group := range write.groups {
		if c.pendingByGroup[group]--; c.pendingByGroup[group] <= 0 {
			delete(c.pendingByGroup, group)
		}
	}
}

// hasPendingWritesFor reports whether an append in flight carries records
// of the group.
func (c *Coordinator) hasPendingWritesFor(id string) bool { return c.pendingByGroup[id] > 0 }

// canWrite reports whether another append fits under MaxPendingAppends
// and no append was reported failed in a way that will unload the
// coordinator (stopping).
func (c *Coordinator) canWrite() bool {
	return !c.stopping && len(c.pending) < c.config.MaxPendingAppends
}

// applyAll applies records this coordinator wrote to the durable view.
func (c *Coordinator) applyAll(records []decodedRecord) {
	for _, record := range records {
		c.apply(record)
	}
}

// apply applies one record to the durable view: the latest record of a key
// wins, and a tombstone removes it, as compaction and replay resolve it.
func (c *Coordinator) apply(record decodedRecord) {
	if record.skip {
		return
	}
	durable := c.durable[record.group]
	if durable == nil {
		durable = &durableGroup{offsets: map[topicPartition]committedOffset{}}
		c.durable[record.group] = durable
	}
	switch {
	case record.consumer != nil:
		durable.applyConsumer(record.consumer)
	case record.partition != nil && record.offset != nil:
		durable.offsets[*record.partition] = *record.offset
	case record.partition != nil:
		delete(durable.offsets, *record.partition)
	default:
		durable.metadata = record.metadata
	}
	if durable.metadata == nil && len(durable.offsets) == 0 && len(durable.consumer) == 0 {
		delete(c.durable, record.group)
	}
}

// appendErrorToResponse maps the error of a failed append to what Kafka
// answers (CoordinatorOperationExceptionHelper): retriable storage errors
// become COORDINATOR_NOT_AVAILABLE, a lost leadership NOT_COORDINATOR, size
// errors UNKNOWN_SERVER_ERROR, anything else passes through.
func appendErrorToResponse(errorCode int16) int16 {
	switch errorCode {
	case kerr.UnknownTopicOrPartition.Code, kerr.NotEnoughReplicas.Code, kerr.NotEnoughReplicasAfterAppend.Code, kerr.RequestTimedOut.Code:
		return kerr.CoordinatorNotAvailable.Code
	case kerr.NotLeaderForPartition.Code, kerr.KafkaStorageError.Code:
		return kerr.NotCoordinator.Code
	case kerr.MessageTooLarge.Code, kerr.RecordListTooLarge.Code, kerr.InvalidFetchSize.Code:
		return kerr.UnknownServerError.Code
	}
	return errorCode
}

func sortedKeys[V any](values map[string]V) []string {
	keys := make([]string, 0, len(values))
	for key := range values {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}

func sortedAppendIDs(values map[AppendID]*pendingAppend) []AppendID {
	keys := make([]AppendID, 0, len(values))
	for key := range values {
		keys = append(keys, key)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	return keys
}
