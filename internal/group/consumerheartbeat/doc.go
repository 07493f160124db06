// Package consumerheartbeat validates ConsumerGroupHeartbeat requests (API
// key 68, KIP-848) as Kafka's group coordinator does before it looks at
// the group (GroupCoordinatorService's
// throwIfConsumerGroupHeartbeatRequestIsInvalid): the member id, epoch,
// rebalance timeout, subscription and owned-partition rules of a join, a
// leave and a static member's temporary leave, and the server assignor
// name. A request it refuses gets Kafka's error code (INVALID_REQUEST,
// UNSUPPORTED_ASSIGNOR, INVALID_REGULAR_EXPRESSION) and message, and never
// reaches the group's state.
//
// It also converts between the wire's partitions by topic id and the
// assignments by topic name the assignors and reconcile work on: Owned
// (a request's TopicPartitions, nil when null) and Assignment (the
// answer's).
//
// It decides only whether a request is well-formed. It never touches the
// group, the clock or I/O. Driven by: the ConsumerGroupHeartbeat handler,
// on every request, before the coordinator (whose checks against the
// group, member epochs and fencing, are package reconcile's and the
// coordinator's).
package consumerheartbeat
