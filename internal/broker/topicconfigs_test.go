package broker

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/replica"
)

// withConfigs is metadataFor(1) followed by config records.
func withConfigs(configs ...metadata.ConfigRecord) []metadata.Entry {
	entries := metadataFor(1)
	for _, c := range configs {
		entries = append(entries, metadata.Entry{Offset: int64(len(entries)), Record: c})
	}
	return entries
}

func ordersConfig(key, value string) metadata.ConfigRecord {
	return metadata.ConfigRecord{Resource: metadata.ConfigResource{Type: metadata.ConfigTopic, Name: "orders"}, Key: key, Value: value}
}

// A topic's configs in the metadata log override the node's settings,
// broker defaults fill what the topic does not set, and "compact,delete"
// both compacts and keeps retention while "compact" alone stops it.
func TestTopicConfigsReachLogAndCleaner(t *testing.T) {
	n := newTestNode(t, 1)
	err := n.ApplyMetadata(withConfigs(ordersConfig("retention.ms", "60000"), ordersConfig("message.timestamp.type", "LogAppendTime"),
		ordersConfig("cleanup.policy", "compact,delete"), ordersConfig("delete.retention.ms", "5"), ordersConfig("min.cleanable.dirty.ratio", "0.25"),
		metadata.ConfigRecord{Resource: metadata.ConfigResource{Type: metadata.ConfigBrokerDefault}, Key: "log.segment.bytes", Value: "4096"}))
	if err != nil {
		t.Fatal(err)
	}
	config := n.logConfig("orders")
	if config.RetentionMs != 60000 || !config.LogAppendTime || config.SegmentBytes != 4096 || config.RetentionBytes != -1 {
		t.Fatalf("log config %+v", config)
	}
	cleaner, compacted := n.cleanerConfigFor("orders")
	if !compacted || cleaner.DeleteRetentionMs != 5 || cleaner.MinCleanableDirtyRatio != 0.25 {
		t.Fatalf("cleaner config %+v %v", cleaner, compacted)
	}
	if err := n.ApplyMetadata([]metadata.Entry{{Offset: n.MetadataOffset() + 1, Record: ordersConfig("cleanup.policy", "compact")}}); err != nil {
		t.Fatal(err)
	}
	if config := n.logConfig("orders"); config.RetentionMs != -1 || config.RetentionBytes != -1 {
		t.Fatalf("compact alone still deletes by retention: %+v", config)
	}
	if err := n.ApplyMetadata([]metadata.Entry{{Offset: n.MetadataOffset() + 1, Record: ordersConfig("cleanup.policy", "delete")}}); err != nil {
		t.Fatal(err)
	}
	if _, compacted := n.cleanerConfigFor("orders"); compacted {
		t.Fatal("cleanup.policy=delete is compacted")
	}
}

// A topic created with max.message.bytes above the node's batch bound
// accepts a batch of that size and refuses a bigger one.
func TestMaxMessageBytesPerTopic(t *testing.T) {
	n := newTestNode(t, 1) // MaxBatchBytes 64 KiB
	if err := n.ApplyMetadata(withConfigs(ordersConfig("max.message.bytes", "200000"))); err != nil {
		t.Fatal(err)
	}
	value := bytes.Repeat([]byte("x"), 150000)
	batch := record.Build(record.BuildOptions{Records: []record.Record{{Value: value}}})
	n.HandleClient(ClientRequest{Client: 9, Partition: orders, Produce: &replica.ProduceRequest{ID: 1, Batches: batch, Acks: 1, TimeoutTicks: 100}})
	outbox := pass(n)
	if len(outbox.Clients) != 1 || outbox.Clients[0].Produce.ErrorCode != 0 {
		t.Fatalf("a %d-byte batch under max.message.bytes: %+v", len(batch), outbox.Clients)
	}
	big := record.Build(record.BuildOptions{Records: []record.Record{{Value: bytes.Repeat([]byte("x"), 210000)}}})
	n.HandleClient(ClientRequest{Client: 9, Partition: orders, Produce: &replica.ProduceRequest{ID: 2, Batches: big, Acks: 1, TimeoutTicks: 100}})
	outbox = pass(n)
	if len(outbox.Clients) != 1 || outbox.Clients[0].Produce.ErrorCode != kerr.MessageTooLarge.Code {
		t.Fatalf("a batch over max.message.bytes: %+v", outbox.Clients)
	}
}

// Rule segment-holds-a-batch: a topic created with Kafka's smallest
// segment.bytes (14) still opens its partition and takes produces.
func TestSmallSegmentBytesOpens(t *testing.T) {
	n := newTestNode(t, 1)
	if err := n.ApplyMetadata(withConfigs(ordersConfig("segment.bytes", "14"))); err != nil {
		t.Fatal(err)
	}
	batch := record.Build(record.BuildOptions{Records: []record.Record{{Value: []byte("x")}}})
	n.HandleClient(ClientRequest{Client: 9, Partition: orders, Produce: &replica.ProduceRequest{ID: 1, Batches: batch, Acks: 1, TimeoutTicks: 100}})
	outbox := pass(n)
	if len(outbox.Clients) != 1 || outbox.Clients[0].Produce.ErrorCode != 0 {
		t.Fatalf("produce to a topic with segment.bytes 14: %+v", outbox.Clients)
	}
}

// Config records that reach an open partition apply at once: segment.bytes
// rolls the open log's segments from the next append, message.timestamp.type
// stamps the next batch, and max.compaction.lag.ms reaches the cleaner and
// bounds a compacted topic's segment age.
func TestLiveConfigChangesReachTheOpenLog(t *testing.T) {
	n := newTestNode(t, 1) // MaxBatchBytes 64 KiB
	if err := n.ApplyMetadata(withConfigs()); err != nil {
		t.Fatal(err)
	}
	n.SetClock(777)
	produce := func(id uint64, valueBytes int) replica.ProduceAnswer {
		batch := record.Build(record.BuildOptions{Records: []record.Record{{Key: []byte("k"), Value: bytes.Repeat([]byte("x"), valueBytes)}}})
		n.HandleClient(ClientRequest{Client: 9, Partition: orders, Produce: &replica.ProduceRequest{ID: id, Batches: batch, Acks: 1, TimeoutTicks: 100}})
		outbox := pass(n)
		if len(outbox.Clients) != 1 || outbox.Clients[0].Produce.ErrorCode != 0 {
			t.Fatalf("produce %d: %+v", id, outbox.Clients)
		}
		return *outbox.Clients[0].Produce
	}
	for id := range uint64(3) {
		produce(id, 40000)
	}
	_, log, _ := n.Replica(orders)
	before := log.Segments()
	apply := func(records ...metadata.ConfigRecord) {
		t.Helper()
		var entries []metadata.Entry
		for _, r := range records {
			entries = append(entries, metadata.Entry{Offset: n.MetadataOffset() + 1 + int64(len(entries)), Record: r})
		}
		if err := n.ApplyMetadata(entries); err != nil {
			t.Fatal(err)
		}
	}
	apply(ordersConfig("segment.bytes", "14"), ordersConfig("message.timestamp.type", "LogAppendTime"))
	produce(3, 40000)
	if answer := produce(4, 40000); !answer.LogAppendTime || answer.LogAppendTimeMs != 777 {
		t.Fatalf("message.timestamp.type=LogAppendTime did not reach the leader: %+v", answer)
	}
	if log.Segments() < before+2 {
		t.Fatalf("segment.bytes 14 (the 64 KiB batch bound) did not roll the open log: %d segments, had %d", log.Segments(), before)
	}
	apply(ordersConfig("cleanup.policy", "compact"), ordersConfig("max.compaction.lag.ms", "60000"))
	cleaner, compacted := n.cleanerConfigFor("orders")
	if !compacted || cleaner.MaxCompactionLagMs != 60000 || n.logConfig("orders").SegmentMs != 60000 {
		t.Fatalf("max.compaction.lag.ms: cleaner %+v, segment.ms %d", cleaner, n.logConfig("orders").SegmentMs)
	}
}
