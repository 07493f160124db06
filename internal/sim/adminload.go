package sim

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
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
// DescribeConfigs of a broker or a topic, DescribeCluster,
// DescribeLogDirs, or a scratch topic's CreateTopics, CreatePartitions,
// DeleteRecords, AlterConfigs, IncrementalAlterConfigs or DeleteTopics
// (DeleteRecords and the config changes only
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
		metadataRequest.AllowAutoTopicCreation = false
		switch {
		case w.random.IntN(2) == 0:
			topic := kmsg.NewMetadataRequestTopic()
			topic.Topic = kmsg.StringPtr(workloadTopic)
			metadataRequest.Topics = append(metadataRequest.Topics, topic)
		case metadataRequest.Version >= 4:
			// A producer's first Metadata for a topic that does not exist
			// (auto.create.topics.enable): a new scratch topic, created
			// through the front end's controller forwarding.
			w.admin.scratch++
			name := fmt.Sprintf("scratch-%d", w.admin.scratch)
			topic := kmsg.NewMetadataRequestTopic()
			topic.Topic = kmsg.StringPtr(name)
			metadataRequest.Topics, metadataRequest.AllowAutoTopicCreation = append(metadataRequest.Topics, topic), true
			w.client(adminClient).send(to, metadataRequest, func(response kmsg.Response, ok bool) {
				if metadataResponse, decoded := response.(*kmsg.MetadataResponse); ok && decoded && len(metadataResponse.Topics) == 1 &&
					metadataResponse.Topics[0].ErrorCode == kerr.LeaderNotAvailable.Code {
					w.stats.autoCreates++
				}
			})
			return
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
		// One draw picks DescribeCluster v0-v1, DeleteRecords,
		// AlterConfigs or IncrementalAlterConfigs of the newest scratch
		// topic (scratchRequest), DescribeLogDirs, or CreatePartitions
		// of the newest scratch topic: requests of one message each way
		// (CreatePartitions forwarded once to the controller), with their
		// versions taken from the tick rather than another draw, so that
		// adding one leaves every other draw of every seed where it was.
		choice := int16(w.random.IntN(8))
		switch {
		case choice < 2:
			cluster := kmsg.NewPtrDescribeClusterRequest()
			cluster.Version = choice
			request = cluster
		case choice < 4:
			request = w.scratchRequest(fmt.Sprintf("scratch-%d", w.admin.scratch), choice-2)
		case choice < 6:
			request = describeLogDirsRequest(int16(1+w.now%4), choice == 5)
		default:
			request = w.createPartitionsRequest(int16(w.now % 4))
		}
	case 3:
		w.admin.scratch++
		create := kmsg.NewPtrCreateTopicsRequest()
		create.Version, create.TimeoutMillis = int16(2+w.random.IntN(6)), 5_000
		topic := kmsg.NewCreateTopicsRequestTopic()
		topic.Topic, topic.NumPartitions, topic.ReplicationFactor = fmt.Sprintf("scratch-%d", w.admin.scratch), 1, int16(min(2, len(w.brokers)))
		w.admin.scratchPartitions = 1
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

// AutoCreates counts the Metadata requests of the admin workload that named
// a new topic and were answered LEADER_NOT_AVAILABLE: the topic is being
// created (auto.create.topics.enable).
func (s Stats) AutoCreates() int { return s.autoCreates }

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

// maxScratchPartitions bounds how far the admin workload grows a scratch
// topic; past it, its CreatePartitions asks for no increase and is refused
// (INVALID_PARTITIONS), which runs that path too.
const maxScratchPartitions = 6

// createPartitionsRequest grows the newest scratch topic by one partition
// (KIP-195), every fifth tick as ValidateOnly: the new partitions open on
// their brokers and replicate, under the workload's load and faults, with
// every invariant checked on them as on the others. Before the first
// scratch topic, the request names one that does not exist.
func (w *world) createPartitionsRequest(version int16) kmsg.Request {
	request := kmsg.NewPtrCreatePartitionsRequest()
	request.Version, request.TimeoutMillis, request.ValidateOnly = version, 5_000, w.now%5 == 0
	topic := kmsg.NewCreatePartitionsRequestTopic()
	topic.Topic = fmt.Sprintf("scratch-%d", w.admin.scratch)
	if !request.ValidateOnly && w.admin.scratchPartitions < maxScratchPartitions {
		w.admin.scratchPartitions++
	}
	topic.Count = int32(max(w.admin.scratchPartitions, 1))
	request.Topics = append(request.Topics, topic)
	return request
}

// describeLogDirsRequest asks for every partition's log, or (named) for
// the workload topic's first partition: on a broker that does not hold
// it, the answer names none.
func describeLogDirsRequest(version int16, named bool) kmsg.Request {
	request := kmsg.NewPtrDescribeLogDirsRequest()
	request.Version = version
	if named {
		topic := kmsg.NewDescribeLogDirsRequestTopic()
		topic.Topic, topic.Partitions = workloadTopic, []int32{0}
		request.Topics = append(request.Topics, topic)
	}
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
