// Package broker is one tide broker as a single-threaded object: it applies
// the metadata log, keeps one replica (internal/replica) and one log
// (internal/commitlog) per partition it hosts, routes client requests, peer
// messages and controller answers to the replicas, and carries out what
// their Ready says against its logs and its outbox, in one durability
// schedule (group commit: TakeSyncs and Synced, sync.go). Its Lifecycle is the broker's side of
// the controller protocol.
//
// What it decides: which replica a request or message is for, the order a
// Ready is carried out in, that a dirty log gets one sync job however
// many appends asked for it and at most one job at a time, whether a fetch's records are read or
// handed out as file chunks (ZeroCopyReads), that a partition whose log
// failed goes offline, that a topic's config changes reach its open logs
// and replicas at once (topicconfigs.go: before the partition states of
// the same metadata batch), that a partition directory holding another topic's
// id (partition.metadata, KIP-516) is never served, and that a deleted
// topic's directories are renamed aside at once and removed a bounded
// number of files per Tick (partitiondir.go). What it never touches: the Kafka protocol (wire),
// sockets, goroutines, the clock (time comes in as Tick), randomness;
// files only through the disk.FS it is given and the partition logs over
// it. internal/lint holds it to that. (The logs it opens still default
// their segment-age clock to the wall clock: docs/architecture.md, Status.)
//
// Who drives it: in tide serve, the front end (internal/frontend) hands a
// node its client requests and peer messages and drains its Outbox, and
// the server's node loop takes the sync jobs (TakeSyncs) at the end of each
// pass, runs them on its I/O workers and hands each outcome back (Synced)
// as an input of a later pass; the simulator (internal/sim) drives the
// node and its Lifecycle directly, with value messages over its simulated
// network, and completes each sync job as an event of its slow disk. The
// node has no branch for either, and never waits for a disk sync itself.
package broker

import (
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/commitlog"
	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/producer"
	"github.com/tidelog/tide/internal/replica"
	"github.com/tidelog/tide/internal/rules"
)

// Config configures a node.
type Config struct {
	ID metadata.BrokerID
	// FS and Dir hold the node's partition logs, one directory each.
	FS  disk.FS
	Dir string
	// FlushAlways is flush=always: a replica's data counts only once synced.
	FlushAlways bool
	// SegmentBytes and MaxBatchBytes size the partition logs.
	SegmentBytes  int64
	MaxBatchBytes int
	// PendingBytesMax bounds each partition log's bytes appended and not
	// yet written by a sync job (commitlog.Config.PendingBytesMax; zero is
	// its default, 32 MiB). A produce past it is answered
	// REQUEST_TIMED_OUT, a follower's fetched records are refetched.
	PendingBytesMax int64
	// RetentionMs, RetentionBytes and SegmentMs are the broker's defaults
	// for every topic's retention.ms, retention.bytes and segment.ms
	// (LogConfig); zero means Kafka's default (7 days, no limit, 7 days),
	// a negative retention no limit.
	RetentionMs    int64
	RetentionBytes int64
	SegmentMs      int64
	// LogAppendTime is log.message.timestamp.type=LogAppendTime for every
	// topic (LogConfig); false is CreateTime, Kafka's default.
	LogAppendTime bool
	// RetentionCheckIntervalMs is log.retention.check.interval.ms (zero:
	// five minutes), RetentionPartitionsPerTick the most partitions one
	// Tick checks (zero: DefaultRetentionPartitionsPerTick).
	RetentionCheckIntervalMs   int64
	RetentionPartitionsPerTick int
	// MaxDecompressedBatchBytes bounds what a produced compressed batch may
	// inflate to while its leader checks it; see
	// replica.Config.MaxDecompressedBatchBytes. Zero means
	// record.DefaultMaxDecompressedBatchBytes (64 MiB).
	MaxDecompressedBatchBytes int
	// Replica tick intervals; see replica.Config.
	ReplicaLagTicks    int64
	FetchRetryTicks    int64
	FetchTimeoutTicks  int64
	ProposalRetryTicks int64
	MaxPendingProduces int
	// Rules is the zero value outside the simulator and the scenarios.
	Rules rules.Rules
	// ZeroCopyReads answers client fetches (consumers' and followers')
	// whose records all lie below the high watermark with the log's chunks
	// rather than bytes read (ClientAnswer.FetchChunks), for the runtime to
	// write from the files (with sendfile, for real ones). Records above
	// the high watermark, which a truncation may change, are always read.
	ZeroCopyReads bool
	// DeletedFilesPerTick bounds the files of deleted partition
	// directories removed per Tick; zero means 64.
	DeletedFilesPerTick int
	// CleanerConfigs are the topics this node compacts (cleanup.policy
	// compact), with their cleaner configs; see cleanerConfigFor.
	CleanerConfigs map[string]commitlog.CleanerConfig
	// CleanerIntervalTicks is how many ticks apart Tick runs a cleaning pass;
	// zero means CleanerIntervalTicksDefault.
	CleanerIntervalTicks int64
}

// partition is one hosted partition: its replica and its log.
type partition struct {
	replica *replica.Replica
	log     *commitlog.Log
}

// Node is one broker. It is not safe for concurrent use.
type Node struct {
	config     Config
	epoch      metadata.BrokerEpoch
	image      *metadata.Image
	partitions map[metadata.TopicPartition]*partition
	// sorted is Partitions' answer, nil when partitions changed since.
	sorted []metadata.TopicPartition
	outbox Outbox
	// failed lists partitions whose log failed; they are offline.
	failed map[metadata.TopicPartition]error
	// observer, if set, sees every Ready a replica hands out, for the
	// simulator's checker.
	observer func(metadata.TopicPartition, replica.Ready)
	// producers remembers who sent each produce request still waiting for
	// its answer, under the node's own request id (clients' ids collide).
	producers     map[producerKey]pendingProducer
	nextRequestID uint64
	// unsynced are the partitions whose replicas asked for a sync that
	// no job taken since covers (sync.go); syncing are the partitions with
	// a job out, by the log it syncs: at most one per log.
	unsynced map[metadata.TopicPartition]bool
	syncing  map[metadata.TopicPartition]*commitlog.Log
	// now counts Ticks, for retrying requests to the controller.
	now         int64
	producerIDs producerIDs
	// stale are the partitions held back because their directory holds
	// another topic's id that is not known to be deleted yet, with that id
	// (rule directory-topic-id).
	stale map[metadata.TopicPartition]metadata.TopicID
	// deletedTopicIDs are the ids of the topics this incarnation saw
	// deleted: a directory holding one is garbage.
	deletedTopicIDs map[metadata.TopicID]bool
	// caughtUp is set once the node has applied the whole metadata log
	// (MarkCaughtUp).
	caughtUp bool
	// deletions are the directories set aside and not yet removed, in
	// order; deletionsScanned is set once the leftovers of earlier
	// incarnations are queued; deletionsNamed counts the renames.
	deletions        []string
	deletionsScanned bool
	deletionsNamed   uint64
	// cleanedAtTick is when Tick last ran a cleaning pass, cleanerTurn whose
	// turn it was.
	cleanedAtTick int64
	cleanerTurn   int
	// cleanerObserver, if set, sees every pass that cleaned a log.
	cleanerObserver func(CleanReport)
	// clockMs is the time the runtime last gave (SetClock), -1 before.
	clockMs   int64
	retention retentionSchedule
}

type producerKey struct {
	partition metadata.TopicPartition
	id        uint64
}

type pendingProducer struct {
	client ClientID
	id     uint64
}

// New returns a node with an empty metadata image, in incarnation epoch.
func New(config Config, epoch metadata.BrokerEpoch) *Node {
	return &Node{
		config: config, epoch: epoch, image: metadata.NewImage(),
		partitions:      map[metadata.TopicPartition]*partition{},
		failed:          map[metadata.TopicPartition]error{},
		producers:       map[producerKey]pendingProducer{},
		unsynced:        map[metadata.TopicPartition]bool{},
		syncing:         map[metadata.TopicPartition]*commitlog.Log{},
		producerIDs:     producerIDs{requestedTick: -1},
		stale:           map[metadata.TopicPartition]metadata.TopicID{},
		deletedTopicIDs: map[metadata.TopicID]bool{},
		clockMs:         -1,
	}
}

// ID returns the broker's id.
func (n *Node) ID() metadata.BrokerID { return n.config.ID }

// Epoch returns the broker's incarnation.
func (n *Node) Epoch() metadata.BrokerEpoch { return n.epoch }

// MetadataOffset is the offset of the last metadata record applied.
func (n *Node) MetadataOffset() int64 { return n.image.Offset() }

// Image returns the node's metadata image. Callers must not change it.
func (n *Node) Image() *metadata.Image { return n.image }

// Observe sets a function that sees every Ready before it is carried out.
func (n *Node) Observe(observer func(metadata.TopicPartition, replica.Ready)) {
	n.observer = observer
}

// Replica returns the replica of a hosted partition, for inspection.
func (n *Node) Replica(tp metadata.TopicPartition) (*replica.Replica, *commitlog.Log, bool) {
	p, ok := n.partitions[tp]
	if !ok {
		return nil, nil, false
	}
	return p.replica, p.log, true
}

// ControllerMoved tells every replica that controller requests now go to
// another controller (replica.ControllerMoved).
func (n *Node) ControllerMoved() {
	for _, tp := range n.Partitions() {
		n.partitions[tp].replica.ControllerMoved()
	}
}

// Partitions returns the hosted partitions, sorted.
//
// Callers must not change the list: it is kept until the partitions change
// (the node's own tick walks it every tick).
func (n *Node) Partitions() []metadata.TopicPartition {
	if n.sorted == nil {
		n.sorted = make([]metadata.TopicPartition, 0, len(n.partitions))
		for tp := range n.partitions {
			n.sorted = append(n.sorted, tp)
		}
		sortPartitions(n.sorted)
	}
	return n.sorted
}

// Failed returns the partitions whose log failed, with the cause.
func (n *Node) Failed() map[metadata.TopicPartition]error { return n.failed }

// TakeOutbox returns what the node has to send and empties it.
func (n *Node) TakeOutbox() Outbox {
	outbox := n.outbox
	n.outbox = Outbox{}
	return outbox
}

// ApplyMetadata applies metadata records strictly in log order, then hands
// each replica concerned its partition's state as the whole batch left it,
// opening the logs of partitions this broker starts to host. Only the final
// state is published: a broker catching up on the metadata log must not
// re-live the leaderships of its past, as a leader of a stale epoch with a
// lone ISR would advance its high watermark over records never committed.
func (n *Node) ApplyMetadata(entries []metadata.Entry) error {
	changed := map[metadata.TopicPartition]bool{}
	configured := map[string]bool{}
	brokersChanged := false
	for _, entry := range entries {
		if entry.Offset <= n.image.Offset() {
			continue // already applied: metadata is resent after losses
		}
		var deleted metadata.Topic
		if rec, ok := entry.Record.(metadata.DeleteTopic); ok {
			deleted, _ = n.image.Topic(rec.Name)
		}
		applied, err := n.image.Apply(entry)
		if err != nil {
			return fmt.Errorf("broker %d: metadata offset %d: %w", n.config.ID, entry.Offset, err)
		}
		if !applied {
			continue
		}
		switch rec := entry.Record.(type) {
		case metadata.CreateTopic:
			for _, state := range rec.Partitions {
				changed[state.TopicPartition] = true
			}
		case metadata.CreatePartitions:
			for _, state := range rec.Partitions {
				changed[state.TopicPartition] = true
			}
		case metadata.PartitionChange:
			changed[rec.TopicPartition] = true
		case metadata.DeleteTopic:
			n.dropTopic(deleted)
		case metadata.AssignTopicID:
			n.adoptTopicID(rec.Name, rec.ID)
		case metadata.ProducerIDs:
			// Blocks reach their broker in the controller's answer.
		case metadata.ConfigRecord:
			n.noteConfigured(rec.Resource, configured)
		default:
			brokersChanged = true
		}
	}
	if brokersChanged {
		brokers := n.image.Brokers()
		for _, tp := range n.Partitions() {
			p := n.partitions[tp]
			p.replica.SetBrokers(brokers)
			n.process(tp, p)
		}
	}
	// Configs first: a replica must hold the batch's min.insync.replicas
	// before it sees the batch's partition epochs (rule min-isr-race).
	n.applyTopicConfigs(configured)
	list := make([]metadata.TopicPartition, 0, len(changed))
	for tp := range changed {
		list = append(list, tp)
	}
	sortPartitions(list)
	for _, tp := range list {
		if err := n.applyPartitionState(tp); err != nil {
			return err
		}
	}
	return nil
}

// ApplyPartitionState hands a replica partition state directly, not through
// the metadata log: what ZooKeeper-era LeaderAndIsr pushes did. Only the
// simulator uses it, to show KAFKA-4414 with rule kafka-4414 switched off.
func (n *Node) ApplyPartitionState(state metadata.PartitionState) error {
	if _, known := n.image.TopicConfig(state.Topic); !known {
		return nil // pushed before the topic reached this broker: dropped
	}
	p, err := n.ensurePartition(state.TopicPartition)
	if err != nil || p == nil {
		return err
	}
	p.replica.ApplyPartitionState(state)
	n.process(state.TopicPartition, p)
	return nil
}

func (n *Node) applyPartitionState(tp metadata.TopicPartition) error {
	state, ok := n.image.Partition(tp)
	if !ok {
		return nil
	}
	if !state.IsReplica(n.config.ID) {
		n.dropReplica(state)
		return nil
	}
	if _, hosted := n.partitions[tp]; hosted && !n.config.Rules.On(rules.OrderedMetadata) {
		return nil // after creation, the simulator pushes partition state itself
	}
	p, err := n.ensurePartition(tp)
	if err != nil || p == nil {
		return err
	}
	p.replica.ApplyPartitionState(state)
	n.process(tp, p)
	return nil
}

// ensurePartition opens the log and creates the replica of a partition this
// broker hosts, if not yet open. A log that cannot be opened (recovery found
// corruption below its recovery point, or the disk failed) takes only its
// own partition offline, into failed, and returns no partition and no
// error: one damaged partition directory must not stop the node from
// serving the others (issue 11).
func (n *Node) ensurePartition(tp metadata.TopicPartition) (*partition, error) {
	if p, ok := n.partitions[tp]; ok {
		return p, nil
	}
	if _, failed := n.failed[tp]; failed {
		return nil, nil
	}
	if _, stale := n.stale[tp]; stale {
		return nil, nil
	}
	config, ok := n.image.TopicConfig(tp.Topic)
	if !ok {
		return nil, fmt.Errorf("broker %d: partition %s of an unknown topic", n.config.ID, tp)
	}
	if id, _ := n.image.TopicID(tp.Topic); !n.prepareDirectory(tp, id) {
		return nil, nil
	}
	logConfig := n.logConfig(tp.Topic)
	// max.message.bytes raises the batch bound for its topic; a value below
	// the node's bounds only produced batches (replica.Config
	// MaxMessageBytes): lowering the log's bound under batches already in
	// it would make them unreadable.
	maxBatchBytes := max(n.config.MaxBatchBytes, logConfig.MaxMessageBytes)
	// Rule segment-holds-a-batch: Kafka accepts segment.bytes down to 14,
	// but a commit log's segment must hold its largest batch; taken as
	// given, a small segment.bytes would keep the partition from opening.
	logConfig.SegmentBytes = max(logConfig.SegmentBytes, int64(maxBatchBytes))
	log, err := commitlog.Open(commitlog.Config{
		FS: n.config.FS, Dir: n.partitionDirectory(tp),
		SegmentBytes: logConfig.SegmentBytes, SegmentAge: logConfig.segmentAge(), MaxBatchBytes: maxBatchBytes,
		RetentionBytes: -1, PendingBytesMax: n.config.PendingBytesMax,
	})
	if err != nil {
		n.failed[tp] = fmt.Errorf("broker %d: open %s: %w", n.config.ID, tp, err)
		return nil, nil
	}
	if n.clockMs >= 0 {
		log.SetClock(n.clockMs)
	}
	producerBatches, err := log.ReadHeaders(producer.IsIdempotent)
	if err != nil {
		log.Close()
		n.failed[tp] = fmt.Errorf("broker %d: read producer batches of %s: %w", n.config.ID, tp, err)
		return nil, nil
	}
	topicConfig := n.replicaTopicConfig(tp.Topic, config)
	r, err := replica.New(replica.Config{
		Broker: n.config.ID, Partition: tp, MinInsyncReplicas: config.MinInsyncReplicas,
		ReplicaLagTicks: n.config.ReplicaLagTicks, FetchRetryTicks: n.config.FetchRetryTicks,
		FetchTimeoutTicks:  n.config.FetchTimeoutTicks,
		ProposalRetryTicks: n.config.ProposalRetryTicks, FlushAlways: n.config.FlushAlways,
		MaxBatchBytes: maxBatchBytes, MaxDecompressedBatchBytes: n.config.MaxDecompressedBatchBytes,
		MaxPendingProduces: n.config.MaxPendingProduces, Rules: n.config.Rules, LogAppendTime: logConfig.LogAppendTime,
		MaxMessageBytes: topicConfig.MaxMessageBytes, Compacted: topicConfig.Compacted,
		Recompress: topicConfig.Recompress, Codec: topicConfig.Codec,
	}, replica.LogState{
		LogStartOffset: log.LogStartOffset(), LogEndOffset: log.LogEndOffset(),
		DurableEndOffset: log.DurableEndOffset(), HighWatermark: log.HighWatermark(), Epochs: log.Epochs(),
		ProducerBatches: producerBatches,
	})
	if err != nil {
		log.Close()
		return nil, err
	}
	r.SetBrokerEpoch(n.epoch)
	r.SetBrokers(n.image.Brokers())
	p := &partition{replica: r, log: log}
	n.partitions[tp] = p
	n.sorted = nil
	return p, nil
}

// Tick advances every replica's clock by one tick, and runs retention on
// a bounded number of partitions when it is due (retention.go).
func (n *Node) Tick() {
	n.now++
	n.removeDeletions()
	for _, tp := range n.Partitions() {
		p := n.partitions[tp]
		p.replica.Tick()
		n.process(tp, p)
	}
	n.maybeEnforceRetention()
	n.maybeCleanLogs()
	// A broker holds a block of producer ids from its start, not from its
	// first InitProducerId: a producer asking then would get
	// COORDINATOR_LOAD_IN_PROGRESS and back off (franz-go: 1.5 s before its
	// first idempotent write).
	n.maybeRequestProducerIDs()
}

// HandleClient routes a client request to its partition's replica.
func (n *Node) HandleClient(request ClientRequest) {
	if request.InitProducerID != nil {
		n.HandleInitProducerID(request.Client, *request.InitProducerID)
		return
	}
	p, ok := n.partitions[request.Partition]
	if !ok {
		n.outbox.Clients = append(n.outbox.Clients, ClientAnswer{Client: request.Client, Partition: request.Partition, ErrorCode: kerr.UnknownTopicOrPartition.Code})
		return
	}
	switch {
	case request.Produce != nil && !n.hasWriteRoom(p, writeRoomForProduce(request.Produce.Batches)):
		// The log's writes are behind (commitlog PendingBytesMax): the
		// producer waits for the disk rather than the heap growing. Kafka has no error for "the log's writes are
		// behind"; REQUEST_TIMED_OUT is retriable and what its producers
		// get when a write cannot be done in time, and franz-go and the
		// Java producer retry it. KAFKA_STORAGE_ERROR would say the log
		// directory is offline, and send the client to refresh metadata.
		n.outbox.Clients = append(n.outbox.Clients, ClientAnswer{Client: request.Client, Partition: request.Partition, ErrorCode: kerr.RequestTimedOut.Code})
		return
	case request.Produce != nil:
		n.nextRequestID++
		produce := *request.Produce
		key := producerKey{request.Partition, n.nextRequestID}
		n.producers[key] = pendingProducer{client: request.Client, id: produce.ID}
		produce.ID, produce.AppendTimeMs = n.nextRequestID, n.clockMs
		p.replica.HandleProduce(produce)
		if produce.Acks == replica.AcksNone {
			// An acks=0 produce is answered at once or never (a success
			// gets no answer): what is still remembered would stay forever.
			defer delete(n.producers, key)
		}
	case request.Fetch != nil:
		p.replica.HandleFetch(*request.Fetch)
	case request.ListOffsets != nil:
		p.replica.HandleListOffsets(*request.ListOffsets)
	case request.OffsetsForLeaderEpoch != nil:
		p.replica.HandleOffsetsForLeaderEpoch(*request.OffsetsForLeaderEpoch)
	case request.DeleteRecords != nil:
		p.replica.HandleDeleteRecords(*request.DeleteRecords)
	}
	n.processFor(request.Partition, p, destination{client: request.Client, isClient: true})
}

// HandlePeer routes replication traffic from another broker.
func (n *Node) HandlePeer(from metadata.BrokerID, message PeerMessage) {
	p, ok := n.partitions[message.Partition]
	if !ok {
		return // a partition this broker does not host (yet): the sender retries
	}
	switch {
	case message.Fetch != nil:
		p.replica.HandleFetch(*message.Fetch)
	case message.FetchResponse != nil && !n.hasWriteRoom(p, int64(len(message.FetchResponse.Records))):
		// The write backlog is full: the follower takes the response as a
		// retriable error and fetches the same offset again after its
		// retry backoff, by when a sync job has written the backlog.
		refused := *message.FetchResponse
		refused.ErrorCode, refused.Records = kerr.RequestTimedOut.Code, nil
		p.replica.HandleFetchResponse(refused)
	case message.FetchResponse != nil:
		p.replica.HandleFetchResponse(*message.FetchResponse)
	case message.OffsetsForLeaderEpoch != nil:
		p.replica.HandleOffsetsForLeaderEpoch(*message.OffsetsForLeaderEpoch)
	case message.OffsetsForLeaderEpochAnswer != nil:
		p.replica.HandleOffsetsForLeaderEpochResponse(*message.OffsetsForLeaderEpochAnswer)
	}
	n.processFor(message.Partition, p, destination{broker: from})
}

// HandleAlterPartitionResponse hands the controller's answer to the leader.
func (n *Node) HandleAlterPartitionResponse(tp metadata.TopicPartition, response replica.AlterPartitionResponse) {
	if p, ok := n.partitions[tp]; ok {
		p.replica.HandleAlterPartitionResponse(response)
		n.process(tp, p)
	}
}

// Close closes every log, syncing them: a clean shutdown.
func (n *Node) Close() error {
	var first error
	for _, tp := range n.Partitions() {
		if err := n.partitions[tp].log.Close(); err != nil && first == nil {
			first = err
		}
	}
	return first
}

func sortPartitions(list []metadata.TopicPartition) {
	sort.Slice(list, func(i, j int) bool {
		if list[i].Topic != list[j].Topic {
			return list[i].Topic < list[j].Topic
		}
		return list[i].Partition < list[j].Partition
	})
}

// hasWriteRoom says whether the partition's log can take an append of size
// bytes now, or is too far behind in writing what it took
// (commitlog.ErrWriteBacklog). The broker asks before a replica decides an
// append: once the replica has counted it, a refused append could only
// take the partition offline.
func (n *Node) hasWriteRoom(p *partition, size int64) bool {
	return p.log.CheckWriteBacklog(size) == nil
}

// HasWriteRoomForProduce says whether a produce of batches to the
// partition would pass the write-backlog check HandleClient makes before
// the replica decides it; a partition this node does not host has room (the
// produce is refused otherwise). The group coordinators' host asks before
// it sends an append, so that a refusal is known before the next append of
// the same coordinator goes out (rule ordered-coordinator-appends).
func (n *Node) HasWriteRoomForProduce(partition metadata.TopicPartition, batches []byte) bool {
	p, ok := n.partitions[partition]
	return !ok || n.hasWriteRoom(p, writeRoomForProduce(batches))
}

// writeRoomForProduce is the room a produce of batches asks for: twice
// their size and a little, since a topic that recompresses may append more
// bytes than it was sent (compression adds at most a few bytes per batch
// to incompressible records), and the log must not refuse what the
// replica has counted.
func writeRoomForProduce(batches []byte) int64 {
	return 2*int64(len(batches)) + 1024
}
