// Package group is the consumer group coordinator of one
// __consumer_offsets partition: the classic protocol's JoinGroup,
// SyncGroup, Heartbeat, LeaveGroup, KIP-848's ConsumerGroupHeartbeat and
// ConsumerGroupDescribe, and OffsetCommit, OffsetFetch, DescribeGroups,
// ListGroups, DeleteGroups and OffsetDelete for the groups that hash to the
// partition (PartitionFor), with Kafka's states, timers and error codes
// (reference/kafka-groups.md), and the records of __consumer_offsets in
// Kafka's formats. Room is left beside it for TxnOffsetCommit.
//
// What it decides: every answer to those requests, every record written to
// the partition, and when: an OffsetCommit, a SyncGroup's assignment and
// every ConsumerGroupHeartbeat are answered only once the host reports
// their records committed (rule
// answer-after-commit), so an answered commit survives any coordinator
// change; and what a new coordinator rebuilds from the committed records.
//
// What it never touches: sockets, files, the clock, goroutines or
// randomness (member ids are drawn from the partition, the load and a
// counter). Time comes in as nowMs on each call; requests as kmsg values at
// the client's version; records as bytes.
//
// Who drives it: the front end's coordinator host, one Coordinator per
// offsets partition this broker leads, in both runtimes: Load the
// committed records (only those below the high watermark, rule
// load-committed-only), SetLeadership (the leader epoch), SetTopics (the
// metadata image's topics, again on every change), FinishLoad, then
// Handle/HandleFrom requests and Tick; after each call drain Ready, write
// each Append as one acks=all batch, and report it with AppendDone. Unload
// when the leadership goes. When Unloaded reports true after an
// AppendDone (an append whose fate only the log knows), replace the
// coordinator with a new one that loads the log. Overviews reads its groups
// and committed offsets for the metrics and the web console, under a row
// limit, and changes nothing.
package group
