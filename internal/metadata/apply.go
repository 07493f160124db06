package metadata

import (
	"errors"
	"fmt"
	"slices"
)

// Errors returned by Apply. Each means the log holds something the
// controller must never have written: the caller should stop applying (and
// crash, for the broker runtime) rather than continue from a state the log
// does not describe.
var (
	// ErrOutOfOrder: an entry's offset is not the one right after the last
	// applied. Skipping or reordering metadata is how KAFKA-4414 happened.
	ErrOutOfOrder = errors.New("metadata: entry out of order")
	// ErrUnknownBroker: a broker record names a broker that is not
	// registered.
	ErrUnknownBroker = errors.New("metadata: unknown broker")
	// ErrUnknownTopic: a record names a topic or partition that does not
	// exist.
	ErrUnknownTopic = errors.New("metadata: unknown topic or partition")
	// ErrTopicExists: CreateTopic for a name that is taken.
	ErrTopicExists = errors.New("metadata: topic already exists")
	// ErrInvariant: the record would break one of the Image invariants.
	ErrInvariant = errors.New("metadata: record breaks an invariant")
)

// Apply applies the entry at the next offset and reports whether it took
// effect.
//
// Entries must come strictly in order: entry.Offset must be Offset()+1, and
// anything else is ErrOutOfOrder, never a silent skip. A stale record is
// consumed (the offset advances) but ignored, with applied false and no
// error: a PartitionChange whose partition epoch is not newer than the one
// applied, or whose leader epoch is older (the ordered-metadata rule of KRaft
// against KAFKA-4414, applied at the image), a broker record whose epoch is
// older than the registered one (it speaks for an earlier incarnation), and a
// RegisterBroker whose epoch is not newer than the registered one. A
// record that names an unknown broker or topic, or that would break an
// invariant of Image, is an error and changes nothing, offset included.
func (img *Image) Apply(entry Entry) (applied bool, err error) {
	if entry.Offset != img.nextOffset {
		return false, fmt.Errorf("%w: entry at offset %d, expected %d", ErrOutOfOrder, entry.Offset, img.nextOffset)
	}
	applied, err = img.apply(entry.Record)
	if err != nil {
		return false, fmt.Errorf("offset %d: %v: %w", entry.Offset, entry.Record, err)
	}
	img.topicsByID = nil // rebuilt on demand, once the topics may have changed
	img.nextOffset++
	return applied, nil
}

func (img *Image) apply(r Record) (bool, error) {
	switch r := r.(type) {
	case RegisterBroker:
		return img.applyRegisterBroker(r)
	case UnfenceBroker:
		return img.applyBrokerChange(r.ID, r.Epoch, false, func(state *BrokerState) {
			state.Fenced = false
			state.ServedEpoch = state.Epoch
		})
	case FenceBroker:
		return img.applyBrokerChange(r.ID, r.Epoch, true, func(state *BrokerState) { state.Fenced = true })
	case BeginControlledShutdown:
		return img.applyBrokerChange(r.ID, r.Epoch, true, func(state *BrokerState) { state.ShuttingDown = true })
	case UnregisterBroker:
		applied, err := img.applyBrokerChange(r.ID, r.Epoch, true, func(*BrokerState) {})
		if applied {
			delete(img.brokers, r.ID)
		}
		return applied, err
	case CreateTopic:
		return img.applyCreateTopic(r)
	case DeleteTopic:
		if _, ok := img.topics[r.Name]; !ok {
			return false, fmt.Errorf("%w: %q", ErrUnknownTopic, r.Name)
		}
		delete(img.topics, r.Name)
		return true, nil
	case PartitionChange:
		return img.applyPartitionChange(r)
	case AssignTopicID:
		return img.applyAssignTopicID(r)
	case CreatePartitions:
		return img.applyCreatePartitions(r)
	case ProducerIDs:
		// Ids below NextProducerID were handed out; a record that does not
		// move it forward would hand some out again.
		if r.NextProducerID <= img.nextProducerID {
			return false, fmt.Errorf("%w: next producer id %d is not above %d", ErrInvariant, r.NextProducerID, img.nextProducerID)
		}
		img.nextProducerID = r.NextProducerID
		return true, nil
	case ConfigRecord:
		return img.applyConfig(r)
	case Reassignment:
		return img.applyReassignment(r)
	}
	return false, fmt.Errorf("%w: unknown record type %T", ErrInvariant, r)
}

func (img *Image) applyRegisterBroker(r RegisterBroker) (bool, error) {
	if r.ID < 0 || r.Epoch < 0 {
		return false, fmt.Errorf("%w: negative broker id or epoch", ErrInvariant)
	}
	existing, ok := img.brokers[r.ID]
	if ok && r.Epoch <= existing.state.Epoch {
		return false, nil
	}
	// The new registration starts fenced, so the old one must have left
	// every leadership and ISR first.
	if err := img.checkNotMember(r.ID); err != nil {
		return false, err
	}
	if img.brokers == nil {
		img.brokers = make(map[BrokerID]brokerRegistration)
	}
	served := NoBrokerEpoch
	if ok {
		served = existing.state.ServedEpoch
	}
	img.brokers[r.ID] = brokerRegistration{
		state:       BrokerState{ID: r.ID, Epoch: r.Epoch, Fenced: true, ServedEpoch: served},
		incarnation: r.Incarnation, endpoint: r.Endpoint,
	}
	return true, nil
}

// applyBrokerChange applies a record that changes a registered broker's
// state. leaving says the change makes the broker ineligible (fenced, shutting
// down, gone), which is allowed only once it leads nothing and is in no ISR.
func (img *Image) applyBrokerChange(id BrokerID, epoch BrokerEpoch, leaving bool, change func(*BrokerState)) (bool, error) {
	registration, ok := img.brokers[id]
	if !ok {
		return false, fmt.Errorf("%w: %d", ErrUnknownBroker, id)
	}
	if epoch < registration.state.Epoch {
		return false, nil
	}
	if epoch > registration.state.Epoch {
		return false, fmt.Errorf("%w: broker %d epoch %d is newer than the registered %d",
			ErrInvariant, id, epoch, registration.state.Epoch)
	}
	if leaving {
		if err := img.checkNotMember(id); err != nil {
			return false, err
		}
	}
	change(&registration.state)
	img.brokers[id] = registration
	return true, nil
}

// checkNotMember fails if broker leads a partition or is in an ISR.
func (img *Image) checkNotMember(broker BrokerID) error {
	for _, name := range img.Topics() {
		for _, partition := range img.topics[name].partitions {
			if partition.Leader == broker || partition.InISR(broker) {
				return fmt.Errorf("%w: broker %d still leads or is in the ISR of %s",
					ErrInvariant, broker, partition.TopicPartition)
			}
		}
	}
	return nil
}

func (img *Image) applyCreateTopic(r CreateTopic) (bool, error) {
	if r.Name == "" {
		return false, fmt.Errorf("%w: empty topic name", ErrInvariant)
	}
	if _, ok := img.topics[r.Name]; ok {
		return false, fmt.Errorf("%w: %q", ErrTopicExists, r.Name)
	}
	if err := img.checkNewTopicID(r.Name, r.ID, true); err != nil {
		return false, err
	}
	config := r.Config
	if config.ReplicationFactor < 1 || config.MinInsyncReplicas < 1 || config.MinInsyncReplicas > config.ReplicationFactor {
		return false, fmt.Errorf("%w: bad topic config %v", ErrInvariant, config)
	}
	if len(r.Partitions) == 0 {
		return false, fmt.Errorf("%w: topic %q has no partitions", ErrInvariant, r.Name)
	}
	partitions := make([]PartitionState, len(r.Partitions))
	for i, partition := range r.Partitions {
		if partition.Topic != r.Name || int(partition.Partition) != i {
			return false, fmt.Errorf("%w: partition %d of %q is named %s", ErrInvariant, i, r.Name, partition.TopicPartition)
		}
		if len(partition.Replicas) != config.ReplicationFactor {
			return false, fmt.Errorf("%w: %s has %d replicas, replication factor is %d",
				ErrInvariant, partition.TopicPartition, len(partition.Replicas), config.ReplicationFactor)
		}
		if err := img.validatePartition(partition, config); err != nil {
			return false, err
		}
		partitions[i] = partition.Clone()
	}
	if img.topics == nil {
		img.topics = make(map[string]*topicImage)
	}
	img.topics[r.Name] = &topicImage{id: r.ID, config: config, partitions: partitions}
	return true, nil
}

func (img *Image) applyPartitionChange(r PartitionChange) (bool, error) {
	topic, ok := img.topics[r.Topic]
	if !ok || r.Partition < 0 || int(r.Partition) >= len(topic.partitions) {
		return false, fmt.Errorf("%w: %s", ErrUnknownTopic, r.TopicPartition)
	}
	current := topic.partitions[r.Partition]
	if r.PartitionEpoch <= current.PartitionEpoch || r.LeaderEpoch < current.LeaderEpoch {
		return false, nil
	}
	next := PartitionState{
		TopicPartition:      r.TopicPartition,
		Replicas:            slices.Clone(current.Replicas),
		ISR:                 slices.Clone(r.ISR),
		ELR:                 slices.Clone(r.ELR),
		Leader:              r.Leader,
		LeaderEpoch:         r.LeaderEpoch,
		PartitionEpoch:      r.PartitionEpoch,
		LeaderRecoveryState: r.LeaderRecoveryState,
	}
	if r.Replicas != nil {
		next.Replicas = slices.Clone(r.Replicas)
	} else {
		// The assignment is unchanged, and so is the reassignment in
		// progress, if any; a new assignment ends it, and the
		// Reassignment record that follows states the next one.
		next.Adding, next.Removing = slices.Clone(current.Adding), slices.Clone(current.Removing)
	}
	if next.Leader != current.Leader && next.LeaderEpoch == current.LeaderEpoch {
		return false, fmt.Errorf("%w: %s: leader %d -> %d without a new leader epoch (two leaders in epoch %d)",
			ErrInvariant, r.TopicPartition, current.Leader, next.Leader, next.LeaderEpoch)
	}
	if err := img.validatePartition(next, effectiveConfig(topic, img.brokerDefaults)); err != nil {
		return false, err
	}
	topic.partitions[r.Partition] = next
	return true, nil
}

// validatePartition checks a partition state against the Image invariants.
func (img *Image) validatePartition(p PartitionState, config TopicConfig) error {
	if err := validatePartitionShape(p, config); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrInvariant, p.TopicPartition, err)
	}
	if p.Leader != NoBroker && !img.Active(p.Leader) {
		return fmt.Errorf("%w: %s: leader %d is not registered, unfenced and running",
			ErrInvariant, p.TopicPartition, p.Leader)
	}
	for _, member := range p.ISR {
		if !img.Active(member) {
			return fmt.Errorf("%w: %s: ISR member %d is not registered, unfenced and running",
				ErrInvariant, p.TopicPartition, member)
		}
	}
	return nil
}

// validatePartitionShape checks the invariants that need only the partition
// and its topic's config.
func validatePartitionShape(p PartitionState, config TopicConfig) error {
	switch {
	case len(p.Replicas) == 0:
		return errors.New("no replicas")
	case hasDuplicateOrNegative(p.Replicas):
		return fmt.Errorf("bad replicas %v", p.Replicas)
	case hasDuplicateOrNegative(p.ISR) || !isSubset(p.ISR, p.Replicas):
		return fmt.Errorf("ISR %v is not a set of replicas %v", p.ISR, p.Replicas)
	case hasDuplicateOrNegative(p.ELR) || !isSubset(p.ELR, p.Replicas):
		return fmt.Errorf("ELR %v is not a set of replicas %v", p.ELR, p.Replicas)
	case intersects(p.ISR, p.ELR):
		return fmt.Errorf("ISR %v and ELR %v overlap", p.ISR, p.ELR)
	case p.Leader != NoBroker && !p.InISR(p.Leader):
		return fmt.Errorf("leader %d is not in the ISR %v", p.Leader, p.ISR)
	case p.LeaderRecoveryState != Recovered && p.LeaderRecoveryState != Recovering:
		return fmt.Errorf("bad %v", p.LeaderRecoveryState)
	case p.LeaderRecoveryState == Recovering && len(p.ISR) > 1:
		return fmt.Errorf("recovering leader with ISR %v", p.ISR)
	case len(p.ISR) >= config.MinInsyncReplicas && len(p.ELR) > 0:
		return fmt.Errorf("ELR %v beside an ISR %v of at least min.insync.replicas=%d",
			p.ELR, p.ISR, config.MinInsyncReplicas)
	case p.LeaderEpoch < 0 || p.PartitionEpoch < 0:
		return errors.New("negative epoch")
	}
	return validateReassignmentShape(p)
}

func hasDuplicateOrNegative(ids []BrokerID) bool {
	for i, id := range ids {
		if id < 0 || slices.Contains(ids[:i], id) {
			return true
		}
	}
	return false
}

func isSubset(subset, set []BrokerID) bool {
	for _, id := range subset {
		if !slices.Contains(set, id) {
			return false
		}
	}
	return true
}

func intersects(a, b []BrokerID) bool {
	for _, id := range a {
		if slices.Contains(b, id) {
			return true
		}
	}
	return false
}
