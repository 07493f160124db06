// Package reconcile is the KIP-848 member reconciliation state machine
// (Kafka's CurrentAssignmentBuilder and MemberState): on each heartbeat of
// a consumer-protocol member it moves the member's current assignment one
// step toward the group's target assignment, and says at which member
// epoch.
//
// It decides: the member's state (STABLE, UNREVOKED_PARTITIONS,
// UNRELEASED_PARTITIONS, UNKNOWN), its epoch, the partitions it may use
// now and those it must give up first; whether a heartbeat's member epoch
// is acceptable (FENCED_MEMBER_EPOCH otherwise); and which member owns
// each partition (Owners), so that a partition is given to a new owner
// only after its previous owner has reported it revoked (the rule
// revoke-before-assign, internal/rules).
//
// It never touches: the clock, I/O, the group's other state (group epoch,
// target assignment, timers), which the group coordinator keeps and passes
// in as values. The coordinator persists each new current assignment
// (ConsumerGroupCurrentMemberAssignment records) before answering the
// heartbeat with it.
//
// Driven by: the group coordinator, once per ConsumerGroupHeartbeat that
// passed validation (package consumerheartbeat) and epoch checks.
package reconcile
