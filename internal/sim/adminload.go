package sim

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/metadata"
)

// workloadTopic is the topic the producers and consumers use; the admin
// workload's scratch topics come and go beside it.
const workloadTopic = "events"

// adminRate is the chance per tick that the admin client asks a broker
// something: what kafka-topics.sh, kafka-configs.sh and a client's
// metadata refresh do, so that every API tide serves runs in the
// simulator through the same front end as everything else.
const adminRate = 0.01

// adminStep maybe sends one admin request to a random broker: Metadata,
// DescribeConfigs of a broker or a topic, DescribeCluster, or a scratch
// topic's CreateTopics, DeleteRecords, AlterConfigs,
// IncrementalAlterConfigs or DeleteTopics (DeleteRecords and the config
// changes only
// on scratch topics, where nothing is produced: the checker holds every
// acknowledged record of the workload topic to stay readable). Answers are
// read (they must decode) and otherwise dropped: they decide nothing the
// checker follows.
// Each scratch topic has a new name, since a deleted topic's partition
// directories stay behind (topic ids are not yet kept).
func (w *world) adminStep() {
	if w.random.Float64() >= adminRate {
		return
	}
	to := metadata.BrokerID(1 + w.random.IntN(len(w.brokers)))
	var request kmsg.Request
	switch w.random.IntN(5) {
	case 0:
		metadataRequest := kmsg.NewPtrMetadataRequest()
		metadataRequest.Version = int16(w.random.IntN(13))
		if w.random.IntN(2) == 0 {
			topic := kmsg.NewMetadataRequestTopic()
			topic.Topic = kmsg.StringPtr(workloadTopic)
			metadataRequest.Topics = append(metadataRequest.Topics, topic)
		}
		request = metadataRequest
	case 1:
		describe := kmsg.NewPtrDescribeConfigsRequest()
		describe.Version = int16(1 + w.random.IntN(4))
		resource := kmsg.NewDescribeConfigsRequestResource()
		resource.ResourceType, resource.ResourceName = kmsg.ConfigResourceTypeTopic, workloadTopic
		if w.random.IntN(2) == 0 {
			resource.ResourceType, resource.ResourceName = kmsg.ConfigResourceTypeBroker, fmt.Sprint(to)
		}
		describe.Resources = append(describe.Resources, resource)
		request = describe
	case 2:
		// One draw picks DescribeCluster v0-v1 or DeleteRecords v0-v1 of
		// the newest scratch topic: two requests answered by the broker
		// alone, one message each way, so that adding DeleteRecords left
		// every other draw of every seed where it was (the legacy-rule
		// searches find their seeds where they did).
		choice := int16(w.random.IntN(4))
		if choice < 2 {
			cluster := kmsg.NewPtrDescribeClusterRequest()
			cluster.Version = choice
			request = cluster
			break
		}
		request = w.scratchRequest(fmt.Sprintf("scratch-%d", w.admin.scratch), choice-2)
	case 3:
		w.admin.scratch++
		create := kmsg.NewPtrCreateTopicsRequest()
		create.Version, create.TimeoutMillis = int16(2+w.random.IntN(6)), 5_000
		topic := kmsg.NewCreateTopicsRequestTopic()
		topic.Topic, topic.NumPartitions, topic.ReplicationFactor = fmt.Sprintf("scratch-%d", w.admin.scratch), 1, int16(min(2, len(w.brokers)))
		create.Topics = append(create.Topics, topic)
		request = create
	default:
		if w.admin.scratch == 0 {
			return
		}
		deletion := kmsg.NewPtrDeleteTopicsRequest()
		deletion.Version, deletion.TimeoutMillis = int16(1+w.random.IntN(6)), 5_000
		name := fmt.Sprintf("scratch-%d", w.admin.scratch)
		deletion.TopicNames = append(deletion.TopicNames, name)
		if deletion.Version >= 6 {
			topic := kmsg.NewDeleteTopicsRequestTopic()
			topic.Topic = kmsg.StringPtr(name)
			deletion.Topics = append(deletion.Topics, topic)
		}
		request = deletion
	}
	w.client(adminClient).send(to, request, func(kmsg.Response, bool) {})
}

// APIRequests counts, by API key, the Kafka requests brokers' front ends
// took in a run: what the simulator exercised of the protocol.
func (s Stats) APIRequests() map[int16]int { return s.apiRequests }

// deleteRecordsRequest asks to delete a scratch topic's records up to its
// high watermark (offset -1): nothing is produced there, so it moves
// nothing (and changes no state a later draw could see), but the request
// runs the whole path to the leader's replica.
func deleteRecordsRequest(topic string, version int16) kmsg.Request {
	request := kmsg.NewPtrDeleteRecordsRequest()
	request.Version, request.TimeoutMillis = version, 5_000
	requestTopic := kmsg.NewDeleteRecordsRequestTopic()
	requestTopic.Topic = topic
	partition := kmsg.NewDeleteRecordsRequestTopicPartition()
	partition.Partition, partition.Offset = 0, -1
	requestTopic.Partitions = append(requestTopic.Partitions, partition)
	request.Topics = append(request.Topics, requestTopic)
	return request
}

// scratchRequest is the scratch topic's DeleteRecords, AlterConfigs or
// IncrementalAlterConfigs, in turn. The draw that picked it keeps its
// place in every seed (the turn is a counter, not a draw); the config
// changes set or delete retention.ms of a topic nothing is produced to,
// so they change no record the checker follows.
func (w *world) scratchRequest(topic string, version int16) kmsg.Request {
	turn := w.admin.brokerOnly
	w.admin.brokerOnly++
	switch turn % 3 {
	case 1:
		alter := kmsg.NewPtrAlterConfigsRequest()
		alter.Version = version + int16(turn/3%2) // v0-v2
		resource := kmsg.NewAlterConfigsRequestResource()
		resource.ResourceType, resource.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		config := kmsg.NewAlterConfigsRequestResourceConfig()
		config.Name, config.Value = "retention.ms", kmsg.StringPtr("3600000")
		resource.Configs = append(resource.Configs, config)
		alter.Resources = append(alter.Resources, resource)
		return alter
	case 2:
		alter := kmsg.NewPtrIncrementalAlterConfigsRequest()
		alter.Version = version
		resource := kmsg.NewIncrementalAlterConfigsRequestResource()
		resource.ResourceType, resource.ResourceName = kmsg.ConfigResourceTypeTopic, topic
		config := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
		config.Name, config.Op, config.Value = "retention.ms", kmsg.IncrementalAlterConfigOpSet, kmsg.StringPtr("7200000")
		if turn/3%2 == 1 {
			config.Op, config.Value = kmsg.IncrementalAlterConfigOpDelete, nil
		}
		resource.Configs = append(resource.Configs, config)
		alter.Resources = append(alter.Resources, resource)
		return alter
	}
	return deleteRecordsRequest(topic, version)
}
