// Package console is tide's web console: pages a node serves over HTTP
// (tide serve --http-listen, tide dev per broker) that show what the
// cluster does, as server-rendered HTML with SVG drawings and no
// JavaScript: the brokers and the active controller, the topics, each
// partition's replicas with their log start offset, high watermark, log
// end offset, lag and epochs drawn to scale, the consumer groups it
// coordinates with their lag, live produce and fetch rates,
// and the seed scenarios as step-by-step timelines.
//
// The console reads the node through Source: a value taken on the node
// loop (the only goroutine that may touch the cores) and the rates the
// node's counters give. It decides nothing and changes nothing; a page
// that auto-refreshes does so with a meta refresh.
package console

import (
	"net/http"
	"time"
)

// Source is what a page reads from its node.
type Source interface {
	// Snapshot is the node's view now, or false when the node did not
	// answer in time (a busy or stopping node).
	Snapshot() (Snapshot, bool)
	// Rates are the last samples of the node's request rates, oldest
	// first.
	Rates() []RateSample
}

// Snapshot is one node's view of the cluster at one moment.
type Snapshot struct {
	NodeID int32
	// Voter says the node is a voter of the metadata quorum; Active that
	// it is the active controller, Leader the one it knows of (-1 none).
	Voter          bool
	Active         bool
	Leader         int32
	Term           uint64
	MetadataOffset int64
	Brokers        []Broker
	Topics         []Topic
	// Groups are the consumer groups this node coordinates; GroupsOmitted
	// counts the group partitions left out by the node's limit.
	Groups        []Group
	GroupsOmitted int
}

// Group is one consumer group this node coordinates.
type Group struct {
	ID, Type, State, ProtocolType, Protocol string
	Members                                 []GroupMember
	Partitions                              []GroupPartition
}

// GroupMember is one member of a group.
type GroupMember struct{ ID, ClientID, ClientHost string }

// GroupPartition is one partition a group committed an offset for, with
// the end offset (high watermark) this node's replica of it has and the
// lag, both -1 where the node hosts no replica; FromLeader says the node
// leads the partition, so the end offset is the leader's own.
type GroupPartition struct {
	Topic          string
	Partition      int32
	Committed      int64
	EndOffset, Lag int64
	FromLeader     bool
}

// Broker is one registered broker.
type Broker struct {
	ID           int32
	Epoch        int64
	Endpoint     string
	Fenced       bool
	ShuttingDown bool
}

// Topic is one topic, its partitions in order.
type Topic struct {
	Name       string
	ID         string
	Partitions []Partition
}

// Partition is one partition as the metadata has it, with the offsets this
// node knows: its own replica's, and on the leader its followers' log end
// offsets as they last fetched.
type Partition struct {
	Number         int32
	Leader         int32
	LeaderEpoch    int32
	PartitionEpoch int32
	Replicas       []int32
	ISR            []int32
	ELR            []int32
	// Local is this node's replica, nil when it hosts none.
	Local *ReplicaOffsets
	// Followers are the followers' log end offsets as this node, their
	// leader, knows them; nil elsewhere.
	Followers map[int32]int64
}

// ReplicaOffsets are one hosted replica's offsets; FetcherLag, on a
// follower, how far its log end is behind its leader's high watermark as
// last answered (-1 unknown).
type ReplicaOffsets struct {
	Role          string
	LogStart      int64
	HighWatermark int64
	LogEnd        int64
	FetcherLag    int64
}

// RateSample is one second's requests and bytes.
type RateSample struct {
	At                 time.Time
	ProduceRequests    float64
	ProduceBytes       float64
	FetchRequests      float64
	FetchBytes         float64
	RequestsOfAnyKind  float64
	RequestsOfAnyBytes float64
}

// Handler serves the console's pages of node nodeID.
func Handler(source Source, nodeID int32) http.Handler {
	pages := &pages{source: source, nodeID: nodeID, scenarios: newScenarioCache()}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", pages.overview)
	mux.HandleFunc("GET /topic/{name}", pages.topic)
	mux.HandleFunc("GET /groups", pages.groups)
	mux.HandleFunc("GET /rates", pages.rates)
	mux.HandleFunc("GET /scenarios", pages.scenarioList)
	mux.HandleFunc("GET /scenario/{name}", pages.scenario)
	return mux
}
