package raftlog

import (
	"bytes"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	pb "go.etcd.io/raft/v3/raftpb"
)

// checkRecovered returns why recovered is not a state a crash between
// durable (D) and next (N) may leave; see TestCrashRecovery.
func (r *crashRun) checkRecovered(recovered, durable, next *crashModel) error {
	if hs := recovered.hardState; hs != durable.hardState && hs != next.hardState {
		return fmt.Errorf("hard state %v is neither the durable %v nor the next %v", hs, durable.hardState, next.hardState)
	}
	if hs, old := recovered.hardState, durable.hardState; hs[0] < old[0] || hs[2] < old[2] || (hs[0] == old[0] && old[1] != 0 && hs[1] != old[1]) {
		return fmt.Errorf("hard state went backwards: %v after %v", hs, old)
	}
	if !sameSnapshot(recovered, durable) && !sameSnapshot(recovered, next) {
		return fmt.Errorf("snapshot %d/%d is neither the durable %d/%d nor the next %d/%d", recovered.snapshotIndex, recovered.snapshotTerm,
			durable.snapshotIndex, durable.snapshotTerm, next.snapshotIndex, next.snapshotTerm)
	}
	if recovered.offset > recovered.snapshotIndex {
		return fmt.Errorf("log starts after %d, the snapshot is at %d", recovered.offset, recovered.snapshotIndex)
	}
	errDurable := recovered.consistentWith(durable, r.history)
	errNext := recovered.consistentWith(next, r.history)
	if errDurable != nil && errNext != nil {
		return fmt.Errorf("log is a prefix of neither the durable log (%v) nor the next one (%v)", errDurable, errNext)
	}
	for i := durable.offset + 1; i <= durable.last(); i++ {
		kept := next.entry(i) != nil && proto.Equal(next.entry(i), durable.entry(i))
		if kept && i > recovered.last() {
			return fmt.Errorf("durably saved entry %d is lost: the log ends at %d", i, recovered.last())
		}
	}
	return nil
}

func sameSnapshot(a, b *crashModel) bool {
	return a.snapshotIndex == b.snapshotIndex && a.snapshotTerm == b.snapshotTerm && bytes.Equal(a.snapshotData, b.snapshotData)
}

// nextOperation draws the next write, valid for the model as raft would
// make it.
func (r *crashRun) nextOperation() crashOperation {
	m := &r.model
	switch choice := r.random.IntN(100); {
	case choice < 60:
		return r.saveReady()
	case choice < 72 && m.commit() > m.snapshotIndex:
		i := m.snapshotIndex + 1 + r.random.Uint64N(m.commit()-m.snapshotIndex)
		data := fmt.Appendf(nil, "image at %d: %s", i, strings.Repeat("m", r.random.IntN(300)))
		return crashOperation{
			describe: fmt.Sprintf("create snapshot %d", i),
			apply:    func(m *crashModel) { m.createSnapshot(i, data) },
			run: func(s *Storage) error {
				_, err := s.CreateSnapshot(i, &pb.ConfState{Voters: []uint64{1, 2, 3}}, data)
				return err
			},
		}
	case choice < 85 && m.snapshotIndex > m.offset:
		i := m.offset + 1 + r.random.Uint64N(m.snapshotIndex-m.offset)
		return crashOperation{
			describe: fmt.Sprintf("compact %d", i),
			apply:    func(m *crashModel) { m.compact(i) },
			run:      func(s *Storage) error { return s.Compact(i) },
		}
	case choice < 92:
		return r.applySnapshot()
	}
	return r.saveReady()
}

// saveReady is what one Ready asks to persist: maybe entries (appended at
// the end, or overwriting an uncommitted suffix) and a hard state.
func (r *crashRun) saveReady() crashOperation {
	m := &r.model
	var entries []*pb.Entry
	lowest := max(m.commit(), m.snapshotIndex) + 1
	if r.random.IntN(5) > 0 && lowest <= m.last()+1 {
		at := m.last() + 1
		if r.random.IntN(3) == 0 {
			at = lowest + r.random.Uint64N(m.last()+2-lowest)
		}
		term := max(m.term(at-1), m.hardState[0])
		for i := range 1 + r.random.IntN(10) {
			if r.random.IntN(6) == 0 {
				term++
			}
			// The write number makes every written entry unique, so that
			// an entry rewritten with the same index and term is told
			// apart from the one it replaces.
			r.writes++
			data := fmt.Sprintf("%d.%d.%d:%s", at+uint64(i), term, r.writes, strings.Repeat("e", r.random.IntN(250)))
			entries = append(entries, newEntry(at+uint64(i), term, data))
		}
	}
	for _, entry := range entries {
		r.history[entry.GetIndex()] = entry
	}
	hardState := r.nextHardState(entries)
	describe := fmt.Sprintf("save hs %v entries %s", hardStateValues(hardState), describeEntries(entries))
	return crashOperation{
		describe: describe,
		apply: func(m *crashModel) {
			if len(entries) > 0 {
				m.appendEntries(entries)
			}
			m.hardState = hardStateValues(hardState)
		},
		run: func(s *Storage) error { return s.Save(hardState, entries, nil) },
	}
}

// nextHardState draws a hard state that may follow the model's once
// entries are appended: the term covers the entries', the vote changes only
// with the term, the commit moves forward within the new log.
func (r *crashRun) nextHardState(entries []*pb.Entry) *pb.HardState {
	m := &r.model
	term, vote, commit := m.hardState[0], m.hardState[1], m.hardState[2]
	last := m.last()
	if len(entries) > 0 {
		last = entries[len(entries)-1].GetIndex()
		if t := entries[len(entries)-1].GetTerm(); t > term {
			term, vote = t, 0
		}
	}
	if r.random.IntN(6) == 0 {
		term, vote = term+1, 0
	}
	if vote == 0 && r.random.IntN(2) == 0 {
		vote = 1 + r.random.Uint64N(3)
	}
	commit += r.random.Uint64N(last - commit + 1)
	return newHardState(term, vote, commit)
}

// applySnapshot is a Ready carrying a snapshot from the leader, with the
// hard state that commits it.
func (r *crashRun) applySnapshot() crashOperation {
	m := &r.model
	index := max(m.snapshotIndex, m.commit()) + 1 + r.random.Uint64N(12)
	term := max(m.term(m.last()), m.hardState[0]) + r.random.Uint64N(2)
	data := fmt.Appendf(nil, "leader image at %d: %s", index, strings.Repeat("l", r.random.IntN(400)))
	snapshot := &pb.Snapshot{Data: data, Metadata: &pb.SnapshotMetadata{Index: new(index), Term: new(term), ConfState: &pb.ConfState{Voters: []uint64{1, 2, 3}}}}
	hardState := [3]uint64{term, m.hardState[1], index}
	if term != m.hardState[0] {
		hardState[1] = 0
	}
	for i := range r.history {
		if i >= index {
			delete(r.history, i)
		}
	}
	r.history[index] = newEntry(index, term, "")
	return crashOperation{
		describe: fmt.Sprintf("apply snapshot %d/%d with hs %v", index, term, hardState),
		apply:    func(m *crashModel) { m.applySnapshot(index, term, data, hardState) },
		run: func(s *Storage) error {
			return s.Save(newHardState(hardState[0], hardState[1], hardState[2]), nil, snapshot)
		},
	}
}
