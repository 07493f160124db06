package sim

import (
	"fmt"
	"slices"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/replica"
	"github.com/tidelog/tide/internal/rules"
)

// logicalController is the simulator's stand-in for the metadata quorum: one
// controller that never fails, running the real controller decisions
// (internal/controller) and keeping the metadata log, which brokers fetch in
// order with their heartbeats. The replicated quorum replaces it later.
type logicalController struct {
	w     *world
	image *metadata.Image
	log   []metadata.Entry
	// lastHeartbeat is the tick of each broker's last heartbeat, for
	// fencing; registeredAt is the log offset of its registration, which it
	// must have applied before it is unfenced.
	lastHeartbeat map[metadata.BrokerID]int64
	registeredAt  map[metadata.BrokerID]int64
}

func newController(w *world) *logicalController {
	return &logicalController{w: w, image: metadata.NewImage(), lastHeartbeat: map[metadata.BrokerID]int64{}, registeredAt: map[metadata.BrokerID]int64{}}
}

func (c *logicalController) nextOffset() int64 { return int64(len(c.log)) }

// append adds records to the metadata log. A record the image refuses is a
// bug in the decisions: the run stops.
func (c *logicalController) append(records []metadata.Record) {
	for _, rec := range records {
		entry := metadata.Entry{Offset: c.nextOffset(), Record: rec}
		if _, err := c.image.Apply(entry); err != nil {
			panic(fmt.Sprintf("controller decided a record its image refuses: %v", err))
		}
		c.log = append(c.log, entry)
		c.w.trace("controller: %s", rec)
		if change, ok := rec.(metadata.PartitionChange); ok && !c.w.rules.On(rules.OrderedMetadata) {
			c.pushPartitionState(change.TopicPartition)
		}
	}
}

// pushPartitionState sends a partition's state to its replicas directly,
// unordered, as ZooKeeper-era controllers did: only with rule kafka-4414
// switched off.
func (c *logicalController) pushPartitionState(tp metadata.TopicPartition) {
	state, _ := c.image.Partition(tp)
	for _, id := range state.Replicas {
		copied := state.Clone()
		c.w.network.sendUnordered(&message{from: controllerAddress, to: brokerAddress(id), partitionState: &copied})
	}
}

// createTopic creates the workload's topic and reports whether it could:
// it needs enough unfenced brokers for its replication factor.
func (c *logicalController) createTopic(name string) bool {
	records, code, err := controller.CreateTopic(c.image, controller.CreateTopicRequest{
		Name: name, Partitions: c.w.shape.partitions, ReplicationFactor: c.w.shape.replicationFactor,
		Config: metadata.TopicConfig{MinInsyncReplicas: c.w.shape.minInsyncReplicas},
	})
	if err != nil {
		panic(fmt.Sprintf("create topic: %v", err))
	}
	if code != 0 {
		return false
	}
	c.append(records)
	return true
}

// createAssignedTopic creates a one-partition topic on the given replicas,
// in that order, for a script; it returns the controller's code.
func (c *logicalController) createAssignedTopic(name string, replicas []metadata.BrokerID, minInsyncReplicas int) int16 {
	records, code, err := controller.CreateTopic(c.image, controller.CreateTopicRequest{
		Name: name, Partitions: 1, ReplicationFactor: len(replicas),
		Config:      metadata.TopicConfig{MinInsyncReplicas: minInsyncReplicas},
		Assignments: [][]metadata.BrokerID{replicas},
	})
	if err != nil {
		panic(fmt.Sprintf("create topic: %v", err))
	}
	c.append(records)
	return code
}

// handle processes a message to the controller.
func (c *logicalController) handle(m *message) {
	id := metadata.BrokerID(m.from)
	switch {
	case m.register != nil:
		offset := c.nextOffset()
		records, epoch, code, err := controller.RegisterBroker(c.image, id, m.register.incarnation, m.register.previousEpoch, offset)
		if err != nil {
			panic(fmt.Sprintf("register broker %d: %v", id, err))
		}
		c.append(records)
		if code == 0 && len(records) > 0 {
			// A retried registration of the same incarnation gets its epoch
			// back and adds nothing: it must catch up to the first one.
			c.registeredAt[id] = offset
		}
		if code == 0 {
			c.lastHeartbeat[id] = c.w.now
		}
		c.w.network.send(&message{from: controllerAddress, to: m.from, registered: &registerAnswer{epoch: epoch, errorCode: code}})
	case m.heartbeat != nil:
		c.handleHeartbeat(id, m.heartbeat)
	case m.alterPartition != nil:
		c.handleAlterPartition(id, m.alterPartition)
	case m.allocateProducerIDs != nil:
		c.handleAllocateProducerIDs(id, m.allocateProducerIDs)
	}
}

func (c *logicalController) handleHeartbeat(id metadata.BrokerID, heartbeat *heartbeatRequest) {
	caughtUp := heartbeat.appliedOffset >= c.registeredAt[id]
	records, code, err := controller.Heartbeat(c.image, id, heartbeat.epoch, heartbeat.wantShutdown, caughtUp)
	if err != nil {
		panic(fmt.Sprintf("heartbeat of broker %d: %v", id, err))
	}
	if code == 0 {
		c.lastHeartbeat[id] = c.w.now
	}
	c.append(records)
	from := heartbeat.appliedOffset + 1
	var entries []metadata.Entry
	if from >= 0 && from < c.nextOffset() {
		entries = slices.Clone(c.log[from:min(c.nextOffset(), from+maxMetadataPerAnswer)])
	}
	c.w.network.send(&message{from: controllerAddress, to: brokerAddress(id), metadata: &heartbeatAnswer{entries: entries, errorCode: code}})
}

func (c *logicalController) handleAlterPartition(id metadata.BrokerID, request *alterRequest) {
	change := request.change
	item := controller.AlterPartitionItem{TopicPartition: change.Partition, LeaderEpoch: change.LeaderEpoch, PartitionEpoch: change.PartitionEpoch}
	for _, member := range change.NewISR {
		item.NewISR = append(item.NewISR, controller.BrokerIDAndEpoch{ID: member.ID, Epoch: member.Epoch})
	}
	records, response, err := controller.AlterPartition(c.image, controller.AlterPartitionRequest{BrokerID: id, BrokerEpoch: request.epoch, Partitions: []controller.AlterPartitionItem{item}})
	if err != nil {
		panic(fmt.Sprintf("alter partition from broker %d: %v", id, err))
	}
	c.append(records)
	answer := replica.AlterPartitionResponse{Request: change, ErrorCode: response.ErrorCode}
	if response.ErrorCode == 0 && len(response.Partitions) == 1 {
		result := response.Partitions[0]
		answer.ErrorCode = result.ErrorCode
		if result.ErrorCode == 0 {
			state := result.Partition.Clone()
			answer.State = &state
		}
	}
	c.w.network.send(&message{from: controllerAddress, to: brokerAddress(id), alterAnswer: &alterAnswer{partition: change.Partition, response: answer}})
}

// tick fences brokers whose session expired.
func (c *logicalController) tick() {
	records, err := controller.FenceExpired(c.image, c.lastHeartbeat, c.w.now, sessionTimeoutTicks)
	if err != nil {
		panic(fmt.Sprintf("fence expired: %v", err))
	}
	c.append(records)
}

// electPreferred runs a preferred leader election over every partition.
func (c *logicalController) electPreferred() controller.ElectLeadersResponse {
	records, response, err := controller.ElectPreferred(c.image, c.partitions())
	if err != nil {
		panic(fmt.Sprintf("preferred election: %v", err))
	}
	c.append(records)
	return response
}

func (c *logicalController) partitions() []metadata.TopicPartition {
	var list []metadata.TopicPartition
	for _, state := range c.image.Partitions() {
		list = append(list, state.TopicPartition)
	}
	return list
}
