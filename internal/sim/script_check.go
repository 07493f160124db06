package sim

import (
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
)

// recoverTicks bounds the liveness phase of Script.Recover, as the healing
// budget does for a random run.
const recoverTicks = defaultHealTicks

// Partition is the script's partition as the controller has it.
func (s *Script) Partition() (metadata.PartitionState, bool) {
	if !s.topic {
		return metadata.PartitionState{}, false
	}
	return s.w.metadataImage().Partition(s.partition)
}

// BrokerViews is a broker's registration as the controller and every
// running broker have it: a change has reached the cluster when every view
// shows it.
func (s *Script) BrokerViews(id metadata.BrokerID) []metadata.BrokerState {
	state, _ := s.w.metadataImage().Broker(id)
	views := []metadata.BrokerState{state}
	for _, b := range s.w.brokers {
		if b.up && !b.paused && b.node != nil {
			state, _ := b.node.Image().Broker(id)
			views = append(views, state)
		}
	}
	return views
}

// Running reports whether a broker's process is up, registered and not
// paused.
func (s *Script) Running(id metadata.BrokerID) bool {
	b, err := s.broker(id)
	return err == nil && b.up && !b.paused && b.node != nil
}

// Offsets returns a running replica's high watermark, log end offset and
// the leader epoch it is in.
func (s *Script) Offsets(id metadata.BrokerID) (highWatermark, logEndOffset record.Offset, leaderEpoch record.LeaderEpoch, ok bool) {
	if !s.Running(id) || !s.topic {
		return 0, 0, 0, false
	}
	r, _, ok := s.w.broker(id).node.Replica(s.partition)
	if !ok {
		return 0, 0, 0, false
	}
	return r.HighWatermark(), r.LogEndOffset(), r.State().LeaderEpoch, true
}

// Leads reports whether a broker is running and its replica leads the
// controller's current leader epoch: the broker has heard of its election.
func (s *Script) Leads(id metadata.BrokerID) bool {
	state, ok := s.Partition()
	if !ok || !s.Running(id) {
		return false
	}
	r, _, hosted := s.w.broker(id).node.Replica(s.partition)
	return hosted && r.Role() == replica.Leader && r.State().LeaderEpoch == state.LeaderEpoch
}

// Applied reports whether a broker is running and its replica has applied
// the controller's current state of the partition (its partition epoch).
func (s *Script) Applied(id metadata.BrokerID) bool {
	state, ok := s.Partition()
	if !ok || !s.Running(id) {
		return false
	}
	r, _, hosted := s.w.broker(id).node.Replica(s.partition)
	return hosted && r.State().PartitionEpoch == state.PartitionEpoch
}

// PowerLosses counts the power losses the script caused.
func (s *Script) PowerLosses() int { return s.powerLosses }

// Answered reports whether every produce has had its answer.
func (s *Script) Answered() bool {
	for _, p := range s.produces {
		if !p.answered {
			return false
		}
	}
	return true
}

// Fail records a failure of the system under test that is not a script
// error, such as a broker's assertion panicking: the first one is the
// run's violation.
func (s *Script) Fail(cause any) {
	s.w.checker.fail(InvariantReplicaViolation, "panic: %v", cause)
}

// Check runs the checker's log checks now and returns the first violation
// of the run, or nil.
func (s *Script) Check() *Violation {
	s.w.checker.checkOneLeaderPerEpoch()
	s.w.checker.checkLogs(false)
	return s.w.checker.violation
}

// Recover is the liveness phase (invariant 6): every link released and
// healed, every broker running, every disk syncing, then the cluster must converge (a leader,
// the whole ISR at one log end, the high watermark there), take a new
// acks=all write, and hold every acknowledged write on every replica.
func (s *Script) Recover() *Violation {
	n := s.w.network
	s.w.shape.syncRate = 1 // a script's slow disks catch up too
	for l := range n.holding {
		n.release(l)
	}
	n.cut = map[link]bool{}
	for _, b := range s.w.machines {
		switch {
		case b.paused:
			s.w.resume(b)
		case !b.up:
			s.w.startMachine(b)
		}
	}
	if s.Check() != nil {
		return s.w.checker.violation
	}
	if _, ok := s.RunUntil(s.w.converged, recoverTicks); !ok {
		s.w.checker.fail(InvariantNoRecovery, "the cluster did not converge within %d ticks of healing: %s", recoverTicks, s.w.unconverged())
		return s.w.checker.violation
	}
	s.note("converged at tick %d", s.w.now)
	return s.checkWriteAfterRecovery()
}

func (s *Script) checkWriteAfterRecovery() *Violation {
	state, _ := s.Partition()
	if err := s.Produce(state.Leader, 1, replica.AcksAll); err != nil {
		panic(err)
	}
	written := &s.produces[len(s.produces)-1]
	if _, ok := s.RunUntil(func() bool { return written.answered }, recoverTicks); !ok || !written.acked {
		s.w.checker.fail(InvariantNoRecovery, "%s: a write after healing was not acknowledged", s.partition)
		return s.w.checker.violation
	}
	if _, ok := s.RunUntil(s.w.converged, recoverTicks); ok {
		s.w.checker.checkLogs(true)
	}
	return s.w.checker.violation
}
