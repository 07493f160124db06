package replica

import (
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/rules"
)

var testPartition = metadata.TopicPartition{Topic: "t", Partition: 0}

// testConfig is the replica configuration of the tests.
func testConfig(flushAlways bool, legacy []rules.Rule) Config {
	config := Config{
		MinInsyncReplicas: 1, ReplicaLagTicks: 10, FetchRetryTicks: 3, ProposalRetryTicks: 5,
		FlushAlways: flushAlways, MaxBatchBytes: 1 << 20, MaxPendingProduces: 1000,
	}
	for _, rule := range legacy {
		config.Rules = config.Rules.Without(rule)
	}
	return config
}
