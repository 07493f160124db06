// Package controller decides what the metadata log should say: topic
// creation and deletion, broker registration, heartbeats, fencing and
// controlled shutdown, leader elections (clean, from the ISR or the ELR,
// and preferred), the ISR compare-and-set of AlterPartition, config
// changes (AlterConfigs, with the partition changes a change of
// min.insync.replicas or unclean.leader.election.enable brings), partition
// reassignments (KIP-455, reassign.go, completed by the AlterPartition that
// brings the last added replica into the ISR), and blocks of producer ids
// (KIP-730).
//
// It is pure. Every decision is a function of a read-only *metadata.Image
// and one event, and returns the records to append (plus the Kafka error
// code to answer with). Time comes in as ticks, iteration is sorted, and
// nothing here touches a clock, a socket, a file, a goroutine or the raft
// log; internal/lint holds it to that.
//
// Who drives it: the active controller of the metadata quorum
// (internal/quorum, decide.go), which decides against its speculative
// image and proposes the records to raft; the records reach every broker
// through the metadata log. The front end (internal/frontend) also runs
// CreateTopic against its broker's image for a CreateTopics with
// ValidateOnly, and keeps nothing it returns.
//
// Two rules bind the caller:
//
//   - Decide against the newest image: the one that already holds every
//     record this controller decided before, committed or not (KRaft's
//     controller does the same with its in-memory state). Two decisions
//     taken against the same image may conflict; the image then ignores the
//     second's stale partition changes, but its broker records could be
//     refused.
//   - Append a decision's records atomically and in the order returned. The
//     order matters: leadership and ISR membership move away from a broker
//     before the record that fences it or begins its controlled shutdown,
//     so no prefix of the log shows a fenced leader (KIP-841).
//
// Every record a decision returns has already been applied to a private
// copy of the image, so a decision that would break an invariant of
// metadata.Image fails with a Go error (a bug) instead of reaching the log.
package controller
