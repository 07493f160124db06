package server

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tidelog/tide/internal/frontend"
	"github.com/tidelog/tide/internal/group"
)

// TestEmitGroupsSumsPerTopic: the per-topic sums add each topic's
// partitions, a lag the coordinator cannot tell is left out of the lag
// and its sum (and counted) but not out of the committed offsets, and the
// omitted rows are exported.
func TestEmitGroupsSumsPerTopic(t *testing.T) {
	groups := frontend.ViewGroups{Omitted: 7, Groups: []frontend.ViewGroup{{
		Overview: group.Overview{ID: "billing", Members: make([]group.MemberOverview, 2)},
		Partitions: []frontend.ViewGroupPartition{
			{Topic: "orders", Partition: 0, Committed: 10, EndOffset: 15, Lag: 5},
			{Topic: "orders", Partition: 1, Committed: 20, EndOffset: 27, Lag: 7},
			{Topic: "payments", Partition: 0, Committed: 3, EndOffset: -1, Lag: -1},
		}}}}
	out := make(chan prometheus.Metric, 100)
	emitGroups(out, groups)
	close(out)
	var lines []string
	for metric := range out {
		var written dto.Metric
		if err := metric.Write(&written); err != nil {
			t.Fatal(err)
		}
		var labels []string
		for _, pair := range written.Label {
			labels = append(labels, pair.GetValue())
		}
		name := metric.Desc().String()
		name = name[strings.Index(name, `"`)+1:]
		name = name[:strings.Index(name, `"`)]
		lines = append(lines, fmt.Sprintf("%s%v %v", name, labels, written.Gauge.GetValue()))
	}
	sort.Strings(lines)
	want := []string{
		"kafka_consumergroup_current_offset[billing 0 orders] 10",
		"kafka_consumergroup_current_offset[billing 0 payments] 3",
		"kafka_consumergroup_current_offset[billing 1 orders] 20",
		"kafka_consumergroup_current_offset_sum[billing orders] 30",
		"kafka_consumergroup_current_offset_sum[billing payments] 3",
		"kafka_consumergroup_lag[billing 0 orders] 5",
		"kafka_consumergroup_lag[billing 1 orders] 7",
		"kafka_consumergroup_lag_sum[billing orders] 12",
		"kafka_consumergroup_lag_unknown_partitions[] 1",
		"kafka_consumergroup_members[billing] 2",
		"kafka_consumergroup_partitions_omitted[] 7",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Fatalf("got\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
