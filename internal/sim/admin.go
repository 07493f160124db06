package sim

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
)

// adminState is the simulator's admin client: it sends its requests to
// the active controller (or, with none, to nobody: it asks again later)
// and keeps the answers.
type adminState struct {
	nextID  uint64
	answers map[uint64]quorum.Answer
	// scratch numbers the admin workload's scratch topics.
	scratch int
	// scratchPartitions is the partition count the admin workload last
	// asked the newest scratch topic to grow to (1 when created).
	scratchPartitions int
	// brokerOnly counts the draws of broker-answered scratch requests,
	// rotating them among DeleteRecords, AlterConfigs and
	// IncrementalAlterConfigs without a random draw of their own.
	brokerOnly int
}

// adminRequest sends a request to the active controller and returns its
// id, or 0 when no controller is active.
func (w *world) adminRequest(request quorum.Request) uint64 {
	c := w.activeController()
	if c == nil {
		return 0
	}
	w.admin.nextID++
	request.ID, request.From = w.admin.nextID, adminID
	var err error
	w.withRaft(func() { err = c.q.HandleRequest(request) })
	if err != nil {
		panic(err)
	}
	w.carryOut(c)
	return request.ID
}

func (w *world) adminAnswered(answer quorum.Answer) {
	if w.admin.answers == nil {
		w.admin.answers = map[uint64]quorum.Answer{}
	}
	w.admin.answers[answer.ID] = answer
}

// adminAnswer takes the answer to a request, if it came.
func (w *world) adminAnswer(id uint64) (quorum.Answer, bool) {
	answer, ok := w.admin.answers[id]
	delete(w.admin.answers, id)
	return answer, ok
}

// adminClient is the address of the random runs' admin client, which
// speaks Kafka to a broker like kafka-topics.sh does.
var adminClient = clientAddress(1 << 16)

// topicCreator creates the workload's topic with CreateTopics through a
// broker, which forwards it to the active controller (KIP-590) and answers
// once its own metadata shows the topic: it asks until a broker says the
// topic exists (it needs enough unfenced brokers for its replication
// factor, and an active controller).
type topicCreator struct {
	pending bool
	askedAt int64
	created bool
}

func (w *world) createTopicStep(t *topicCreator) bool {
	if t.created {
		return true
	}
	if t.pending && w.now-t.askedAt < controllerRequestTicks*5 {
		return false
	}
	t.askedAt, t.pending = w.now, true
	request := kmsg.NewPtrCreateTopicsRequest()
	request.Version, request.TimeoutMillis = int16(2+w.random.IntN(6)), int32(controllerRequestTicks*5*10)
	topic := kmsg.NewCreateTopicsRequestTopic()
	topic.Topic, topic.NumPartitions, topic.ReplicationFactor = workloadTopic, int32(w.shape.partitions), int16(w.shape.replicationFactor)
	config := kmsg.NewCreateTopicsRequestTopicConfig()
	config.Name, config.Value = "min.insync.replicas", kmsg.StringPtr(fmt.Sprint(w.shape.minInsyncReplicas))
	topic.Configs = append(topic.Configs, config)
	request.Topics = append(request.Topics, topic)
	asked := t.askedAt
	to := metadata.BrokerID(1 + w.random.IntN(len(w.brokers)))
	w.client(adminClient).send(to, request, func(response kmsg.Response, ok bool) {
		if asked != t.askedAt {
			return // a newer request is out
		}
		t.pending = false
		if !ok {
			return
		}
		topics := response.(*kmsg.CreateTopicsResponse).Topics
		if len(topics) == 1 && (topics[0].ErrorCode == 0 || topics[0].ErrorCode == kerr.TopicAlreadyExists.Code) {
			t.created = true
		}
	})
	return false
}

// electPreferred asks a broker for a preferred leader election over every
// partition (ElectLeaders with null topics), without waiting for the
// answer.
func (w *world) electPreferred() {
	request := kmsg.NewPtrElectLeadersRequest()
	request.Version, request.TimeoutMillis = int16(w.random.IntN(3)), 30_000
	to := metadata.BrokerID(1 + w.random.IntN(len(w.brokers)))
	w.client(adminClient).send(to, request, func(kmsg.Response, bool) {})
}

// workloadPartitions are the states of the workload topic's partitions in
// the newest committed metadata: the composed faults aim at them, where
// the producers and consumers are, not at the admin workload's scratch
// topics.
func (w *world) workloadPartitions() []metadata.PartitionState {
	var list []metadata.PartitionState
	for _, state := range w.metadataImage().Partitions() {
		if state.Topic == workloadTopic {
			list = append(list, state)
		}
	}
	return list
}

// partitions lists the workload topic's partitions in the newest
// committed metadata.
// Callers must not change the list.
func (w *world) partitions() []metadata.TopicPartition {
	image := w.metadataImage()
	if w.workloadList != nil {
		return w.workloadList
	}
	list := []metadata.TopicPartition{}
	for _, state := range image.Partitions() {
		if state.Topic == workloadTopic {
			list = append(list, state.TopicPartition)
		}
	}
	w.workloadList = list
	return list
}
