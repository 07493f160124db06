package server

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tidelog/tide/internal/wire"
)

// nodeMetrics are one node's Prometheus metrics, named in the style of
// Kafka's JMX exporter (kafka_server_..., kafka_controller_...) so that an
// operator's Kafka dashboards and alerts carry over; docs/operations.md
// lists each. Two kinds:
//   - counters and histograms updated where the event happens, off the
//     node loop or on it at the cost of one atomic add: requests by API,
//     their latency and bytes, fsync latency;
//   - gauges read from the cores at scrape time, through one call on the
//     node loop (the only goroutine that may touch them): partition
//     offsets and ISR sizes, under-replicated and offline partitions, the
//     controller's view. A scrape costs the loop one pass over the hosted
//     partitions, nothing per request.
type nodeMetrics struct {
	registry       *prometheus.Registry
	requests       *prometheus.CounterVec
	requestSeconds *prometheus.HistogramVec
	requestBytes   *prometheus.CounterVec
	responseBytes  *prometheus.CounterVec
	fsyncSeconds   prometheus.Histogram
	// events count what the active controller committed, by kind
	// (metadata.Event.Kind): leader elections, ISR shrinks and expansions,
	// fencing, offline partitions.
	events *prometheus.CounterVec
	// totals are running counts the console's rate charts sample, kept
	// apart from the registry so reading them takes no gathering.
	totals requestTotals
}

// requestTotals count produce and fetch requests and their bytes in and
// out, and requests of any kind.
type requestTotals struct {
	produceRequests, produceBytes, fetchRequests, fetchBytes, requests, requestBytes atomic.Int64
}

// metricsSnapshotTimeout bounds how long a scrape waits for the node loop;
// a loop that busy is itself the news, and the scrape answers without the
// gauges rather than hang.
const metricsSnapshotTimeout = 2 * time.Second

func newNodeMetrics(s *Server) *nodeMetrics {
	requestLabels := []string{"request"}
	m := &nodeMetrics{
		registry: prometheus.NewRegistry(),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafka_network_requestmetrics_requests_total",
			Help: "Kafka requests read from clients, by API (request), counted when handed to the broker.",
		}, requestLabels),
		requestSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "kafka_network_requestmetrics_total_time_seconds",
			Help:    "Time from a Kafka request read whole to its response ready to write, by API (request); a produce with acks=all includes the wait for the ISR, a fetch its max wait.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18), // 0.1 ms to 13 s
		}, requestLabels),
		requestBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafka_network_requestmetrics_request_bytes_total",
			Help: "Bytes of Kafka requests read, by API (request); a produce's are its records in (Kafka's BytesInPerSec).",
		}, requestLabels),
		responseBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "kafka_network_requestmetrics_response_bytes_total",
			Help: "Bytes of Kafka responses, by API (request); a fetch's are its records out (Kafka's BytesOutPerSec).",
		}, requestLabels),
		fsyncSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "kafka_log_flush_time_seconds",
			Help:    "Time of each fsync of a partition log or metadata log file (Kafka's LogFlushRateAndTimeMs).",
			Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16), // 50 µs to 1.6 s
		}),
	}
	m.events = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "kafka_controller_kafkacontroller_events_total",
		Help: "Metadata changes this node committed while the active controller, by kind (event): leader-elected, unclean-leader-election, partition-offline, isr-shrink, isr-expand, broker-fenced, topic-created, ...; summed over the nodes, the cluster's.",
	}, []string{"event"})
	m.registry.MustRegister(m.events, m.requests, m.requestSeconds, m.requestBytes, m.responseBytes, m.fsyncSeconds,
		snapshotCollector{server: s}, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// apiName is a request's API by its key (the first two bytes of a request
// without its size), as Kafka names it: "Produce", "Fetch"; "unknown" for
// a key kmsg does not know, so a hostile client cannot grow the label set.
func apiName(request []byte) string {
	if len(request) < 2 {
		return "unknown"
	}
	name := kmsg.NameForKey(int16(binary.BigEndian.Uint16(request)))
	if name == "Unknown" || name == "" {
		return "unknown"
	}
	return name
}

// observeRequest counts one request as it is handed to the broker and
// returns the answer callback that times it and counts its response.
// Both run on any goroutine: the callback on the node loop, at the cost of
// a few atomic adds.
func (m *nodeMetrics) observeRequest(request []byte, answer func(wire.Response, error)) func(wire.Response, error) {
	name := apiName(request)
	m.requests.WithLabelValues(name).Inc()
	m.requestBytes.WithLabelValues(name).Add(float64(len(request)))
	m.totals.requests.Add(1)
	m.totals.requestBytes.Add(int64(len(request)))
	if name == "Produce" {
		m.totals.produceRequests.Add(1)
		m.totals.produceBytes.Add(int64(len(request)))
	}
	started := time.Now()
	return func(response wire.Response, err error) {
		m.requestSeconds.WithLabelValues(name).Observe(time.Since(started).Seconds())
		if err == nil {
			size := response.Size()
			m.responseBytes.WithLabelValues(name).Add(float64(size))
			if name == "Fetch" {
				m.totals.fetchRequests.Add(1)
				m.totals.fetchBytes.Add(size)
			}
		}
		answer(response, err)
	}
}

// handler serves /metrics.
func (m *nodeMetrics) handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(m.registry, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	return mux
}

// serveHTTP serves handler on the listener until ctx ends, with bounded
// header reads and writes: a client that trickles cannot hold a
// connection for ever.
func serveHTTP(ctx context.Context, listener net.Listener, handler http.Handler) {
	server := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, WriteTimeout: 30 * time.Second}
	go func() {
		<-ctx.Done()
		server.Close()
	}()
	if err := server.Serve(listener); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return
	}
}

// onLoop runs call on the node loop and waits for it, within timeout; it
// reports whether the call ran. For readers of the cores from other
// goroutines (a metrics scrape).
func (s *Server) onLoop(call func(), timeout time.Duration) bool {
	done := make(chan struct{})
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case s.inbox <- event{kind: eventCall, call: func() { call(); close(done) }}:
	case <-s.stopped:
		return false
	case <-timer.C:
		return false
	}
	select {
	case <-done:
		return true
	case <-s.stopped:
	case <-timer.C:
	}
	return false
}

// snapshotCollector reads the gauges from the cores at scrape time.
type snapshotCollector struct{ server *Server }

// Describe sends nothing: the partitions a node hosts come and go, so the
// collector is unchecked (prometheus.Collector's documented escape).
func (snapshotCollector) Describe(chan<- *prometheus.Desc) {}

func (c snapshotCollector) Collect(out chan<- prometheus.Metric) {
	var snapshot metricsSnapshot
	if !c.server.onLoop(func() { snapshot = c.server.metricsSnapshot() }, metricsSnapshotTimeout) {
		return
	}
	snapshot.emit(out)
}

// gauge is one sample of a snapshot metric.
func gauge(out chan<- prometheus.Metric, desc *prometheus.Desc, value float64, labels ...string) {
	out <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, value, labels...)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func partitionLabel(partition int32) string { return strconv.Itoa(int(partition)) }

// openMetrics binds the metrics listener, when one is asked for, and times
// every fsync of the node's files. It runs before any file is opened.
func (s *Server) openMetrics() error {
	metricsAsked := s.config.MetricsListen != "" || s.config.MetricsListener != nil
	consoleAsked := s.config.HTTPListen != "" || s.config.HTTPListener != nil
	if !metricsAsked && !consoleAsked {
		return nil
	}
	var err error
	if metricsAsked {
		if s.metricsListener, err = listen(s.config.MetricsListener, s.config.MetricsListen, "metrics"); err != nil {
			return err
		}
	}
	if consoleAsked {
		if s.consoleListener, err = listen(s.config.HTTPListener, s.config.HTTPListen, "http"); err != nil {
			if s.metricsListener != nil {
				s.metricsListener.Close()
			}
			return err
		}
	}
	// The console's rate charts read the request counters, so a console
	// without a metrics listener still keeps them.
	s.metrics = newNodeMetrics(s)
	s.fs = timedSyncFS{FS: s.fs, observe: s.metrics.fsyncSeconds.Observe}
	return nil
}

// MetricsAddr is the metrics listener's address, or "" without one.
func (s *Server) MetricsAddr() string {
	if s.metricsListener == nil {
		return ""
	}
	return s.metricsListener.Addr().String()
}

// listen is the listener handed in, or a new one bound to address.
func listen(given net.Listener, address, what string) (net.Listener, error) {
	if given != nil {
		return given, nil
	}
	listener, err := net.Listen("tcp", address)
	if err != nil {
		return nil, fmt.Errorf("%s listener: %w", what, err)
	}
	return listener, nil
}
