// Package fetcher is the follower side of replication between brokers, as
// Kafka's ReplicaFetcherThread does it, with no I/O: a follower's replicas
// hand the broker fetches and OffsetsForLeaderEpoch requests addressed to
// their leaders (broker.Outbound), and the Fetcher turns them into real
// Kafka requests, one session per source broker, and turns the source's
// Kafka responses back into the replicas' answers.
//
// What it decides: how requests are batched per source (every partition
// that fetches from one source rides in one Fetch, with one Fetch in flight
// at a time, and the next waiting, at most MaxReadyWaitTicks, for the
// partitions the last answer served to ask again), the Kafka bytes of each request (Fetch v13 by topic id, or v12
// by name for a topic without one, with replica id, broker epoch, current
// leader epoch and last fetched epoch;
// OffsetForLeaderEpoch v3; ListOffsets v4 after OFFSET_OUT_OF_RANGE), how
// each response is read, and when a request is overdue (counted in ticks)
// and its connection given up.
//
// What it never touches: sockets, the clock, goroutines, the broker's
// state. A runtime (internal/server today; internal/sim does not run the
// fetcher yet, see docs/architecture.md, Status) keeps one connection per
// source that Sources names, reports it with Connected and Disconnected,
// writes what TakeOutbox says to send and closes what it says to close, and
// hands every response to Received. Answers for the replicas come back as
// values (Delivery) from the calls that produce them; the front end
// (internal/frontend) hands them to the broker.
package fetcher
