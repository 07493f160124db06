package group

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// logEntry is one record of the fake __consumer_offsets partition.
type logEntry struct {
	// coordinator counts the coordinators the harness has run: each
	// numbers its appends from 1.
	coordinator int
	append      AppendID
	record      Record
	committed   bool
}

// harness drives a coordinator as a host would: it writes appends to a
// fake log and reports them committed (or failed) when told, keeps the
// answers, and replays the committed log into a fresh coordinator.
type harness struct {
	t           testing.TB
	config      Config
	coordinator *Coordinator
	nowMs       int64
	nextRequest RequestID
	log         []logEntry
	inFlight    []AppendID
	answers     map[RequestID]kmsg.Response
	// coordinators counts the coordinators swapped in (failover).
	coordinators int
	// autoCommit reports every append committed as soon as it is handed
	// out.
	autoCommit bool
	// answerOrder and appendOrder list answers and appends as they came
	// out of Ready, for traces.
	answerOrder []RequestID
	appendOrder []Append
}

func newHarness(t testing.TB, config Config) *harness {
	h := &harness{t: t, config: config, nowMs: 1_000_000, answers: map[RequestID]kmsg.Response{}, autoCommit: true}
	h.coordinator = NewCoordinator(config, 0)
	h.coordinator.SetTopics(testTopics)
	h.coordinator.FinishLoad(h.nowMs)
	return h
}

// send hands a request to the coordinator and returns its id.
func (h *harness) send(request kmsg.Request) RequestID {
	h.nextRequest++
	h.coordinator.HandleFrom(h.nowMs, h.nextRequest, Client{ID: "client", Host: "/127.0.0.1"}, request)
	h.drain()
	h.checkInvariants()
	return h.nextRequest
}

// drain takes the coordinator's Ready, committing appends when autoCommit.
func (h *harness) drain() {
	for {
		ready := h.coordinator.Ready()
		for _, answer := range ready.Answers {
			if _, dup := h.answers[answer.Request]; dup {
				h.t.Fatalf("request %d answered twice", answer.Request)
			}
			if answer.Response.GetVersion() < 0 || answer.Response.GetVersion() > answer.Response.MaxVersion() {
				h.t.Fatalf("request %d answered at version %d", answer.Request, answer.Response.GetVersion())
			}
			answer.Response.AppendTo(nil) // every answer must encode at its version
			h.answers[answer.Request] = answer.Response
			h.answerOrder = append(h.answerOrder, answer.Request)
		}
		h.appendOrder = append(h.appendOrder, ready.Appends...)
		for _, write := range ready.Appends {
			for _, record := range write.Records {
				h.log = append(h.log, logEntry{coordinator: h.coordinators, append: write.ID, record: record})
			}
			h.inFlight = append(h.inFlight, write.ID)
		}
		if !h.autoCommit || len(h.inFlight) == 0 {
			if len(ready.Answers) == 0 && len(ready.Appends) == 0 {
				return
			}
			continue
		}
		h.commitAll()
	}
}

// commitAll reports every append in flight committed, in order.
func (h *harness) commitAll() {
	for len(h.inFlight) > 0 {
		id := h.inFlight[0]
		h.inFlight = h.inFlight[1:]
		h.markCommitted(id)
		h.coordinator.AppendDone(id, 0)
	}
	h.drain()
}

// markCommitted marks the records of an append of the current
// coordinator committed.
func (h *harness) markCommitted(id AppendID) {
	for i := range h.log {
		if h.log[i].coordinator == h.coordinators && h.log[i].append == id {
			h.log[i].committed = true
		}
	}
}

// failAll reports every append in flight failed; their records leave the
// log, as a truncation by the next leader would remove them.
func (h *harness) failAll(errorCode int16) {
	failed := map[AppendID]bool{}
	for _, id := range h.inFlight {
		failed[id] = true
	}
	kept := h.log[:0]
	for _, entry := range h.log {
		if entry.coordinator != h.coordinators || !failed[entry.append] {
			kept = append(kept, entry)
		}
	}
	h.log = kept
	ids := h.inFlight
	h.inFlight = nil
	for _, id := range ids {
		h.coordinator.AppendDone(id, errorCode)
	}
	h.drain()
}

// advance moves the clock and ticks.
func (h *harness) advance(ms int64) {
	h.nowMs += ms
	h.coordinator.Tick(h.nowMs)
	h.drain()
	h.checkInvariants()
}

func (h *harness) checkInvariants() {
	h.t.Helper()
	if err := h.coordinator.CheckInvariants(); err != nil {
		h.t.Fatal(err)
	}
}

// answer is the response to a request, failing the test if none came.
func (h *harness) answer(id RequestID) kmsg.Response {
	h.t.Helper()
	response, ok := h.answers[id]
	if !ok {
		h.t.Fatalf("request %d not answered", id)
	}
	return response
}

func (h *harness) answered(id RequestID) bool {
	_, ok := h.answers[id]
	return ok
}

// failover unloads the coordinator (it answers what it held
// NOT_COORDINATOR) and serves on with one that loads the committed log.
func (h *harness) failover() {
	h.coordinator.Unload()
	h.drain()
	h.coordinators++
	next := h.replayFor(false, uint64(h.coordinators))
	h.coordinator, h.inFlight = next, nil
}

// replay loads the committed records (or, with uncommitted, every record
// of the log, as a loader ignoring the high watermark would) into a fresh
// coordinator.
func (h *harness) replay(uncommitted bool) *Coordinator {
	h.t.Helper()
	return h.replayFor(uncommitted, 0)
}

// replayFor is replay for a coordinator of the given leadership (a new
// leader epoch at each failover, as the host passes it).
func (h *harness) replayFor(uncommitted bool, leadership uint64) *Coordinator {
	h.t.Helper()
	replayed := NewCoordinator(h.config, 0)
	replayed.SetLeadership(leadership)
	replayed.SetTopics(testTopics)
	for offset, entry := range h.log {
		if !entry.committed && !uncommitted {
			continue
		}
		if err := replayed.Load(int64(offset), entry.record); err != nil {
			h.t.Fatalf("load offset %d: %v", offset, err)
		}
	}
	replayed.FinishLoad(h.nowMs)
	return replayed
}

// describeDurable prints a coordinator's durable view: every group's
// metadata and committed offsets, sorted.
func describeDurable(c *Coordinator) string {
	var out strings.Builder
	for _, id := range sortedKeys(c.durable) {
		durable := c.durable[id]
		fmt.Fprintf(&out, "group %q\n", id)
		if metadata := durable.metadata; metadata != nil {
			fmt.Fprintf(&out, "  metadata type=%q generation=%d protocol=%q leader=%q\n", metadata.protocolType, metadata.generation, metadata.protocol, metadata.leader)
			for _, member := range metadata.members {
				fmt.Fprintf(&out, "    member %s instance=%q session=%d rebalance=%d subscription=%x assignment=%x\n", member.memberID,
					member.instanceID, member.sessionTimeoutMs, member.rebalanceTimeoutMs, member.subscription, member.assignment)
			}
		}
		for _, partition := range sortedPartitions(durable.offsets) {
			value := durable.offsets[partition]
			fmt.Fprintf(&out, "  offset %s/%d=%d epoch=%d metadata=%q\n", partition.topic, partition.partition, value.offset, value.leaderEpoch, value.metadata)
		}
		for _, recordType := range []int16{3, 4, 5, 6, 7, 8} {
			for _, key := range sortedConsumerKeys(durable.consumer, recordType) {
				fmt.Fprintf(&out, "  consumer record %d %q=%x\n", key.recordType, key.member, durable.consumer[key])
			}
		}
	}
	return out.String()
}

// describeLive prints the live groups: state, generation, protocol,
// leader and members.
func describeLive(c *Coordinator) string {
	var out strings.Builder
	for _, id := range sortedKeys(c.groups) {
		group := c.groups[id]
		fmt.Fprintf(&out, "group %q %s generation=%d protocol=%q leader=%q\n", id, group.state, group.generation, group.protocol, group.leader)
		ids := group.sortedMemberIDs()
		sort.Strings(ids)
		for _, memberID := range ids {
			fmt.Fprintf(&out, "  member %s assignment=%x\n", memberID, group.members[memberID].assignment)
		}
	}
	return out.String()
}

func stringPointer(value string) *string { return &value }

// testTopics are the metadata image of the tests' coordinators: topics t
// (3 partitions) and u (2).
var testTopics = map[string]TopicInfo{"t": {ID: [16]byte{1}, Partitions: 3}, "u": {ID: [16]byte{2}, Partitions: 2}}
