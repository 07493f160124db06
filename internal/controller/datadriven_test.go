package controller

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/record"
	"github.com/tidelog/tide/internal/rules"
)

// TestDatadriven runs the scenario scripts in testdata/. Each decision
// command prints the records it decided and the code it answered, and its
// records are applied to the image, as the quorum will do.
//
// Commands:
//
//	register id=I [incarnation=S] [clean]        (clean: previous epoch = registered epoch)
//	heartbeat id=I [epoch=E] [shutdown] [caught-up]
//	fence-expired now=T timeout=T [last=(I:T, ...)]  (brokers missing from last never heartbeated)
//	shutdown id=I [epoch=E]
//	unregister id=I
//	create-topic name=T partitions=N rf=N [min-insync=N] [unclean]
//	delete-topic name=T
//	create-partitions name=T count=N [assign=(I:I:..., ...)]  (one colon-separated replica list per new partition)
//	alter id=I [epoch=E] topic=T partition=P isr=(I, ...) [leader-epoch=L] [partition-epoch=E] [stale-epochs=(I, ...)] [recovered]
//	elect-preferred partitions=(T-P, ...)
//	reassign topic=T partition=P (replicas=(I, ...) | cancel) [legacy]  (legacy: rule reassignment-completes-in-isr off)
//	list-reassignments [topic=T partitions=(P, ...)]
//	rebalance
//	describe
//
// alter defaults to the partition's current epochs and the members' current
// broker epochs; stale-epochs gives the listed members their epoch minus one.
func TestDatadriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		c := newCluster(t)
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			if d.Cmd == "describe" {
				return c.image.Describe()
			}
			records, answer, err := runCommand(t, c, d)
			if err != nil {
				return fmt.Sprintf("error: %v\n", err)
			}
			c.apply(records)
			return describeRecords(records) + answer + "\n"
		})
	})
}

func runCommand(t *testing.T, c *cluster, d *datadriven.TestData) ([]metadata.Record, string, error) {
	var id metadata.BrokerID
	d.MaybeScanArgs(t, "id", &id)
	epoch := c.epoch(id)
	d.MaybeScanArgs(t, "epoch", &epoch)
	switch d.Cmd {
	case "register":
		incarnation := fmt.Sprintf("%d-%d", id, c.image.Offset()+1)
		d.MaybeScanArgs(t, "incarnation", &incarnation)
		previous := metadata.NoBrokerEpoch
		if d.HasArg("clean") {
			previous = c.epoch(id)
		}
		records, epoch, code, err := RegisterBroker(c.image, id, incarnation, "", previous, c.image.Offset()+1)
		return records, fmt.Sprintf("%s epoch=%d", CodeName(code), epoch), err
	case "heartbeat":
		records, code, err := Heartbeat(c.image, id, epoch, d.HasArg("shutdown"), d.HasArg("caught-up"))
		return records, CodeName(code), err
	case "fence-expired":
		var now, timeout int64
		d.ScanArgs(t, "now", &now)
		d.ScanArgs(t, "timeout", &timeout)
		records, err := FenceExpired(c.image, parseTicks(t, d), now, timeout)
		return records, "ok", err
	case "shutdown":
		records, code, err := ControlledShutdown(c.image, id, epoch)
		return records, CodeName(code), err
	case "unregister":
		records, code, err := UnregisterBroker(c.image, id)
		return records, CodeName(code), err
	case "create-partitions":
		request := CreatePartitionsRequest{}
		d.ScanArgs(t, "name", &request.Topic)
		d.ScanArgs(t, "count", &request.Count)
		if d.HasArg("assign") {
			request.Assignments = [][]metadata.BrokerID{}
		}
		for _, list := range argValues(d, "assign") {
			var replicas []metadata.BrokerID
			for _, text := range strings.Split(list, ":") {
				replica, _ := strconv.Atoi(text)
				replicas = append(replicas, metadata.BrokerID(replica))
			}
			request.Assignments = append(request.Assignments, replicas)
		}
		records, code, err := CreatePartitions(c.image, request)
		return records, CodeName(code), err
	case "create-topic", "delete-topic":
		return runTopicCommand(t, c, d)
	case "alter":
		return runAlter(t, c, d, id, epoch)
	case "reassign", "list-reassignments", "rebalance":
		return runReassign(t, c, d)
	case "elect-preferred":
		var partitions []metadata.TopicPartition
		for _, name := range argValues(d, "partitions") {
			cut := strings.LastIndex(name, "-")
			index, _ := strconv.Atoi(name[cut+1:])
			partitions = append(partitions, metadata.TopicPartition{Topic: name[:cut], Partition: int32(index)})
		}
		records, response, err := ElectPreferred(c.image, partitions)
		var answers []string
		for _, result := range response.Results {
			answers = append(answers, fmt.Sprintf("%s %s", result.TopicPartition, CodeName(result.ErrorCode)))
		}
		return records, CodeName(response.ErrorCode) + ": " + strings.Join(answers, ", "), err
	}
	t.Fatalf("unknown command %q", d.Cmd)
	return nil, "", nil
}

func runTopicCommand(t *testing.T, c *cluster, d *datadriven.TestData) ([]metadata.Record, string, error) {
	var name string
	d.ScanArgs(t, "name", &name)
	if d.Cmd == "delete-topic" {
		records, code, err := DeleteTopic(c.image, name, metadata.NoTopicID)
		return records, CodeName(code), err
	}
	request := CreateTopicRequest{Name: name}
	d.ScanArgs(t, "partitions", &request.Partitions)
	d.ScanArgs(t, "rf", &request.ReplicationFactor)
	d.MaybeScanArgs(t, "min-insync", &request.Config.MinInsyncReplicas)
	request.Config.UncleanLeaderElection = d.HasArg("unclean")
	records, code, err := CreateTopic(c.image, request, c.topicIDs)
	return records, CodeName(code), err
}

func runAlter(t *testing.T, c *cluster, d *datadriven.TestData, id metadata.BrokerID,
	epoch metadata.BrokerEpoch) ([]metadata.Record, string, error) {
	var tp metadata.TopicPartition
	d.ScanArgs(t, "topic", &tp.Topic)
	d.ScanArgs(t, "partition", &tp.Partition)
	current, _ := c.image.Partition(tp)
	item := AlterPartitionItem{TopicPartition: tp, LeaderEpoch: current.LeaderEpoch,
		PartitionEpoch: current.PartitionEpoch, LeaderRecoveryState: current.LeaderRecoveryState}
	var leaderEpoch int32
	if d.MaybeScanArgs(t, "leader-epoch", &leaderEpoch) {
		item.LeaderEpoch = record.LeaderEpoch(leaderEpoch)
	}
	d.MaybeScanArgs(t, "partition-epoch", &item.PartitionEpoch)
	if d.HasArg("recovered") {
		item.LeaderRecoveryState = metadata.Recovered
	}
	stale := argValues(d, "stale-epochs")
	for _, member := range argValues(d, "isr") {
		memberID, _ := strconv.Atoi(member)
		memberEpoch := c.epoch(metadata.BrokerID(memberID))
		for _, staleID := range stale {
			if staleID == member {
				memberEpoch--
			}
		}
		item.NewISR = append(item.NewISR, BrokerIDAndEpoch{ID: metadata.BrokerID(memberID), Epoch: memberEpoch})
	}
	records, response, err := AlterPartition(c.image, AlterPartitionRequest{
		BrokerID: id, BrokerEpoch: epoch, Partitions: []AlterPartitionItem{item}})
	if response.ErrorCode != 0 || err != nil {
		return records, CodeName(response.ErrorCode), err
	}
	result := response.Partitions[0]
	if result.ErrorCode != 0 {
		return records, CodeName(result.ErrorCode), nil
	}
	return records, "NONE " + result.Partition.String(), nil
}

// argValues returns an argument's values, without the empty one that "()"
// parses to.
func argValues(d *datadriven.TestData, key string) []string {
	arg, ok := d.Arg(key)
	if !ok {
		return nil
	}
	var values []string
	for _, value := range arg.Vals {
		if value = strings.TrimSpace(value); value != "" {
			values = append(values, value)
		}
	}
	return values
}

func parseTicks(t *testing.T, d *datadriven.TestData) map[metadata.BrokerID]int64 {
	ticks := map[metadata.BrokerID]int64{}
	for _, pair := range argValues(d, "last") {
		idText, tickText, ok := strings.Cut(pair, ":")
		id, idErr := strconv.Atoi(idText)
		tick, tickErr := strconv.ParseInt(tickText, 10, 64)
		if !ok || idErr != nil || tickErr != nil {
			t.Fatalf("bad last=%s", pair)
		}
		ticks[metadata.BrokerID(id)] = tick
	}
	return ticks
}

func runReassign(t *testing.T, c *cluster, d *datadriven.TestData) ([]metadata.Record, string, error) {
	switch d.Cmd {
	case "rebalance":
		records, more, err := Rebalance(c.image, DefaultLeaderImbalancePercentage)
		return records, fmt.Sprintf("more=%t", more), err
	case "list-reassignments":
		var named map[string][]int32
		if d.HasArg("topic") {
			var topic string
			d.ScanArgs(t, "topic", &topic)
			named = map[string][]int32{topic: nil}
			for _, text := range argValues(d, "partitions") {
				index, _ := strconv.Atoi(text)
				named[topic] = append(named[topic], int32(index))
			}
		}
		var lines []string
		for _, partition := range ListReassignments(c.image, named) {
			lines = append(lines, partition.String())
		}
		if len(lines) == 0 {
			return nil, "listed: none", nil
		}
		return nil, "listed:\n" + strings.Join(lines, "\n"), nil
	}
	request := ReassignRequest{}
	d.ScanArgs(t, "topic", &request.Topic)
	d.ScanArgs(t, "partition", &request.Partition)
	if !d.HasArg("cancel") {
		request.Replicas = []metadata.BrokerID{}
	}
	for _, text := range argValues(d, "replicas") {
		id, _ := strconv.Atoi(text)
		request.Replicas = append(request.Replicas, metadata.BrokerID(id))
	}
	var in rules.Rules
	if d.HasArg("legacy") {
		in = in.Without(rules.ReassignmentCompletesInISR)
	}
	records, code, err := Reassign(c.image, request, in)
	if code != 0 || err != nil {
		return records, CodeName(code), err
	}
	after := c.image.Clone()
	for _, r := range records {
		after.Apply(metadata.Entry{Offset: after.Offset() + 1, Record: r})
	}
	state, _ := after.Partition(request.TopicPartition)
	return records, "NONE " + state.String(), nil
}
