package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

const bytesPerMiB = 1 << 20

// throughputResult is what one throughput phase had acknowledged.
// ValueBytes counts value bytes only (no keys, headers or batch overhead),
// and MiBPerSecond is ValueBytes over the elapsed time.
type throughputResult struct {
	Records          int64   `json:"records"`
	ValueBytes       int64   `json:"value_bytes"`
	Errors           int64   `json:"errors"`
	ElapsedSeconds   float64 `json:"elapsed_seconds"`
	RecordsPerSecond float64 `json:"records_per_second"`
	MiBPerSecond     float64 `json:"mib_per_second"`
	// CPU is measured when the cluster runs in this process (--dev).
	CPU *cpuFigure `json:"cpu,omitempty"`
	// BrokerCPU is read from the brokers' metrics (--broker-metrics).
	BrokerCPU *brokerCPUFigure `json:"broker_cpu,omitempty"`
}

// acknowledgements is what kgo's promises report, from its goroutines.
type acknowledgements struct {
	records    atomic.Int64
	valueBytes atomic.Int64
	errors     atomic.Int64
	mutex      sync.Mutex
	first      error // the first failure; guarded by mutex
}

func (a *acknowledgements) done(record *kgo.Record, err error) {
	if err == nil {
		a.records.Add(1)
		a.valueBytes.Add(int64(len(record.Value)))
		return
	}
	a.errors.Add(1)
	a.mutex.Lock()
	defer a.mutex.Unlock()
	if a.first == nil {
		a.first = err
	}
}

// runThroughput has every producer produce asynchronously until its share
// of the bound is reached, a record fails or ctx is done, then waits for
// every record sent to be answered: the elapsed time runs from the first
// record sent to the last one answered. Produce blocks while kgo's buffer
// is full, which is the back-pressure that keeps the phase at the
// cluster's pace.
func runThroughput(ctx context.Context, producers benchProducers, bound phaseBound, progress *benchProgress, label string) (throughputResult, error) {
	// Produce and Flush do not see ctx's end: an interruption stops the
	// sending, but the records sent are still answered (each within the
	// delivery timeout), so the figures count each record sent once.
	sending := context.WithoutCancel(ctx)
	var acknowledged acknowledgements
	progress.begin(label, acknowledged.records.Load)
	started := time.Now()
	var sent atomic.Int64
	flushErrs := make([]error, len(producers))
	var running sync.WaitGroup
	for i, producer := range producers {
		share := bound.share(i, len(producers))
		running.Go(func() {
			count := int64(0)
			for share.more(count, time.Since(started)) && acknowledged.errors.Load() == 0 && ctx.Err() == nil {
				producer.client.Produce(sending, producer.values.next(), acknowledged.done)
				count++
			}
			sent.Add(count)
			flushErrs[i] = producer.client.Flush(sending)
		})
	}
	running.Wait()
	elapsed := time.Since(started)
	progress.end()
	result := throughputResult{
		Records:        acknowledged.records.Load(),
		ValueBytes:     acknowledged.valueBytes.Load(),
		Errors:         acknowledged.errors.Load(),
		ElapsedSeconds: elapsed.Seconds(),
	}
	if elapsed > 0 {
		result.RecordsPerSecond = float64(result.Records) / elapsed.Seconds()
		result.MiBPerSecond = float64(result.ValueBytes) / bytesPerMiB / elapsed.Seconds()
	}
	acknowledged.mutex.Lock()
	defer acknowledged.mutex.Unlock()
	switch {
	case acknowledged.first != nil:
		return result, fmt.Errorf("%d of %d records not acknowledged, the first: %w", result.Errors, sent.Load(), acknowledged.first)
	case errors.Join(flushErrs...) != nil:
		return result, errors.Join(flushErrs...)
	case result.Records != sent.Load():
		// Every promise runs before Flush returns; a count that does not
		// add up is a bug in this code or in the client, not a figure.
		panic(fmt.Sprintf("bench: %d records sent, %d acknowledged, no error", sent.Load(), result.Records))
	}
	return result, nil
}

// latencyResult summarizes one latency phase. The percentiles are exact:
// the nearest-rank sample of all samples sorted.
type latencyResult struct {
	Count  int     `json:"count"`
	P50Ms  float64 `json:"p50_ms"`
	P90Ms  float64 `json:"p90_ms"`
	P99Ms  float64 `json:"p99_ms"`
	P999Ms float64 `json:"p99_9_ms"`
	MaxMs  float64 `json:"max_ms"`
	MeanMs float64 `json:"mean_ms"`
}

// runLatency has every producer produce one record at a time, each sent
// only after the one before was acknowledged, and times each from Produce
// to its answer, until its share of the bound is reached or ctx is done.
// ProduceSync ends kgo's linger for its records, so the default linger
// does not add to a sample. The samples of all producers are pooled.
func runLatency(ctx context.Context, producers benchProducers, bound phaseBound, progress *benchProgress, label string) (latencyResult, error) {
	sending := context.WithoutCancel(ctx) // as in runThroughput
	var counted atomic.Int64
	var failed atomic.Bool // one producer's failure stops the others
	progress.begin(label, counted.Load)
	samples := make([][]time.Duration, len(producers))
	errs := make([]error, len(producers))
	started := time.Now()
	var running sync.WaitGroup
	for i, producer := range producers {
		share := bound.share(i, len(producers))
		limit := maxLatencySamples / len(producers)
		running.Go(func() {
			for share.more(int64(len(samples[i])), time.Since(started)) && len(samples[i]) < limit && ctx.Err() == nil && !failed.Load() {
				record := producer.values.next()
				sent := time.Now()
				if err := producer.client.ProduceSync(sending, record).FirstErr(); err != nil {
					errs[i] = fmt.Errorf("producer %d: record %d not acknowledged: %w", i, len(samples[i]), err)
					failed.Store(true)
					return
				}
				samples[i] = append(samples[i], time.Since(sent))
				counted.Add(1)
			}
		})
	}
	running.Wait()
	progress.end()
	return summarizeLatency(slices.Concat(samples...)), errors.Join(errs...)
}

func summarizeLatency(samples []time.Duration) latencyResult {
	slices.Sort(samples)
	result := latencyResult{Count: len(samples)}
	if len(samples) == 0 {
		return result
	}
	var total time.Duration
	for _, sample := range samples {
		total += sample
	}
	result.P50Ms = milliseconds(percentile(samples, 500))
	result.P90Ms = milliseconds(percentile(samples, 900))
	result.P99Ms = milliseconds(percentile(samples, 990))
	result.P999Ms = milliseconds(percentile(samples, 999))
	result.MaxMs = milliseconds(samples[len(samples)-1])
	result.MeanMs = milliseconds(total / time.Duration(len(samples)))
	return result
}

// percentile is the nearest-rank percentile of sorted samples, the rank
// given in thousandths so that p99.9 is exact: the smallest sample with at
// least perMille/1000 of the samples at or below it.
func percentile(sorted []time.Duration, perMille int) time.Duration {
	if perMille < 1 || perMille > 1000 || len(sorted) == 0 {
		panic(fmt.Sprintf("bench: percentile %d‰ of %d samples", perMille, len(sorted)))
	}
	rank := (perMille*len(sorted) + 999) / 1000 // ceil(perMille/1000 × n), 1-based
	return sorted[rank-1]
}

func milliseconds(d time.Duration) float64 {
	return float64(d) / float64(time.Millisecond)
}
