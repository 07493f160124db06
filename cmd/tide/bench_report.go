package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// benchReport is one run of tide bench produce: the setup, read back from
// the client where kgo chose it, and each phase's figures. A phase that
// did not run is nil; one that failed holds what it had when it stopped.
type benchReport struct {
	// Cluster names the cluster --dev started in this process, if any.
	Cluster            string            `json:"cluster,omitempty"`
	Producers          int               `json:"producers"`
	Topic              string            `json:"topic"`
	Partitions         int               `json:"partitions"`
	TopicCreated       bool              `json:"topic_created"`
	Acks               string            `json:"acks"`
	Idempotent         bool              `json:"idempotent"`
	ValueBytes         int               `json:"value_bytes"`
	Keys               bool              `json:"keys"`
	Compression        string            `json:"compression"`
	LingerMs           float64           `json:"linger_ms"`
	BatchMaxBytes      int32             `json:"batch_max_bytes"`
	MaxBufferedRecords int64             `json:"max_buffered_records"`
	Seed               uint64            `json:"seed"`
	WarmupSeconds      float64           `json:"warmup_seconds"`
	WarmupRecords      int64             `json:"warmup_records"`
	Interrupted        bool              `json:"interrupted"`
	Throughput         *throughputResult `json:"throughput,omitempty"`
	Latency            *latencyResult    `json:"latency,omitempty"`
}

// newReport describes the setup. Linger and batch size are kgo's defaults,
// asked of the client so the report cannot drift from the library.
func (o benchOptions) newReport(client *kgo.Client) (benchReport, error) {
	linger, lingerOK := client.OptValue(kgo.ProducerLinger).(time.Duration)
	batchBytes, batchOK := client.OptValue(kgo.ProducerBatchMaxBytes).(int32)
	buffered, bufferedOK := client.OptValue(kgo.MaxBufferedRecords).(int64)
	if !lingerOK || !batchOK || !bufferedOK {
		return benchReport{}, fmt.Errorf("bench produce: this franz-go does not report its linger, batch size and buffer (%T %T %T)",
			client.OptValue(kgo.ProducerLinger), client.OptValue(kgo.ProducerBatchMaxBytes), client.OptValue(kgo.MaxBufferedRecords))
	}
	return benchReport{
		Producers: o.producers, Topic: o.topic, Acks: o.acks, Idempotent: o.idempotent, ValueBytes: o.size, Keys: o.keys, Compression: "none",
		LingerMs: milliseconds(linger), BatchMaxBytes: batchBytes, MaxBufferedRecords: buffered,
		Seed: o.seed, WarmupSeconds: o.warmup.Seconds(),
	}, nil
}

func (r benchReport) print(out io.Writer, asJSON bool) error {
	if asJSON {
		encoder := json.NewEncoder(out)
		return encoder.Encode(r)
	}
	created := ""
	if r.TopicCreated {
		created = ", created"
	}
	idempotent := "not idempotent"
	if r.Idempotent {
		idempotent = "idempotent"
	}
	if r.Cluster != "" {
		fmt.Fprintf(out, "cluster: %s, started in this process\n", r.Cluster)
	}
	fmt.Fprintf(out, "topic %s (partitions %d%s), acks=%s, %s, %d-byte random values, compression none, %d producers\n",
		r.Topic, r.Partitions, created, r.Acks, idempotent, r.ValueBytes, r.Producers)
	fmt.Fprintf(out, "kgo: linger %gms, batch max %d bytes, max buffered records %d; warmup %gs, %d records\n",
		r.LingerMs, r.BatchMaxBytes, r.MaxBufferedRecords, r.WarmupSeconds, r.WarmupRecords)
	if r.Interrupted {
		fmt.Fprintln(out, "interrupted: the figures are of the records sent before")
	}
	fmt.Fprintln(out)
	table := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	if t := r.Throughput; t != nil {
		fmt.Fprintln(table, "throughput\trecords\tseconds\trecords/s\tMiB/s\terrors")
		fmt.Fprintf(table, "\t%d\t%.2f\t%.0f\t%.2f\t%d\n", t.Records, t.ElapsedSeconds, t.RecordsPerSecond, t.MiBPerSecond, t.Errors)
	}
	if l := r.Latency; l != nil {
		if r.Throughput != nil {
			fmt.Fprintln(table) // an empty line ends the throughput table's columns
		}
		fmt.Fprintln(table, "latency\tcount\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\tmean ms")
		fmt.Fprintf(table, "\t%d\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\t%.3f\n", l.Count, l.P50Ms, l.P90Ms, l.P99Ms, l.P999Ms, l.MaxMs, l.MeanMs)
	}
	if err := table.Flush(); err != nil {
		return err
	}
	if t := r.Throughput; t != nil && t.CPU != nil {
		fmt.Fprintf(out, "\nthroughput phase: %.2f CPU seconds of this whole process (brokers and client), %.2f per GiB of values\n",
			t.CPU.ProcessCPUSeconds, t.CPU.ProcessCPUSecondsPerGiB)
	}
	if t := r.Throughput; t != nil && t.BrokerCPU != nil {
		_, err := fmt.Fprintf(out, "throughput phase: %.2f CPU seconds of the broker processes (%d metrics endpoints), %.2f per GiB of values\n",
			t.BrokerCPU.BrokerCPUSeconds, t.BrokerCPU.Endpoints, t.BrokerCPU.BrokerCPUSecondsPerGiB)
		return err
	}
	return nil
}
