package controller

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
)

// Decisions answer with Kafka error codes, taken from franz-go's kerr table
// (kerr.X.Code, an int16); 0 means no error. A Kafka failure is a code in
// the response; a Go error from a decision means a bug and closes the
// connection (or stops the controller). The codes the controller uses:
//
//   - UNKNOWN_TOPIC_OR_PARTITION (3): DeleteTopic, ElectPreferred and
//     AlterPartition name a topic or partition that does not exist.
//   - INVALID_TOPIC_EXCEPTION (17): CreateTopic with a name Kafka would
//     refuse.
//   - TOPIC_ALREADY_EXISTS (36): CreateTopic for a name that is taken.
//   - INVALID_PARTITIONS (37): CreateTopic with fewer than one partition or
//     more than MaxPartitionsPerTopic.
//   - INVALID_REPLICATION_FACTOR (38): CreateTopic with a replication factor
//     below one or above the number of brokers that may host a replica.
//   - INVALID_CONFIG (40): CreateTopic with min.insync.replicas below one or
//     above the replication factor, or with configs logconfig refuses;
//     AlterConfigs with such configs (see AlterConfigs).
//   - INVALID_REPLICA_ASSIGNMENT (39): explicit assignments of CreateTopic
//     or CreatePartitions, or a Reassign target, that are not the topic's
//     replication factor of distinct brokers (available ones, for new
//     partitions; registered ones, for a reassignment); a cancelled
//     reassignment whose ISR would be left empty.
//   - REASSIGNMENT_IN_PROGRESS (60): ElectPreferred of a partition being
//     reassigned.
//   - NOT_CONTROLLER (41): an AlterPartition carries a leader or partition
//     epoch newer than this controller's image, so this controller is behind
//     (it is probably no longer the active one); the leader should find the
//     real controller rather than wait for metadata it already has.
//   - INVALID_REQUEST (42): a malformed request; for AlterPartition, a
//     requester that is not the leader (as in Kafka's controller, not
//     NOT_LEADER_OR_FOLLOWER, which is the brokers' answer), a new ISR that
//     is not a set of replicas containing the leader, or a forbidden leader
//     recovery state (KIP-704); RegisterBroker with a negative id or no
//     incarnation; a request over MaxPartitionsPerRequest.
//   - FENCED_LEADER_EPOCH (74): an AlterPartition from a leader epoch that
//     has ended (KIP-320 semantics: the requester is stale).
//   - STALE_BROKER_EPOCH (77): Heartbeat, ControlledShutdown or
//     AlterPartition from a broker incarnation that is not the registered
//     one, or from a broker that is not registered at all (KIP-380, KIP-903;
//     Kafka's ClusterControlManager.checkBrokerEpoch).
//   - PREFERRED_LEADER_NOT_AVAILABLE (80): ElectPreferred when the preferred
//     replica is not an eligible ISR member.
//   - ELECTION_NOT_NEEDED (84): ElectPreferred when the preferred replica
//     already leads.
//   - INVALID_UPDATE_VERSION (95): an AlterPartition built on an older
//     partition epoch. This is the compare-and-set of KIP-497 failing.
//   - NO_REASSIGNMENT_IN_PROGRESS (85): a Reassign that cancels a
//     partition with no reassignment in progress.
//   - DUPLICATE_BROKER_REGISTRATION (101): RegisterBroker with a new
//     incarnation while the old one is still unfenced (its session is live).
//   - BROKER_ID_NOT_REGISTERED (102): UnregisterBroker for an unknown id.
//   - INELIGIBLE_REPLICA (107): an AlterPartition whose new ISR holds a
//     broker that is unregistered, fenced, shutting down, or of another
//     incarnation than the leader saw fetching (KIP-841, KIP-903).
//
// Not used yet: ELIGIBLE_LEADERS_NOT_AVAILABLE (83), the answer to an
// UNCLEAN ElectLeaders that finds no live replica (only PREFERRED elections
// are offered), and NEW_LEADER_ELECTED (108), Kafka's answer to an
// AlterPartition that completed a reassignment which moved leadership:
// tide answers NONE with the partition's state after the move, which the
// leader applies like metadata and so steps down at once.

// CodeName returns Kafka's name for a code, for logs and test output.
func CodeName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if err := kerr.TypedErrorForCode(code); err != nil && err.Code == code {
		return err.Message
	}
	return fmt.Sprintf("ERROR_%d", code)
}
