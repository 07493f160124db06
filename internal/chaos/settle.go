package chaos

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/commitlog"
	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/record"
)

// waitSettled waits until every broker is unfenced and every replica of
// the topic has the same log end offset and high watermark as the others,
// with one leader, and says whether that happened within timeout.
func waitSettled(ctx context.Context, config Config, c *cluster, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if allUnfenced(ctx, c) && replicasCaughtUp(ctx, config, c) {
			return true
		}
		sleep(ctx, 200*time.Millisecond)
	}
	return false
}

func replicasCaughtUp(ctx context.Context, config Config, c *cluster) bool {
	type view struct {
		leaders               int
		highWatermark, logEnd int64
		replicas              int
		agree                 bool
	}
	views := make([]view, config.Partitions)
	for i := range views {
		views[i] = view{highWatermark: -1, agree: true}
	}
	for _, n := range c.nodes {
		status, err := c.status(ctx, n.id)
		if err != nil {
			return false
		}
		for _, p := range status.Partitions {
			if p.Topic != config.Topic || p.Partition < 0 || int(p.Partition) >= len(views) {
				continue
			}
			v := &views[p.Partition]
			if p.Role == "leader" {
				v.leaders++
			}
			if v.highWatermark >= 0 && (p.HighWatermark != v.highWatermark || p.LogEndOffset != v.logEnd) {
				v.agree = false
			}
			v.highWatermark, v.logEnd = p.HighWatermark, p.LogEndOffset
			v.replicas++
		}
	}
	for _, v := range views {
		if v.leaders != 1 || !v.agree || v.highWatermark != v.logEnd || v.replicas != min(3, config.Nodes) {
			return false
		}
	}
	return true
}

// readFinal reads every partition from its log start offset to its high
// watermark through a fresh consumer.
func readFinal(ctx context.Context, config Config, seeds []string) []FinalLog {
	finals := make([]FinalLog, config.Partitions)
	for p := range finals {
		finals[p] = FinalLog{Partition: int32(p), HighWatermark: -1}
	}
	ctx, cancel := context.WithTimeout(ctx, 90*time.Second)
	defer cancel()
	client, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.FetchMaxWait(300*time.Millisecond),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{config.Topic: startOffsets(config.Partitions)}))
	if err != nil {
		for p := range finals {
			finals[p].Error = err.Error()
		}
		return finals
	}
	defer client.Close()
	for p := range finals {
		final := &finals[p]
		start, startErr := listOffset(ctx, client, config.Topic, int32(p), -2)
		end, endErr := listOffset(ctx, client, config.Topic, int32(p), -1)
		if startErr != nil || endErr != nil {
			final.Error = fmt.Sprintf("ListOffsets: %v %v", startErr, endErr)
			continue
		}
		final.StartOffset, final.HighWatermark = start, end
	}
	consumeFinal(ctx, client, finals)
	return finals
}

func startOffsets(partitions int) map[int32]kgo.Offset {
	offsets := map[int32]kgo.Offset{}
	for p := range int32(partitions) {
		offsets[p] = kgo.NewOffset().AtStart()
	}
	return offsets
}

// consumeFinal polls until every partition has been read to its high
// watermark, a gap shows, or ctx ends.
func consumeFinal(ctx context.Context, client *kgo.Client, finals []FinalLog) {
	pending := 0
	for p := range finals {
		if finals[p].Error == "" && finals[p].HighWatermark > finals[p].StartOffset {
			pending++
		} else if finals[p].Error == "" {
			finals[p].Complete = true
		}
	}
	for pending > 0 && ctx.Err() == nil {
		fetches := client.PollFetches(ctx)
		fetches.EachRecord(func(r *kgo.Record) {
			final := &finals[r.Partition]
			next := final.StartOffset + int64(len(final.Values))
			if final.Complete || final.Error != "" || r.Offset < next {
				return
			}
			if r.Offset > next {
				final.Error = fmt.Sprintf("offsets %d to %d were skipped by the consumer", next, r.Offset-1)
				pending--
				return
			}
			final.Values = append(final.Values, string(r.Value))
			if r.Offset+1 >= final.HighWatermark {
				final.Complete = true
				pending--
			}
		})
	}
	for p := range finals {
		if !finals[p].Complete && finals[p].Error == "" {
			finals[p].Error = fmt.Sprintf("not read to the end in time: %v", ctx.Err())
		}
	}
}

func listOffset(ctx context.Context, client *kgo.Client, topic string, partition int32, timestamp int64) (int64, error) {
	request := kmsg.NewPtrListOffsetsRequest()
	entry := kmsg.NewListOffsetsRequestTopic()
	entry.Topic = topic
	part := kmsg.NewListOffsetsRequestTopicPartition()
	part.Partition, part.Timestamp = partition, timestamp
	entry.Partitions = append(entry.Partitions, part)
	request.Topics = append(request.Topics, entry)
	last := error(nil)
	for ctx.Err() == nil {
		response, err := request.RequestWith(ctx, client)
		if err == nil && len(response.Topics) == 1 && len(response.Topics[0].Partitions) == 1 {
			answer := response.Topics[0].Partitions[0]
			if answer.ErrorCode == 0 {
				return answer.Offset, nil
			}
			err = kerr.ErrorForCode(answer.ErrorCode)
		}
		last = err
		sleep(ctx, 200*time.Millisecond)
	}
	return 0, fmt.Errorf("%w (last: %v)", ctx.Err(), last)
}

// readReplicas reads every replica's log from its directory, after the
// nodes stopped, up to the partition's final high watermark (its log end
// when that is unknown), as batch digests.
func readReplicas(config Config, c *cluster, finals []FinalLog) []ReplicaLog {
	var replicas []ReplicaLog
	for _, n := range c.nodes {
		for p := range int32(config.Partitions) {
			upTo := int64(math.MaxInt64)
			if int(p) < len(finals) && finals[p].HighWatermark >= 0 {
				upTo = finals[p].HighWatermark
			}
			dir := filepath.Join(n.dir, "partitions", fmt.Sprintf("%s-%d", config.Topic, p))
			if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
				continue // not a replica of this partition
			}
			replica := ReplicaLog{Broker: n.id, Partition: p}
			batches, to, err := readBatches(dir, upTo)
			if err != nil {
				replica.Error = err.Error()
			}
			replica.Batches, replica.To = batches, to
			replicas = append(replicas, replica)
		}
	}
	return replicas
}

func readBatches(dir string, upTo int64) ([]BatchDigest, int64, error) {
	log, err := commitlog.Open(commitlog.Config{FS: disk.OS(), Dir: dir})
	if err != nil {
		return nil, 0, err
	}
	defer log.Close()
	read, err := log.Read(log.LogStartOffset(), math.MaxInt64, record.Offset(upTo))
	if err != nil {
		return nil, 0, err
	}
	data, err := read.AppendTo(nil)
	if err != nil {
		return nil, 0, err
	}
	var batches []BatchDigest
	for len(data) > 0 {
		// RecordBatch v2: base offset (8), batch length (4), partition
		// leader epoch (4), magic (1), CRC (4), attributes (2), last
		// offset delta (4).
		if len(data) < 27 {
			return batches, int64(read.NextOffset), fmt.Errorf("a torn batch header of %d bytes", len(data))
		}
		size := 12 + int(binary.BigEndian.Uint32(data[8:12]))
		if size > len(data) {
			return batches, int64(read.NextOffset), fmt.Errorf("a batch of %d bytes with %d left", size, len(data))
		}
		base := int64(binary.BigEndian.Uint64(data[0:8]))
		lastDelta := int64(binary.BigEndian.Uint32(data[23:27]))
		sum := sha256.Sum256(data[:size])
		batches = append(batches, BatchDigest{BaseOffset: base, NextOffset: base + lastDelta + 1, Digest: hex.EncodeToString(sum[:8])})
		data = data[size:]
	}
	return batches, int64(read.NextOffset), nil
}
