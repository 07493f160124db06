package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// An append refused before it reached the log (the broker's write backlog
// full: REQUEST_TIMED_OUT before the replica decides) whose report comes
// while an earlier append is still in flight must stop the coordinator's
// writes at once. Each consumer group append is a diff from the live
// state, which already counts the refused records: an append made after
// the refusal and before the coordinator unloads reaches the log without
// the records it was computed on. The simulator's seed 799 found it: a
// member's fencing (refused) was followed by a heartbeat that gave the
// fenced member's partition to another member (written and committed);
// the coordinator that loaded the log had the first member still in the
// group, owning the partition at its epoch, and accepted its heartbeat
// while the other member had been given the partition
// (partition-two-owners).
func TestConsumerGroupWritesNothingAfterARefusedAppend(t *testing.T) {
	h := newHarness(t, DefaultConfig())
	session := DefaultConfig().ConsumerSessionTimeoutMs
	epochs, owned := map[string]int32{}, map[string][]int32{"owner": {}, "next": {}}
	// beat heartbeats at the member's epoch with what it owns; a full one
	// (as a client sends after an error) is answered with its assignment.
	beat := func(member string, full bool) *kmsg.ConsumerGroupHeartbeatResponse {
		t.Helper()
		request := consumerBeat("g", member, epochs[member], owned[member])
		if full {
			request.RebalanceTimeoutMillis, request.SubscribedTopicNames = 30000, []string{"t"}
		}
		answer := h.answer(h.send(request)).(*kmsg.ConsumerGroupHeartbeatResponse)
		if answer.ErrorCode == 0 {
			epochs[member] = answer.MemberEpoch
			if answer.Assignment != nil {
				owned[member] = []int32{}
				for _, topic := range answer.Assignment.Topics {
					owned[member] = append(owned[member], topic.Partitions...)
				}
			}
		}
		return answer
	}
	expectBeat(t, h, consumerJoin("g", "owner", "t"), "epoch 1 assigned [0 1 2]")
	epochs["owner"], owned["owner"] = 1, []int32{0, 1, 2}
	h.send(consumerJoin("g", "dead", "u")) // joins and is never heard from again
	epochs["next"] = h.answer(h.send(consumerJoin("g", "next", "t"))).(*kmsg.ConsumerGroupHeartbeatResponse).MemberEpoch
	for i := 0; i < 4; i++ { // owner revokes what next is to get, next gets it
		beat("owner", false)
		beat("next", false)
	}
	if len(owned["owner"]) == 0 || len(owned["next"]) == 0 {
		t.Fatalf("the group did not settle: owner %v, next %v", owned["owner"], owned["next"])
	}
	h.advance(session / 2)
	beat("next", false)
	// dead's and owner's sessions end in one tick: two appends, dead's
	// removal then owner's.
	h.autoCommit = false
	h.advance(session/2 + 1)
	if len(h.inFlight) != 2 {
		t.Fatalf("%d appends in flight, want the two removals", len(h.inFlight))
	}
	refused := h.inFlight[1]
	kept := h.log[:0]
	for _, entry := range h.log {
		if entry.append != refused {
			kept = append(kept, entry)
		}
	}
	h.log, h.inFlight = kept, h.inFlight[:1]
	h.coordinator.AppendDone(refused, kerr.RequestTimedOut.Code)
	h.drain()
	// next heartbeats while the first removal is still in flight; whatever
	// this coordinator hands out now is written after the refused append.
	h.send(consumerBeat("g", "next", epochs["next"], owned["next"]))
	written := append([]AppendID(nil), h.inFlight...)
	h.inFlight = nil
	for _, id := range written {
		h.markCommitted(id)
	}
	for _, id := range written {
		h.coordinator.AppendDone(id, 0)
	}
	h.drain()
	if !h.coordinator.Unloaded() {
		t.Fatal("the coordinator serves on after an append whose records it had applied was refused")
	}
	// The host starts a coordinator that loads the committed log.
	h.coordinators++
	h.coordinator, h.autoCommit = h.replayFor(false, 1), true
	ownerHeld, ownerEpoch := append([]int32(nil), owned["owner"]...), epochs["owner"]
	if answer := beat("next", true); answer.ErrorCode != 0 {
		t.Fatalf("next's heartbeat to the loaded coordinator: %s", kerr.ErrorForCode(answer.ErrorCode))
	}
	given := map[int32]bool{}
	for _, partition := range owned["next"] {
		given[partition] = true
	}
	owner := beat("owner", false)
	for _, partition := range ownerHeld {
		if given[partition] && owner.ErrorCode == 0 {
			t.Fatalf("partition %d was given to next, and owner's heartbeat at epoch %d owning it was accepted (partition-two-owners): %s", partition, ownerEpoch, beatAnswer(owner))
		}
	}
}
