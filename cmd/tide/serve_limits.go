package main

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/spf13/pflag"

	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/server"
	"github.com/tidelog/tide/internal/wire"
)

// serveLimits are the Kafka listener's limits, each a flag and a
// properties key (Kafka's name where Kafka has the setting, tide.* where
// it does not). docs/compatibility.md lists what happens at each.
type serveLimits struct {
	maxRequestBytes         int
	queuedMaxRequestBytes   int64
	queuedMaxRequests       int
	maxConnections          int
	maxConnectionsPerIP     int
	perIPOverrides          string
	idleTimeout             time.Duration
	bodyTimeout             time.Duration
	maxInFlight             int
	fetchMaxBytes           int32
	maxTopicsPerRequest     int
	maxPartitionsPerRequest int
	maxDecompressedBytes    int
	maxWaitingFetches       int
}

// limitPropertyFlags maps the limits' properties keys to their flags.
var limitPropertyFlags = map[string]string{
	"socket.request.max.bytes": "max-request-bytes", "queued.max.request.bytes": "queued-max-request-bytes",
	"queued.max.requests": "queued-max-requests", "max.connections": "max-connections",
	"max.connections.per.ip": "max-connections-per-ip", "connections.max.idle.ms": "connections-max-idle",
	"max.connections.per.ip.overrides":           "max-connections-per-ip-overrides",
	"tide.max.in.flight.requests.per.connection": "max-in-flight-requests-per-connection",
	"tide.request.body.timeout.ms":               "request-body-timeout",
	"fetch.max.bytes":                            "fetch-max-bytes",
	"tide.max.topics.per.request":                "max-topics-per-request", "tide.max.partitions.per.request": "max-partitions-per-request",
	"tide.max.decompressed.batch.bytes": "max-decompressed-batch-bytes",
	"tide.max.waiting.fetches":          "max-waiting-fetches",
}

func registerLimitFlags(flags *pflag.FlagSet, l *serveLimits) {
	flags.IntVar(&l.maxRequestBytes, "max-request-bytes", wire.DefaultMaxRequestBytes, "the largest request a client may send; a larger size closes its connection (socket.request.max.bytes)")
	flags.Int64Var(&l.queuedMaxRequestBytes, "queued-max-request-bytes", server.DefaultKafkaQueuedMaxRequestBytes, "bytes of requests read and not yet taken by the node loop, over all connections; at the limit connections stop reading (queued.max.request.bytes)")
	flags.IntVar(&l.queuedMaxRequests, "queued-max-requests", server.DefaultKafkaQueuedMaxRequests, "requests read and not yet taken by the node loop, over all connections (queued.max.requests)")
	flags.IntVar(&l.maxConnections, "max-connections", server.DefaultKafkaMaxConnections, "Kafka connections open at once; one more is closed at once (max.connections)")
	flags.IntVar(&l.maxConnectionsPerIP, "max-connections-per-ip", 0, "Kafka connections open at once from one address, 0 for no limit (max.connections.per.ip)")
	flags.StringVar(&l.perIPOverrides, "max-connections-per-ip-overrides", "", "host:count,... replacing --max-connections-per-ip for those hosts (IP addresses, or names resolved at start), 0 refusing them (max.connections.per.ip.overrides)")
	flags.DurationVar(&l.idleTimeout, "connections-max-idle", server.DefaultKafkaIdleTimeout, "a Kafka connection without a request for this long is closed (connections.max.idle.ms)")
	flags.DurationVar(&l.bodyTimeout, "request-body-timeout", server.DefaultKafkaRequestBodyTimeout, "each MiB of a request's body must arrive within this, else the connection is closed and the room it held in the request queue freed (tide.request.body.timeout.ms)")
	flags.IntVar(&l.maxInFlight, "max-in-flight-requests-per-connection", server.DefaultKafkaMaxInFlight, "requests one connection may have read and not yet answered; at the limit it stops reading (tide.max.in.flight.requests.per.connection)")
	flags.Int32Var(&l.fetchMaxBytes, "fetch-max-bytes", wire.DefaultMaxFetchBytes, "the most record bytes one fetch response carries (fetch.max.bytes)")
	flags.IntVar(&l.maxTopicsPerRequest, "max-topics-per-request", wire.DefaultMaxTopicsPerRequest, "topics one request may name (tide.max.topics.per.request)")
	flags.IntVar(&l.maxPartitionsPerRequest, "max-partitions-per-request", wire.DefaultMaxPartitionsPerRequest, "partitions one request may name, over its topics (tide.max.partitions.per.request)")
	flags.IntVar(&l.maxDecompressedBytes, "max-decompressed-batch-bytes", record.DefaultMaxDecompressedBatchBytes, "the most a produced compressed batch may inflate to; a larger one is refused with INVALID_RECORD (tide.max.decompressed.batch.bytes)")
	flags.IntVar(&l.maxWaitingFetches, "max-waiting-fetches", server.DefaultKafkaMaxWaitingFetches, "fetches held in a long poll at once; past it a fetch is answered at once with what there is (tide.max.waiting.fetches)")
}

func rereadLimits(flags *pflag.FlagSet) serveLimits {
	var l serveLimits
	l.maxRequestBytes, _ = flags.GetInt("max-request-bytes")
	l.queuedMaxRequestBytes, _ = flags.GetInt64("queued-max-request-bytes")
	l.queuedMaxRequests, _ = flags.GetInt("queued-max-requests")
	l.maxConnections, _ = flags.GetInt("max-connections")
	l.maxConnectionsPerIP, _ = flags.GetInt("max-connections-per-ip")
	l.perIPOverrides, _ = flags.GetString("max-connections-per-ip-overrides")
	l.idleTimeout, _ = flags.GetDuration("connections-max-idle")
	l.bodyTimeout, _ = flags.GetDuration("request-body-timeout")
	l.maxInFlight, _ = flags.GetInt("max-in-flight-requests-per-connection")
	l.fetchMaxBytes, _ = flags.GetInt32("fetch-max-bytes")
	l.maxTopicsPerRequest, _ = flags.GetInt("max-topics-per-request")
	l.maxPartitionsPerRequest, _ = flags.GetInt("max-partitions-per-request")
	l.maxDecompressedBytes, _ = flags.GetInt("max-decompressed-batch-bytes")
	l.maxWaitingFetches, _ = flags.GetInt("max-waiting-fetches")
	return l
}

// refuseZeroLimits refuses a limit set to zero on the command line or in
// the properties file: zero in a Config means the default, and every limit
// but max.connections.per.ip needs at least 1, so a zero would otherwise
// be silently replaced.
func refuseZeroLimits(flags *pflag.FlagSet) error {
	for _, name := range slices.Sorted(maps.Values(limitPropertyFlags)) {
		flag := flags.Lookup(name)
		if name == "max-connections-per-ip" || name == "max-connections-per-ip-overrides" || !flag.Changed {
			continue
		}
		if value := flag.Value.String(); value == "0" || value == "0s" {
			return fmt.Errorf("--%s 0: want at least 1", name)
		}
	}
	return nil
}

// apply sets the limits in config; zeros take the defaults. Host names in
// the per-address overrides are resolved now, once, as Kafka does.
func (l serveLimits) apply(config *server.Config) error {
	if l.perIPOverrides != "" {
		overrides, err := server.ParseConnectionOverrides(l.perIPOverrides, lookupHost)
		if err != nil {
			return fmt.Errorf("max.connections.per.ip.overrides: %w", err)
		}
		config.KafkaMaxConnectionsPerIPOverrides = overrides
	}
	config.KafkaMaxRequestBytes, config.KafkaQueuedMaxRequestBytes = l.maxRequestBytes, l.queuedMaxRequestBytes
	config.KafkaQueuedMaxRequests = l.queuedMaxRequests
	config.KafkaMaxConnections, config.KafkaMaxConnectionsPerIP = l.maxConnections, l.maxConnectionsPerIP
	config.KafkaIdleTimeout, config.KafkaMaxInFlight = l.idleTimeout, l.maxInFlight
	config.KafkaRequestBodyTimeout = l.bodyTimeout
	config.KafkaMaxFetchBytes = l.fetchMaxBytes
	config.KafkaMaxTopicsPerRequest, config.KafkaMaxPartitionsPerRequest = l.maxTopicsPerRequest, l.maxPartitionsPerRequest
	config.MaxDecompressedBatchBytes, config.KafkaMaxWaitingFetches = l.maxDecompressedBytes, l.maxWaitingFetches
	return nil
}

func lookupHost(host string) ([]netip.Addr, error) {
	return net.DefaultResolver.LookupNetIP(context.Background(), "ip", host)
}
