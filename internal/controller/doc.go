// Package controller decides what the metadata log should say: topic
// creation and deletion, broker registration, fencing and controlled
// shutdown, leader elections and the ISR compare-and-set of AlterPartition.
//
// It is pure. Every decision is a function of a read-only *metadata.Image
// and one event, and returns the records to append (plus the Kafka error
// code to answer with). Time comes in as ticks, iteration is sorted, and
// nothing here touches a clock, a socket, a file or a goroutine; the
// replicated quorum that appends the records comes later, around it.
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
