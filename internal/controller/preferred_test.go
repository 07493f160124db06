package controller

import (
	"fmt"
	"testing"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
)

func TestElectPreferred(t *testing.T) {
	c := newCluster(t)
	c.register(1, 2, 3)
	c.createTopic("orders", 1, 3, 2, false)
	tp := metadata.TopicPartition{Topic: "orders"}
	preferred := c.partition("orders", 0).Replicas[0]
	elect := func(partitions ...metadata.TopicPartition) ([]metadata.Record, []int16) {
		t.Helper()
		records, response, err := ElectPreferred(c.image, partitions)
		if err != nil || response.ErrorCode != 0 {
			t.Fatal(CodeName(response.ErrorCode), err)
		}
		var codes []int16
		for _, result := range response.Results {
			codes = append(codes, result.ErrorCode)
		}
		return records, codes
	}
	if _, codes := elect(tp, metadata.TopicPartition{Topic: "nope"}); fmt.Sprint(codes) != fmt.Sprint([]int16{
		kerr.ElectionNotNeeded.Code, kerr.UnknownTopicOrPartition.Code}) {
		t.Errorf("got %v", codes)
	}
	// The preferred replica fails over and comes back, out of the ISR: it
	// is not elected, whatever its registration says.
	c.fence(preferred)
	c.register(preferred)
	if _, codes := elect(tp); codes[0] != kerr.PreferredLeaderNotAvailable.Code {
		t.Errorf("got %s, want PREFERRED_LEADER_NOT_AVAILABLE", CodeName(codes[0]))
	}
	// Once its leader has added it back to the ISR, it is.
	c.apply(mustAlter(c, "orders", 0, c.partition("orders", 0).Replicas...))
	before := c.partition("orders", 0)
	records, codes := elect(tp, tp)
	if codes[0] != 0 || codes[1] != kerr.ElectionNotNeeded.Code {
		t.Fatalf("got %v", codes)
	}
	c.apply(records)
	after := c.partition("orders", 0)
	if after.Leader != preferred || after.LeaderEpoch != before.LeaderEpoch+1 ||
		after.PartitionEpoch != before.PartitionEpoch+1 || fmt.Sprint(after.ISR) != fmt.Sprint(before.ISR) {
		t.Errorf("before %v after %v", before, after)
	}
	_, response, _ := ElectPreferred(c.image, make([]metadata.TopicPartition, MaxPartitionsPerRequest+1))
	if response.ErrorCode != kerr.InvalidRequest.Code {
		t.Errorf("oversized request: got %s", CodeName(response.ErrorCode))
	}
}
