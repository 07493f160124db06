package server

import (
	"context"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/tidelog/tide/internal/console"
	"github.com/tidelog/tide/internal/frontend"
	"github.com/tidelog/tide/internal/metadata"
)

// consoleRateSamples is how many seconds of rates the console keeps.
const consoleRateSamples = 120

// HTTPAddr is the web console's address, or "" without one.
func (s *Server) HTTPAddr() string {
	if s.consoleListener == nil {
		return ""
	}
	return s.consoleListener.Addr().String()
}

// consoleHandler is the web console over this node, with a sampler of its
// request rates that runs until ctx ends.
func (s *Server) consoleHandler(ctx context.Context) http.Handler {
	source := &consoleSource{server: s}
	go source.sample(ctx)
	return console.Handler(source, int32(s.config.ID))
}

// consoleSource is console.Source over a running node.
type consoleSource struct {
	server *Server
	mu     sync.Mutex
	rates  []console.RateSample
}

func (c *consoleSource) Snapshot() (console.Snapshot, bool) {
	var snapshot console.Snapshot
	ok := c.server.onLoop(func() { snapshot = c.server.consoleSnapshot() }, metricsSnapshotTimeout)
	return snapshot, ok
}

func (c *consoleSource) Rates() []console.RateSample {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.rates)
}

// sample turns the request totals into per-second rates, once a second.
func (c *consoleSource) sample(ctx context.Context) {
	ticker := time.NewTicker(time.Second)
	defer ticker.Stop()
	totals := &c.server.metrics.totals
	read := func() [6]int64 {
		return [6]int64{totals.produceRequests.Load(), totals.produceBytes.Load(), totals.fetchRequests.Load(),
			totals.fetchBytes.Load(), totals.requests.Load(), totals.requestBytes.Load()}
	}
	last := read()
	for {
		select {
		case <-ctx.Done():
			return
		case now := <-ticker.C:
			current := read()
			sample := console.RateSample{At: now, ProduceRequests: float64(current[0] - last[0]), ProduceBytes: float64(current[1] - last[1]),
				FetchRequests: float64(current[2] - last[2]), FetchBytes: float64(current[3] - last[3]),
				RequestsOfAnyKind: float64(current[4] - last[4]), RequestsOfAnyBytes: float64(current[5] - last[5])}
			last = current
			c.mu.Lock()
			c.rates = append(c.rates, sample)
			if len(c.rates) > consoleRateSamples {
				c.rates = slices.Delete(c.rates, 0, len(c.rates)-consoleRateSamples)
			}
			c.mu.Unlock()
		}
	}
}

// consoleSnapshot is the front end's View as the console draws it, with
// this node's place in the metadata quorum; it runs on the node loop.
func (s *Server) consoleSnapshot() console.Snapshot {
	view := s.frontend.View()
	snapshot := console.Snapshot{NodeID: int32(s.config.ID), Voter: s.quorum != nil, Leader: -1, MetadataOffset: view.MetadataOffset}
	if s.quorum != nil {
		snapshot.Active, snapshot.Term, snapshot.Leader = s.quorum.Active(), s.quorum.Term(), int32(s.quorum.Leader())
	}
	for _, b := range view.Brokers {
		snapshot.Brokers = append(snapshot.Brokers, console.Broker{ID: int32(b.ID), Epoch: int64(b.Epoch), Endpoint: b.Endpoint,
			Fenced: b.Fenced, ShuttingDown: b.ShuttingDown})
	}
	for _, topic := range view.Topics {
		shown := console.Topic{Name: topic.Name}
		if topic.ID != metadata.NoTopicID {
			shown.ID = topic.ID.String()
		}
		for _, partition := range topic.Partitions {
			shown.Partitions = append(shown.Partitions, consolePartition(partition))
		}
		snapshot.Topics = append(snapshot.Topics, shown)
	}
	snapshot.Groups, snapshot.GroupsOmitted = consoleGroups(s.frontend.GroupsView(s.config.MetricsGroupPartitionsMax))
	return snapshot
}

// consoleGroups are the groups of the View as the console shows them.
func consoleGroups(view frontend.ViewGroups) ([]console.Group, int) {
	var groups []console.Group
	for _, group := range view.Groups {
		shown := console.Group{ID: group.ID, Type: group.Type, State: group.State, ProtocolType: group.ProtocolType, Protocol: group.Protocol}
		for _, member := range group.Members {
			shown.Members = append(shown.Members, console.GroupMember{ID: member.ID, ClientID: member.ClientID, ClientHost: member.ClientHost})
		}
		for _, partition := range group.Partitions {
			shown.Partitions = append(shown.Partitions, console.GroupPartition{Topic: partition.Topic, Partition: partition.Partition,
				Committed: partition.Committed, EndOffset: partition.EndOffset, Lag: partition.Lag, FromLeader: partition.FromLeader})
		}
		groups = append(groups, shown)
	}
	return groups, view.Omitted
}

// consolePartition is one partition of the View as the console draws it.
func consolePartition(partition frontend.ViewPartition) console.Partition {
	state := partition.State
	shown := console.Partition{Number: state.Partition, Leader: int32(state.Leader), LeaderEpoch: int32(state.LeaderEpoch),
		PartitionEpoch: int32(state.PartitionEpoch), Replicas: brokerIDs(state.Replicas), ISR: brokerIDs(state.ISR), ELR: brokerIDs(state.ELR)}
	if local := partition.Local; local != nil {
		shown.Local = &console.ReplicaOffsets{Role: local.Role.String(), LogStart: local.LogStart, HighWatermark: local.HighWatermark, LogEnd: local.LogEnd,
			FetcherLag: local.FetcherLag}
		if local.Followers != nil {
			shown.Followers = map[int32]int64{}
			for id, end := range local.Followers {
				shown.Followers[int32(id)] = end
			}
		}
	}
	return shown
}

func brokerIDs(ids []metadata.BrokerID) []int32 {
	out := make([]int32, len(ids))
	for i, id := range ids {
		out[i] = int32(id)
	}
	return out
}
