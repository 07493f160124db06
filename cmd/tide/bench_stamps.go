package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// stampReaders are the consumers of tide bench e2e: each reads the
// partitions dealt to it and times every record by the send time stamped
// at the head of its value.
type stampReaders struct {
	clients  []*kgo.Client
	received atomic.Int64
	samples  [][]time.Duration // one slice per client, its goroutine's own
	errs     []error           // one per client, set by its goroutine
	failed   atomic.Bool       // set after an errs entry
	cancel   context.CancelFunc
	running  sync.WaitGroup
}

// topicEnds are the partitions' high watermarks, where the consumers start
// so that they read only this run's records: 0 for a topic just created,
// whose leaders may not answer ListOffsets yet.
func (o benchLoad) topicEnds(ctx context.Context, client *kgo.Client, partitions int, created bool) (map[int32]int64, error) {
	ends := map[int32]int64{}
	var ids []int32
	for partition := range int32(partitions) {
		ends[partition] = 0
		ids = append(ids, partition)
	}
	if created {
		return ends, nil
	}
	offsets, err := o.listOffsets(ctx, client, o.topic, ids)
	if err != nil {
		return nil, fmt.Errorf("topic %s: %w", o.topic, err)
	}
	for partition, known := range offsets {
		ends[partition] = known.latest
	}
	return ends, nil
}

// connectStampReaders connects up to --consumers clients, partition p
// going to client p mod --consumers; a client that would get no partition
// is not made.
func (o benchLoad) connectStampReaders(ctx context.Context, ends map[int32]int64) (*stampReaders, error) {
	assigned := make([]map[int32]kgo.Offset, min(o.consumers, len(ends)))
	for partition, end := range ends {
		index := int(partition) % len(assigned)
		if assigned[index] == nil {
			assigned[index] = map[int32]kgo.Offset{}
		}
		assigned[index][partition] = kgo.NewOffset().At(end)
	}
	readers := &stampReaders{}
	for _, partitions := range assigned {
		client, _, err := o.connect(ctx, []string{o.topic}, kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{o.topic: partitions}))
		if err != nil {
			readers.close()
			return nil, err
		}
		readers.clients = append(readers.clients, client)
	}
	readers.samples, readers.errs = make([][]time.Duration, len(readers.clients)), make([]error, len(readers.clients))
	return readers, nil
}

// start has every client poll until stop; a record stamped at or after
// the warmup is a sample, up to maxLatencySamples over all clients.
func (r *stampReaders) start(base time.Time, warmup time.Duration) {
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	limit := maxLatencySamples / max(1, len(r.clients))
	for i, client := range r.clients {
		r.running.Go(func() {
			for ctx.Err() == nil {
				fetches := client.PollFetches(ctx)
				if err := firstFetchError(fetches); err != nil {
					r.errs[i] = err
					r.failed.Store(true)
					return
				}
				now := time.Since(base)
				fetches.EachRecord(func(record *kgo.Record) {
					stamp := time.Duration(binary.LittleEndian.Uint64(record.Value))
					if stamp >= warmup && len(r.samples[i]) < limit {
						r.samples[i] = append(r.samples[i], now-stamp)
					}
					r.received.Add(1)
				})
			}
		})
	}
}

// stampAwaitPoll is how often await looks at the count received.
const stampAwaitPoll = 5 * time.Millisecond

// await waits until want records were received, a consumer failed (its
// error is for failure, after stop), ctx ended (an interruption, not a
// failure) or timeout passed.
func (r *stampReaders) await(ctx context.Context, want int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for r.received.Load() < want && ctx.Err() == nil && !r.failed.Load() {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d of %d records acknowledged were not received within %s", want-r.received.Load(), want, timeout)
		}
		time.Sleep(stampAwaitPoll)
	}
	return nil
}

// stop ends the polling and answers every sample and the count received,
// after which nothing changes them.
func (r *stampReaders) stop() ([]time.Duration, int64) {
	r.cancel()
	r.running.Wait()
	return slices.Concat(r.samples...), r.received.Load()
}

// failure is the first error a consumer stopped on.
func (r *stampReaders) failure() error { return errors.Join(r.errs...) }

func (r *stampReaders) close() {
	for _, client := range r.clients {
		client.Close()
	}
}
