package server

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidelog/tide/internal/frontend"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/replica"
)

// metricsSnapshot is what a scrape reads from the cores, taken on the node
// loop in one pass.
type metricsSnapshot struct {
	partitions []partitionSample
	// broker is this node's broker side: its metadata offset, whether it
	// is fenced, and what its fetchers were answered.
	brokerMetadataOffset int64
	brokerFenced         bool
	fetchErrors          map[string]int64
	// controller is set on a voter of the metadata quorum.
	controller *controllerSample
	// groups are the consumer groups this broker coordinates.
	groups frontend.ViewGroups
}

// partitionSample is one hosted replica as its broker sees it.
type partitionSample struct {
	topic          string
	partition      int32
	leader         bool
	leaderEpoch    int32
	logStart       int64
	highWatermark  int64
	logEnd         int64
	replicas       int
	inSync         int
	minInsync      int
	underReplicate bool
	// leaderID is the partition's leader in the metadata; fetcherLag, on
	// a follower, its fetcher lag (-1 unknown).
	leaderID   int32
	fetcherLag int64
}

// controllerSample is a voter's view: the quorum's and, on the active
// controller, the cluster's.
type controllerSample struct {
	active             bool
	term               uint64
	metadataOffset     int64
	fencedBrokers      int
	offlinePartitions  int
	globalPartitions   int
	globalTopics       int
	underMinIsrInImage int
}

// metricsSnapshot reads the cores through the front end's View; it runs
// on the node loop.
func (s *Server) metricsSnapshot() metricsSnapshot {
	view := s.frontend.View()
	snapshot := metricsSnapshot{brokerMetadataOffset: view.MetadataOffset, brokerFenced: view.Fenced, fetchErrors: view.FetchErrors}
	for _, topic := range view.Topics {
		for _, partition := range topic.Partitions {
			if partition.Local != nil {
				snapshot.partitions = append(snapshot.partitions, samplePartition(partition))
			}
		}
	}
	snapshot.groups = s.frontend.GroupsView(s.config.MetricsGroupPartitionsMax)
	if s.quorum != nil {
		snapshot.controller = sampleController(s.quorum.Active(), s.quorum.Term(), s.quorum.Image())
	}
	return snapshot
}

func samplePartition(partition frontend.ViewPartition) partitionSample {
	state, local := partition.State, partition.Local
	sample := partitionSample{topic: state.Topic, partition: state.Partition, leader: local.Role == replica.Leader,
		leaderEpoch: local.LeaderEpoch, logStart: local.LogStart, highWatermark: local.HighWatermark,
		logEnd: local.LogEnd, replicas: len(state.Replicas), inSync: len(state.ISR), minInsync: partition.MinInsync,
		leaderID: int32(state.Leader), fetcherLag: local.FetcherLag}
	// Kafka counts a partition under-replicated on its leader only, so
	// that the cluster's sum counts each partition once.
	sample.underReplicate = sample.leader && sample.inSync < sample.replicas
	return sample
}

func sampleController(active bool, term uint64, img *metadata.Image) *controllerSample {
	sample := &controllerSample{active: active, term: term, metadataOffset: img.Offset(), globalTopics: len(img.Topics())}
	for _, broker := range img.Brokers() {
		if broker.Fenced {
			sample.fencedBrokers++
		}
	}
	for _, partition := range img.Partitions() {
		sample.globalPartitions++
		if partition.Leader == metadata.NoBroker {
			sample.offlinePartitions++
		}
		if config, ok := img.TopicConfig(partition.Topic); ok && len(partition.ISR) < config.MinInsyncReplicas {
			sample.underMinIsrInImage++
		}
	}
	return sample
}

var (
	partitionLabels = []string{"topic", "partition"}

	descLogStart = prometheus.NewDesc("kafka_log_log_log_start_offset",
		"A hosted replica's log start offset: the first offset a consumer can read.", partitionLabels, nil)
	descLogEnd = prometheus.NewDesc("kafka_log_log_log_end_offset",
		"A hosted replica's log end offset: the offset its next record gets.", partitionLabels, nil)
	descHighWatermark = prometheus.NewDesc("kafka_cluster_partition_high_watermark",
		"A hosted replica's high watermark: every offset below it is committed.", partitionLabels, nil)
	descLeaderEpoch = prometheus.NewDesc("kafka_cluster_partition_leader_epoch",
		"The leader epoch a hosted replica has applied.", partitionLabels, nil)
	descReplicasCount = prometheus.NewDesc("kafka_cluster_partition_replicas_count",
		"A led partition's replicas.", partitionLabels, nil)
	descInSyncCount = prometheus.NewDesc("kafka_cluster_partition_in_sync_replicas_count",
		"A led partition's in-sync replicas.", partitionLabels, nil)
	descUnderReplicated = prometheus.NewDesc("kafka_cluster_partition_under_replicated",
		"1 when a partition this broker leads has fewer in-sync replicas than replicas.", partitionLabels, nil)
	descUnderMinIsr = prometheus.NewDesc("kafka_cluster_partition_under_min_isr",
		"1 when a partition this broker leads has fewer in-sync replicas than min.insync.replicas: acks=all produce fails.", partitionLabels, nil)

	descUnderReplicatedTotal = prometheus.NewDesc("kafka_server_replicamanager_under_replicated_partitions",
		"Partitions this broker leads with fewer in-sync replicas than replicas.", nil, nil)
	descUnderMinIsrTotal = prometheus.NewDesc("kafka_server_replicamanager_under_min_isr_partition_count",
		"Partitions this broker leads with fewer in-sync replicas than min.insync.replicas.", nil, nil)
	descPartitionCount = prometheus.NewDesc("kafka_server_replicamanager_partition_count",
		"Replicas this broker hosts.", nil, nil)
	descLeaderCount = prometheus.NewDesc("kafka_server_replicamanager_leader_count",
		"Partitions this broker leads.", nil, nil)
	descBrokerMetadataOffset = prometheus.NewDesc("kafka_server_broker_metadata_offset",
		"The last metadata log offset this broker has applied.", nil, nil)
	descBrokerFenced = prometheus.NewDesc("kafka_server_broker_fenced",
		"1 while the controller holds this broker fenced (it leads nothing and joins no ISR).", nil, nil)
	descFetcherErrors = prometheus.NewDesc("kafka_server_replicafetchermanager_partition_errors_total",
		"Partition errors this broker's replica fetchers were answered, by Kafka error (FENCED_LEADER_EPOCH: a zombie follower turned away).", []string{"error"}, nil)

	descActiveController = prometheus.NewDesc("kafka_controller_kafkacontroller_active_controller_count",
		"1 on the active controller of the metadata quorum.", nil, nil)
	descRaftTerm = prometheus.NewDesc("kafka_server_raftmetrics_current_epoch",
		"The metadata quorum's raft term as this voter knows it.", nil, nil)
	descControllerOffset = prometheus.NewDesc("kafka_controller_kafkacontroller_last_applied_record_offset",
		"The last metadata log offset this controller has applied.", nil, nil)
	descFencedBrokers = prometheus.NewDesc("kafka_controller_kafkacontroller_fenced_broker_count",
		"Registered brokers the controller holds fenced (active controller only).", nil, nil)
	descOfflinePartitions = prometheus.NewDesc("kafka_controller_kafkacontroller_offline_partitions_count",
		"Partitions without a leader (active controller only).", nil, nil)
	descGlobalPartitions = prometheus.NewDesc("kafka_controller_kafkacontroller_global_partition_count",
		"Partitions in the cluster (active controller only).", nil, nil)
	descGlobalTopics = prometheus.NewDesc("kafka_controller_kafkacontroller_global_topic_count",
		"Topics in the cluster (active controller only).", nil, nil)
	descClusterUnderMinIsr = prometheus.NewDesc("kafka_controller_kafkacontroller_under_min_isr_partition_count",
		"Partitions whose ISR is smaller than min.insync.replicas in the metadata (active controller only).", nil, nil)
)

// emit writes the snapshot as metrics, partitions in a stable order.
func (s metricsSnapshot) emit(out chan<- prometheus.Metric) {
	slices.SortFunc(s.partitions, func(a, b partitionSample) int {
		if a.topic != b.topic {
			if a.topic < b.topic {
				return -1
			}
			return 1
		}
		return int(a.partition - b.partition)
	})
	leaders, underReplicated, underMinIsr := 0, 0, 0
	for _, p := range s.partitions {
		labels := []string{p.topic, partitionLabel(p.partition)}
		gauge(out, descLogStart, float64(p.logStart), labels...)
		gauge(out, descLogEnd, float64(p.logEnd), labels...)
		gauge(out, descHighWatermark, float64(p.highWatermark), labels...)
		gauge(out, descLeaderEpoch, float64(p.leaderEpoch), labels...)
		if !p.leader {
			continue
		}
		leaders++
		gauge(out, descTopicCurrentOffset, float64(p.highWatermark), labels...)
		gauge(out, descTopicOldestOffset, float64(p.logStart), labels...)
		below := p.inSync < p.minInsync
		underReplicated += int(boolValue(p.underReplicate))
		underMinIsr += int(boolValue(below))
		gauge(out, descReplicasCount, float64(p.replicas), labels...)
		gauge(out, descInSyncCount, float64(p.inSync), labels...)
		gauge(out, descUnderReplicated, boolValue(p.underReplicate), labels...)
		gauge(out, descUnderMinIsr, boolValue(below), labels...)
	}
	gauge(out, descUnderReplicatedTotal, float64(underReplicated))
	gauge(out, descUnderMinIsrTotal, float64(underMinIsr))
	gauge(out, descPartitionCount, float64(len(s.partitions)))
	gauge(out, descLeaderCount, float64(leaders))
	gauge(out, descBrokerMetadataOffset, float64(s.brokerMetadataOffset))
	gauge(out, descBrokerFenced, boolValue(s.brokerFenced))
	emitFetcherLag(out, s.partitions)
	emitGroups(out, s.groups)
	for name, count := range s.fetchErrors {
		out <- prometheus.MustNewConstMetric(descFetcherErrors, prometheus.CounterValue, float64(count), name)
	}
	if c := s.controller; c != nil {
		gauge(out, descActiveController, boolValue(c.active))
		gauge(out, descRaftTerm, float64(c.term))
		gauge(out, descControllerOffset, float64(c.metadataOffset))
		if c.active {
			gauge(out, descFencedBrokers, float64(c.fencedBrokers))
			gauge(out, descOfflinePartitions, float64(c.offlinePartitions))
			gauge(out, descGlobalPartitions, float64(c.globalPartitions))
			gauge(out, descGlobalTopics, float64(c.globalTopics))
			gauge(out, descClusterUnderMinIsr, float64(c.underMinIsrInImage))
		}
	}
}
