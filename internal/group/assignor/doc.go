// Package assignor holds the server-side partition assignors of the KIP-848
// consumer protocol, named as Kafka names them: "uniform" (Kafka's
// UniformAssignor, the default) and "range" (RangeAssignor). Given the
// members of a group (their subscribed topics and the target assignment
// they hold now) and the partition count of each topic, an assignor
// computes the group's next target assignment.
//
// It decides: which member a partition is assigned to, balancing the load
// and keeping each member's partitions where balance allows (stickiness),
// since every move costs a revocation round trip (package reconcile).
//
// It never touches: the clock, randomness, I/O, or the group's state; the
// output is a pure function of the Spec, so the coordinator, the
// simulator and a replay of __consumer_offsets compute the same target.
//
// Driven by: the group coordinator, when the group epoch passes the
// assignment epoch (Kafka's GroupMetadataManager.updateTargetAssignment).
// Rack awareness is not implemented: members' racks are ignored.
package assignor
