package server

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tidelog/tide/internal/frontend"
)

// The consumer group families follow danielqsj/kafka_exporter, the
// exporter Kafka operators' dashboards and autoscalers read
// (kafka_consumergroup_lag{consumergroup,topic,partition} and the
// per-topic _sum), so that they carry over. kafka_exporter asks the
// cluster from outside; here each broker exports the groups it
// coordinates, so the cluster's series are the union over the brokers and
// a sum over them counts each group once. The lag is the partition's high
// watermark less the committed offset, where the end offset is this
// broker's own replica's (frontend.ViewGroupPartition): no scrape makes a
// network call.
var (
	groupPartitionLabels = []string{"consumergroup", "topic", "partition"}
	groupTopicLabels     = []string{"consumergroup", "topic"}

	descGroupCurrentOffset = prometheus.NewDesc("kafka_consumergroup_current_offset",
		"A consumer group's committed offset of a partition, on the broker that coordinates the group.", groupPartitionLabels, nil)
	descGroupCurrentOffsetSum = prometheus.NewDesc("kafka_consumergroup_current_offset_sum",
		"A consumer group's committed offsets summed over a topic's partitions.", groupTopicLabels, nil)
	descGroupLag = prometheus.NewDesc("kafka_consumergroup_lag",
		"A consumer group's lag on a partition: the high watermark of the coordinator's replica of it less the committed offset (exact where the coordinator leads it, a fetch behind where it follows; absent where it hosts none).", groupPartitionLabels, nil)
	descGroupLagSum = prometheus.NewDesc("kafka_consumergroup_lag_sum",
		"A consumer group's lag summed over the partitions of a topic whose lag the coordinator knows.", groupTopicLabels, nil)
	descGroupMembers = prometheus.NewDesc("kafka_consumergroup_members",
		"A consumer group's members.", []string{"consumergroup"}, nil)
	descGroupLagUnknown = prometheus.NewDesc("kafka_consumergroup_lag_unknown_partitions",
		"Committed group partitions whose lag this coordinator cannot tell: it hosts no replica of the partition (their committed offset is exported all the same).", nil, nil)
	descGroupPartitionsOmitted = prometheus.NewDesc("kafka_consumergroup_partitions_omitted",
		"Group partitions this scrape left out, over --metrics-group-partitions-max (whole groups are left out, so every sum exported is whole).", nil, nil)

	// The partition's offsets as kafka_exporter names them, exported by
	// the leader alone so that each partition has one series in the
	// cluster: joined on topic and partition with
	// kafka_consumergroup_current_offset from any coordinator, they give
	// the lag of partitions the coordinator hosts no replica of.
	descTopicCurrentOffset = prometheus.NewDesc("kafka_topic_partition_current_offset",
		"On a partition's leader: its high watermark, the latest offset a consumer can read (kafka_exporter's name).", partitionLabels, nil)
	descTopicOldestOffset = prometheus.NewDesc("kafka_topic_partition_oldest_offset",
		"On a partition's leader: its log start offset (kafka_exporter's name).", partitionLabels, nil)

	descFetcherLag = prometheus.NewDesc("kafka_server_fetcherlagmetrics_consumerlag",
		"A follower replica's fetcher lag: the high watermark of its leader's last fetch answer less its log end offset (Kafka's FetcherLagMetrics ConsumerLag).", []string{"clientid", "topic", "partition"}, nil)
	descFetcherMaxLag = prometheus.NewDesc("kafka_server_replicafetchermanager_maxlag",
		"The largest fetcher lag over this broker's follower replicas (Kafka's ReplicaFetcherManager MaxLag).", []string{"clientid"}, nil)
)

// emitGroups writes the consumer group families.
func emitGroups(out chan<- prometheus.Metric, groups frontend.ViewGroups) {
	unknown := 0
	for _, group := range groups.Groups {
		gauge(out, descGroupMembers, float64(len(group.Members)), group.ID)
		unknown += emitGroupPartitions(out, group)
	}
	gauge(out, descGroupLagUnknown, float64(unknown))
	gauge(out, descGroupPartitionsOmitted, float64(groups.Omitted))
}

// emitGroupPartitions writes one group's committed offsets and lags, and
// their sums per topic; it returns how many lags were unknown. The
// partitions come sorted by topic, so each topic's are one run.
func emitGroupPartitions(out chan<- prometheus.Metric, group frontend.ViewGroup) (unknown int) {
	partitions := group.Partitions
	for first := 0; first < len(partitions); {
		topic := partitions[first].Topic
		offsetSum, lagSum, lagKnown := int64(0), int64(0), false
		next := first
		for ; next < len(partitions) && partitions[next].Topic == topic; next++ {
			partition := partitions[next]
			labels := []string{group.ID, topic, partitionLabel(partition.Partition)}
			gauge(out, descGroupCurrentOffset, float64(partition.Committed), labels...)
			offsetSum += partition.Committed
			if partition.Lag < 0 {
				unknown++
				continue
			}
			gauge(out, descGroupLag, float64(partition.Lag), labels...)
			lagSum, lagKnown = lagSum+partition.Lag, true
		}
		gauge(out, descGroupCurrentOffsetSum, float64(offsetSum), group.ID, topic)
		if lagKnown {
			gauge(out, descGroupLagSum, float64(lagSum), group.ID, topic)
		}
		first = next
	}
	return unknown
}

// emitFetcherLag writes each follower partition's fetcher lag, labelled
// as Kafka labels its fetcher threads (ReplicaFetcherThread-0-<leader>),
// and the largest.
func emitFetcherLag(out chan<- prometheus.Metric, partitions []partitionSample) {
	maximum := int64(0)
	for _, p := range partitions {
		if p.leader || p.fetcherLag < 0 {
			continue
		}
		gauge(out, descFetcherLag, float64(p.fetcherLag), fmt.Sprintf("ReplicaFetcherThread-0-%d", p.leaderID), p.topic, partitionLabel(p.partition))
		maximum = max(maximum, p.fetcherLag)
	}
	gauge(out, descFetcherMaxLag, float64(maximum), "Replica")
}
