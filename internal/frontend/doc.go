// Package frontend is one broker as a runtime drives it: the Kafka front end
// (wire's Backend over the broker node), the broker's lifecycle (its side
// of the controller protocol, internal/broker) and its replica fetchers
// (internal/fetcher), with no I/O.
//
// What it decides: everything between a Kafka request's bytes and the
// replicas. Produce completion (an acks=all answer waits in the replica
// until the high watermark passes the batch; the front end routes it back
// to its request), the fetch purgatory and every rule that wakes a parked
// fetch (min bytes, max wait, a change of a fetched partition: new records
// under the high watermark, a truncation, a lost leadership, a high
// watermark a follower has not yet been sent), ListOffsets,
// OffsetsForLeaderEpoch, InitProducerId, admin requests forwarded to the
// active controller (KIP-590) and answered once this broker's metadata
// shows the change, the creation of topics a Metadata request named
// (auto.create.topics.enable, once per name at a time, bounded by
// MaxAutoCreatesInFlight), the refusal of follower fetches without a
// broker epoch (KIP-903), and the hosting of the consumer groups'
// coordinators (groups.go): one internal/group.Coordinator per
// __consumer_offsets partition this broker leads, loaded from the
// partition's committed records in bounded slices, its appends written as
// acks=all batches through the local leader replica and reported back when
// committed, unloaded when the leadership moves, and answering only while
// the broker holds its controller-session lease (rule coordinator-lease);
// the creation of __consumer_offsets at the first FindCoordinator.
//
// What it never touches: sockets, the clock, files (the broker's logs sit
// behind disk.FS), goroutines, randomness of its own. Time comes in as
// Tick, the runtime's clocks as values (SetClock, SetMonotonicClock);
// Kafka requests as bytes (HandleKafka), answered through the done
// callback wire gives every request; controller answers as values; the
// fetchers' connections as events. What it has for the outside leaves in
// Flush's Outbox: requests for controllers, bytes for the fetchers'
// connections, connections to close.
//
// Who drives it: a runtime, from its one loop: internal/server (sockets,
// the real clock and disk) and internal/sim (simulated connections, a
// virtual clock, memfs), with the same calls in the same order. A request
// travels runtime -> wire -> front end -> broker -> replica and its answer
// comes back as a value; a pass of the runtime's loop ends with
// broker.Node.TakeSyncs (sync jobs the runtime runs off its loop, whose
// outcomes come back as inputs: broker.Node.Synced) and then Flush.
package frontend
