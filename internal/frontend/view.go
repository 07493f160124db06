package frontend

import (
	"slices"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/replica"
)

// View is one broker's state as an operator reads it: its metadata, and
// for each partition the offsets of the replica it hosts and, where it
// leads, its followers' log end offsets. It is read in one pass on the
// node loop; the runtime renders it as metrics, the web console's pages
// and the status frame, so each of those reads the cores the same way.
type View struct {
	// MetadataOffset is the last metadata offset this broker applied, -1
	// before it has a node.
	MetadataOffset int64
	// Fenced says the controller holds this broker fenced (or registered a
	// newer incarnation of it).
	Fenced bool
	// Brokers are the registered brokers, in id order, each with its Kafka
	// endpoint.
	Brokers []ViewBroker
	// Topics are the topics in name order, their partitions in order.
	Topics []ViewTopic
	// FetchErrors count the partition errors this broker's fetchers got
	// from leaders, by Kafka error name.
	FetchErrors map[string]int64
}

// ViewBroker is one registered broker.
type ViewBroker struct {
	metadata.BrokerState
	Endpoint string
}

// ViewTopic is one topic.
type ViewTopic struct {
	Name       string
	ID         metadata.TopicID
	Partitions []ViewPartition
}

// ViewPartition is one partition as the metadata has it, with its topic's
// min.insync.replicas and this broker's replica, if it hosts one.
type ViewPartition struct {
	State     metadata.PartitionState
	MinInsync int
	Local     *ViewReplica
}

// ViewReplica is a hosted replica's role, the leader epoch it has applied
// (a moment behind the metadata's at a leader change) and its offsets;
// Followers, on the leader, the followers' log end offsets as they last
// fetched; FetcherLag, on a follower, how far its log end is behind the
// high watermark of its leader's last fetch answer (replica.FetcherLag),
// -1 elsewhere or before the first answer.
type ViewReplica struct {
	Role                            replica.Role
	LeaderEpoch                     int32
	LogStart, HighWatermark, LogEnd int64
	Followers                       map[metadata.BrokerID]int64
	FetcherLag                      int64
}

// View reads the broker; it runs on the node loop.
func (fe *FrontEnd) View() View {
	view := View{MetadataOffset: -1, FetchErrors: fe.FetchErrors()}
	node := fe.Node()
	if node == nil {
		return view
	}
	img := node.Image()
	view.MetadataOffset = img.Offset()
	if state, ok := img.Broker(node.ID()); ok {
		view.Fenced = state.Fenced || state.Epoch != fe.lifecycle.Epoch()
	}
	for _, b := range img.Brokers() {
		view.Brokers = append(view.Brokers, ViewBroker{BrokerState: b, Endpoint: img.Endpoint(b.ID)})
	}
	partitions := map[string][]metadata.PartitionState{}
	for _, p := range img.Partitions() {
		partitions[p.Topic] = append(partitions[p.Topic], p)
	}
	for _, name := range img.Topics() {
		topic := ViewTopic{Name: name}
		topic.ID, _ = img.TopicID(name)
		minInsync := 1
		if config, ok := img.TopicConfig(name); ok {
			minInsync = config.MinInsyncReplicas
		}
		states := partitions[name]
		slices.SortFunc(states, func(a, b metadata.PartitionState) int { return int(a.Partition - b.Partition) })
		for _, state := range states {
			topic.Partitions = append(topic.Partitions, ViewPartition{State: state, MinInsync: minInsync, Local: fe.viewReplica(state)})
		}
		view.Topics = append(view.Topics, topic)
	}
	return view
}

// viewReplica is this broker's replica of a partition, nil when it hosts
// none.
func (fe *FrontEnd) viewReplica(state metadata.PartitionState) *ViewReplica {
	r, _, ok := fe.Node().Replica(state.TopicPartition)
	if !ok {
		return nil
	}
	local := &ViewReplica{Role: r.Role(), LeaderEpoch: int32(r.State().LeaderEpoch), LogStart: int64(r.LogStartOffset()), HighWatermark: int64(r.HighWatermark()),
		LogEnd: int64(r.LogEndOffset()), FetcherLag: -1}
	if lag, known := r.FetcherLag(); known {
		local.FetcherLag = lag
	}
	if r.Role() == replica.Leader {
		local.Followers = map[metadata.BrokerID]int64{}
		for _, id := range state.Replicas {
			if end, known := r.FollowerLogEndOffset(id); known {
				local.Followers[id] = int64(end)
			}
		}
	}
	return local
}
