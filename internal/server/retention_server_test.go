package server

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/record"
)

// produceAt writes count records of valueBytes each with the timestamps
// first, first+step, ... (CreateTime: the producer's), acks=all, one at a
// time so that each is a batch of its own.
func produceAt(ctx context.Context, t *testing.T, client *kgo.Client, topic string, count int, first time.Time, step time.Duration, valueBytes int) {
	t.Helper()
	for i := range count {
		r := &kgo.Record{Topic: topic, Value: []byte(strings.Repeat("v", valueBytes)), Timestamp: first.Add(time.Duration(i) * step)}
		if err := client.ProduceSync(ctx, r).FirstErr(); err != nil {
			t.Fatalf("produce %d to %s: %v", i, topic, err)
		}
	}
}

// segmentFiles counts a partition directory's segments.
func segmentFiles(t *testing.T, dataDir, topic string) int {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dataDir, "partitions", topic+"-0", "*.log"))
	if err != nil {
		t.Fatal(err)
	}
	return len(names)
}

// ListOffsets by timestamp on a real node, through kadm's
// ListOffsetsAfterMilli and ListMaxTimestampOffsets and kcat -Q (when kcat
// is installed): the first record at or after the time, -1 after the
// last, the record with the largest timestamp; and DeleteRecords through
// kadm, which moves the log start offset (and is refused above the high
// watermark).
func TestListOffsetsByTimestampAndDeleteRecords(t *testing.T) {
	node := startLimitedNode(t, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(node.KafkaAddr()), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	createTopic(ctx, t, client, "timed", 1)
	base := time.Now().Add(-time.Hour).Truncate(time.Second)
	produceAt(ctx, t, client, "timed", 20, base, time.Second, 10)

	for _, c := range []struct {
		at         time.Time
		wantOffset int64
	}{
		{base.Add(-time.Minute), 0},
		{base, 0},
		{base.Add(500 * time.Millisecond), 1},
		{base.Add(7 * time.Second), 7},
		{base.Add(19 * time.Second), 19},
		{base.Add(20 * time.Second), -1},
	} {
		listed, err := admin.ListOffsetsAfterMilli(ctx, c.at.UnixMilli(), "timed")
		if err != nil {
			t.Fatal(err)
		}
		got, _ := listed.Lookup("timed", 0)
		wantTimestamp := int64(-1)
		if c.wantOffset >= 0 {
			wantTimestamp = base.Add(time.Duration(c.wantOffset) * time.Second).UnixMilli()
		}
		// kadm answers "after the last record" with the end offset.
		if c.wantOffset < 0 {
			c.wantOffset = 20
		}
		if got.Err != nil || got.Offset != c.wantOffset || (wantTimestamp >= 0 && got.Timestamp != wantTimestamp) {
			t.Errorf("ListOffsetsAfterMilli(%s): offset %d timestamp %d err %v, want offset %d timestamp %d",
				c.at.Sub(base), got.Offset, got.Timestamp, got.Err, c.wantOffset, wantTimestamp)
		}
	}
	newest, err := admin.ListMaxTimestampOffsets(ctx, "timed")
	if got, _ := newest.Lookup("timed", 0); err != nil || got.Err != nil || got.Offset != 19 || got.Timestamp != base.Add(19*time.Second).UnixMilli() {
		t.Errorf("ListMaxTimestampOffsets: %+v, %v; want offset 19", got, err)
	}
	checkRawListOffsets(ctx, t, client)
	if kcat, err := exec.LookPath("kcat"); err == nil {
		query := fmt.Sprintf("timed:0:%d", base.Add(7*time.Second).UnixMilli())
		out, err := exec.CommandContext(ctx, kcat, "-b", node.KafkaAddr(), "-Q", "-t", query).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "offset 7") {
			t.Errorf("kcat -Q -t %s: %v\n%s", query, err, out)
		}
	} else {
		t.Log("kcat is not installed: its -Q is not checked")
	}

	var targets kadm.Offsets
	targets.AddOffset("timed", 0, 21, -1)
	deleted, err := admin.DeleteRecords(ctx, targets)
	if got, _ := deleted.Lookup("timed", 0); err != nil || got.Err == nil {
		t.Errorf("DeleteRecords above the high watermark: %+v, %v; want OFFSET_OUT_OF_RANGE", got, err)
	}
	targets = nil
	targets.AddOffset("timed", 0, 5, -1)
	deleted, err = admin.DeleteRecords(ctx, targets)
	if got, _ := deleted.Lookup("timed", 0); err != nil || got.Err != nil || got.LowWatermark != 5 {
		t.Fatalf("DeleteRecords to 5: %+v, %v", got, err)
	}
	starts, err := admin.ListStartOffsets(ctx, "timed")
	if got, _ := starts.Lookup("timed", 0); err != nil || got.Offset != 5 {
		t.Fatalf("log start after DeleteRecords: %+v, %v", got, err)
	}
	listed, err := admin.ListOffsetsAfterMilli(ctx, base.UnixMilli(), "timed")
	if got, _ := listed.Lookup("timed", 0); err != nil || got.Offset != 5 {
		t.Errorf("by timestamp after DeleteRecords: %+v, %v; want the first record left, 5", got, err)
	}
}

// checkRawListOffsets asks for what kadm has no call for: EARLIEST_LOCAL
// (-4, v8) is the log start offset, LATEST_TIERED (-5, v9) offset -1.
// (kgo sends the highest version both sides know, so the version gates are
// tested in internal/wire.)
func checkRawListOffsets(ctx context.Context, t *testing.T, client *kgo.Client) {
	t.Helper()
	for _, c := range []struct {
		version   int16
		timestamp int64
		offset    int64
		code      int16
	}{{9, -4, 0, 0}, {9, -5, -1, 0}, {7, -3, 19, 0}} {
		request := kmsg.NewPtrListOffsetsRequest()
		request.Version, request.ReplicaID = c.version, -1
		topic := kmsg.NewListOffsetsRequestTopic()
		topic.Topic = "timed"
		partition := kmsg.NewListOffsetsRequestTopicPartition()
		partition.Timestamp, partition.CurrentLeaderEpoch = c.timestamp, -1
		topic.Partitions = append(topic.Partitions, partition)
		request.Topics = append(request.Topics, topic)
		response, err := request.RequestWith(ctx, client)
		if err != nil {
			t.Fatalf("ListOffsets v%d %d: %v", c.version, c.timestamp, err)
		}
		got := response.Topics[0].Partitions[0]
		if got.ErrorCode != c.code || got.Offset != c.offset {
			t.Errorf("ListOffsets v%d timestamp %d: code %d offset %d, want code %d offset %d", c.version, c.timestamp, got.ErrorCode, got.Offset, c.code, c.offset)
		}
	}
}

// Retention on a real node, on the wall clock: a topic whose records are
// older than retention.ms loses its whole segments (the active one too,
// once every record in it is expired and committed), the log start moves
// to the log end, and records written afterwards stay.
func TestRetentionByTimeOnANode(t *testing.T) {
	dataDir := filepath.Join(t.TempDir(), "node")
	node := startLimitedNode(t, func(c *Config) {
		c.DataDir, c.RetentionMs, c.RetentionCheckInterval, c.SegmentBytes = dataDir, 60_000, 100*time.Millisecond, 1<<20
	}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(node.KafkaAddr()), kgo.ProducerBatchMaxBytes(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	admin := kadm.NewClient(client)
	createTopic(ctx, t, client, "expiring", 1)
	// 3 MiB of records an hour old: about three segments of 1 MiB, all of
	// them past retention.ms from the start.
	produceAt(ctx, t, client, "expiring", 30, time.Now().Add(-time.Hour), time.Millisecond, 100<<10)
	ends, err := admin.ListEndOffsets(ctx, "expiring")
	end, _ := ends.Lookup("expiring", 0)
	if err != nil || end.Offset != 30 {
		t.Fatalf("end offset %+v, %v", end, err)
	}
	for began := time.Now(); ; time.Sleep(50 * time.Millisecond) {
		starts, err := admin.ListStartOffsets(ctx, "expiring")
		start, _ := starts.Lookup("expiring", 0)
		if err == nil && start.Offset == 30 {
			break
		}
		if time.Since(began) > 20*time.Second {
			t.Fatalf("retention did not delete the expired records within 20 s: log start %+v, %v; %d segment files", start, err, segmentFiles(t, dataDir, "expiring"))
		}
	}
	if n := segmentFiles(t, dataDir, "expiring"); n != 1 {
		t.Errorf("%d segment files after every record expired, want the one empty active segment", n)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "partitions", "expiring-0", "00000000000000000030.timeindex")); err != nil {
		t.Errorf("the new active segment has no time index: %v", err)
	}
	produceAt(ctx, t, client, "expiring", 3, time.Now(), time.Millisecond, 10)
	time.Sleep(500 * time.Millisecond) // several retention checks
	starts, err := admin.ListStartOffsets(ctx, "expiring")
	ends, err2 := admin.ListEndOffsets(ctx, "expiring")
	start, _ := starts.Lookup("expiring", 0)
	end, _ = ends.Lookup("expiring", 0)
	if err != nil || err2 != nil || start.Offset != 30 || end.Offset != 33 {
		t.Fatalf("fresh records: log start %d, end %d (%v, %v); want 30 and 33", start.Offset, end.Offset, err, err2)
	}
}

// message.timestamp.type=LogAppendTime on a real node: the produce answer
// carries the broker's append time; a consumer
// reads the batch as LogAppendTime with that timestamp, whatever the
// producer set; and ListOffsets by time searches the append times.
func TestLogAppendTimeOnANode(t *testing.T) {
	node := startLimitedNode(t, func(c *Config) { c.LogAppendTime = true }, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(node.KafkaAddr()), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		"appended": {0: kgo.NewOffset().AtStart()}}))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	createTopic(ctx, t, client, "appended", 1)
	before := time.Now().Add(-time.Second)
	// kgo does not read Produce's LogAppendTime, so the produce is sent raw.
	produce := kmsg.NewPtrProduceRequest()
	produce.Version, produce.Acks, produce.TimeoutMillis = 9, -1, 5000
	topic := kmsg.NewProduceRequestTopic()
	topic.Topic = "appended"
	partition := kmsg.NewProduceRequestTopicPartition()
	partition.Records = record.Build(record.BuildOptions{LeaderEpoch: record.NoLeaderEpoch,
		BaseTimestampMs: time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), Records: []record.Record{{Value: []byte("v")}}})
	topic.Partitions = append(topic.Partitions, partition)
	produce.Topics = append(produce.Topics, topic)
	response, err := produce.RequestWith(ctx, client)
	if err != nil || response.Topics[0].Partitions[0].ErrorCode != 0 {
		t.Fatalf("produce: %+v, %v", response, err)
	}
	produced := &kgo.Record{Timestamp: time.UnixMilli(response.Topics[0].Partitions[0].LogAppendTime)}
	if produced.Timestamp.Before(before) || produced.Timestamp.After(time.Now().Add(time.Second)) {
		t.Errorf("the produce answer's append time %s, want about now", produced.Timestamp)
	}
	fetches := client.PollFetches(ctx)
	if err := fetches.Err(); err != nil {
		t.Fatal(err)
	}
	records := fetches.Records()
	if len(records) != 1 || records[0].Attrs.TimestampType() != 1 || !records[0].Timestamp.Equal(produced.Timestamp) {
		t.Fatalf("consumed %d records (first at %v, type %d), want one LogAppendTime record at %s", len(records), records[0].Timestamp, records[0].Attrs.TimestampType(), produced.Timestamp)
	}
	listed, err := kadm.NewClient(client).ListOffsetsAfterMilli(ctx, before.UnixMilli(), "appended")
	if got, _ := listed.Lookup("appended", 0); err != nil || got.Offset != 0 || got.Timestamp != produced.Timestamp.UnixMilli() {
		t.Errorf("by append time: %+v, %v", got, err)
	}
}
