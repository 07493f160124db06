package raftlog

import (
	"bytes"
	"fmt"
	"slices"

	"google.golang.org/protobuf/proto"

	pb "go.etcd.io/raft/v3/raftpb"
)

// crashModel is the state a Storage must hold after a sequence of writes:
// the simple thing the crash test checks recovered storages against.
type crashModel struct {
	hardState [3]uint64 // term, vote, commit
	// snapshot is the index, term and data of the latest snapshot.
	snapshotIndex, snapshotTerm uint64
	snapshotData                []byte
	// offset and offsetTerm are the compaction point: entries holds
	// offset+1, offset+2, ...
	offset, offsetTerm uint64
	entries            []*pb.Entry
}

func (m crashModel) clone() crashModel {
	m.entries = slices.Clone(m.entries)
	return m
}

func (m *crashModel) last() uint64 { return m.offset + uint64(len(m.entries)) }
func (m *crashModel) commit() uint64 {
	return m.hardState[2]
}

// term returns the term of entry i, for i in [offset, last].
func (m *crashModel) term(i uint64) uint64 {
	if i == m.offset {
		return m.offsetTerm
	}
	return m.entries[i-m.offset-1].GetTerm()
}

// entry returns entry i, or nil when the model does not hold it.
func (m *crashModel) entry(i uint64) *pb.Entry {
	if i <= m.offset || i > m.last() {
		return nil
	}
	return m.entries[i-m.offset-1]
}

func (m *crashModel) appendEntries(entries []*pb.Entry) {
	at := entries[0].GetIndex()
	m.entries = append(m.entries[:at-m.offset-1:at-m.offset-1], entries...)
}

func (m *crashModel) compact(i uint64) {
	m.offsetTerm = m.term(i)
	m.entries = slices.Clone(m.entries[i-m.offset:])
	m.offset = i
}

func (m *crashModel) createSnapshot(i uint64, data []byte) {
	m.snapshotIndex, m.snapshotTerm, m.snapshotData = i, m.term(i), data
}

func (m *crashModel) applySnapshot(index, term uint64, data []byte, hardState [3]uint64) {
	m.snapshotIndex, m.snapshotTerm, m.snapshotData = index, term, data
	m.offset, m.offsetTerm, m.entries = index, term, nil
	m.hardState = hardState
}

func (m *crashModel) String() string {
	return fmt.Sprintf("hs %v snapshot %d/%d log (%d/%d) %s", m.hardState, m.snapshotIndex, m.snapshotTerm, m.offset, m.offsetTerm, describeEntries(m.entries))
}

// modelOf reads a Storage back into a model.
func modelOf(s *Storage) (crashModel, error) {
	var m crashModel
	hs, _, err := s.InitialState()
	if err != nil {
		return m, err
	}
	m.hardState = hardStateValues(hs)
	snapshot, err := s.Snapshot()
	if err != nil {
		return m, err
	}
	m.snapshotIndex, m.snapshotTerm, m.snapshotData = snapshot.GetMetadata().GetIndex(), snapshot.GetMetadata().GetTerm(), snapshot.GetData()
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	m.offset = first - 1
	if m.offsetTerm, err = s.Term(m.offset); err != nil {
		return m, err
	}
	if last >= first {
		if m.entries, err = s.Entries(first, last+1, 1<<62); err != nil {
			return m, err
		}
	}
	return m, nil
}

// consistentWith returns why recovered cannot be a state the log reached
// on the way to x (nil if it can): it must not go past x's last index, and
// every entry it holds must be x's, or, below x's compaction point, the
// last one written at that index (history).
func (recovered *crashModel) consistentWith(x *crashModel, history map[uint64]*pb.Entry) error {
	if recovered.last() > x.last() {
		return fmt.Errorf("log ends at %d, past %d", recovered.last(), x.last())
	}
	for i := recovered.offset; i <= recovered.last(); i++ {
		written := history[i]
		wantTerm := written.GetTerm()
		switch {
		case i >= x.offset:
			wantTerm = x.term(i)
		case written == nil && i > 0:
			return fmt.Errorf("holds index %d, below %d, that was never written", i, x.offset)
		}
		if recovered.term(i) != wantTerm {
			return fmt.Errorf("term of %d is %d, want %d", i, recovered.term(i), wantTerm)
		}
		e := recovered.entry(i)
		switch {
		case e == nil:
		case x.entry(i) != nil:
			if !proto.Equal(e, x.entry(i)) {
				return fmt.Errorf("entry %d differs: %v, want %v", i, e, x.entry(i))
			}
		case written == nil || !bytes.Equal(e.GetData(), written.GetData()):
			return fmt.Errorf("entry %d differs from the one written: %q, want %q", i, e.GetData(), written.GetData())
		}
	}
	return nil
}
