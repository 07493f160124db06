package metadata

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/tidelog/tide/internal/record"
)

// TestDatadriven runs the scripts in testdata/: metadata logs applied to an
// image, with what each entry did (applied, stale, or the error) and the
// image it left.
//
// Commands:
//
//	apply [offset=N]   one record per input line, at the next offsets (or at
//	                   offset N for the first, to show order enforcement)
//	describe
//
// Record lines:
//
//	register-broker id=I epoch=E incarnation=S
//	unfence-broker|fence-broker|begin-controlled-shutdown|unregister-broker id=I epoch=E
//	create-topic name=T partitions=N replicas=(I,...) min-insync=M [unclean]
//	delete-topic name=T
//	create-partitions topic=T [id=N] first=F count=C replicas=(I,...) [isr=(I,...)] [leader=I]
//	partition-change topic=T partition=P leader=I isr=(...) elr=(...) leader-epoch=L partition-epoch=E [replicas=(...)] [recovering]
func TestDatadriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		img := NewImage()
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "describe":
				return img.Describe()
			case "apply":
				offset := img.Offset() + 1
				d.MaybeScanArgs(t, "offset", &offset)
				var out strings.Builder
				for _, line := range strings.Split(strings.TrimSpace(d.Input), "\n") {
					r := parseRecord(t, line)
					applied, err := img.Apply(Entry{Offset: offset, Record: r})
					switch {
					case err != nil:
						fmt.Fprintf(&out, "error: %v\n", err)
					case applied:
						fmt.Fprintf(&out, "%d: applied %v\n", offset, r)
					default:
						fmt.Fprintf(&out, "%d: stale %v\n", offset, r)
					}
					offset = img.Offset() + 1
				}
				return out.String()
			}
			t.Fatalf("unknown command %q", d.Cmd)
			return ""
		})
	})
}

// recordArgs reads one record line's arguments.
type recordArgs map[string][]string

func (a recordArgs) integer(t *testing.T, key string) int64 {
	t.Helper()
	values, ok := a[key]
	if !ok || len(values) != 1 {
		t.Fatalf("missing %s", key)
	}
	n, err := strconv.ParseInt(values[0], 10, 64)
	if err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return n
}

func (a recordArgs) brokers(t *testing.T, key string) []BrokerID {
	t.Helper()
	ids := []BrokerID{}
	for _, value := range a[key] {
		if value == "" {
			continue
		}
		id, err := strconv.Atoi(value)
		if err != nil {
			t.Fatalf("%s: %v", key, err)
		}
		ids = append(ids, BrokerID(id))
	}
	return ids
}

func parseRecord(t *testing.T, line string) Record {
	t.Helper()
	command, parsed, err := datadriven.ParseLine(line)
	if err != nil {
		t.Fatal(err)
	}
	args := recordArgs{}
	for _, arg := range parsed {
		args[arg.Key] = arg.Vals
	}
	name := func(key string) string { return strings.Join(args[key], "") }
	id, epoch := func() BrokerID { return BrokerID(args.integer(t, "id")) }, func() BrokerEpoch {
		return BrokerEpoch(args.integer(t, "epoch"))
	}
	switch command {
	case "register-broker":
		return RegisterBroker{ID: id(), Epoch: epoch(), Incarnation: name("incarnation")}
	case "unfence-broker":
		return UnfenceBroker{ID: id(), Epoch: epoch()}
	case "fence-broker":
		return FenceBroker{ID: id(), Epoch: epoch()}
	case "begin-controlled-shutdown":
		return BeginControlledShutdown{ID: id(), Epoch: epoch()}
	case "unregister-broker":
		return UnregisterBroker{ID: id(), Epoch: epoch()}
	case "delete-topic":
		return DeleteTopic{Name: name("name")}
	case "create-topic":
		return parseCreateTopic(t, args)
	case "create-partitions":
		return parseCreatePartitions(t, args)
	case "assign-topic-id":
		return AssignTopicID{Name: name("name"), ID: parseTestTopicID(t, name("id"))}
	case "partition-change":
		change := PartitionChange{
			TopicPartition: TopicPartition{Topic: name("topic"), Partition: int32(args.integer(t, "partition"))},
			Leader:         BrokerID(args.integer(t, "leader")),
			ISR:            args.brokers(t, "isr"),
			ELR:            args.brokers(t, "elr"),
			LeaderEpoch:    record.LeaderEpoch(args.integer(t, "leader-epoch")),
			PartitionEpoch: PartitionEpoch(args.integer(t, "partition-epoch")),
		}
		if _, ok := args["replicas"]; ok {
			change.Replicas = args.brokers(t, "replicas")
		}
		if _, ok := args["recovering"]; ok {
			change.LeaderRecoveryState = Recovering
		}
		return change
	}
	t.Fatalf("unknown record %q", command)
	return nil
}

// parseCreateTopic gives partition i the replica list rotated by i, with the
// first replica leading and every replica in the ISR.
func parseCreateTopic(t *testing.T, args recordArgs) CreateTopic {
	replicas := args.brokers(t, "replicas")
	_, unclean := args["unclean"]
	create := CreateTopic{
		Name: strings.Join(args["name"], ""),
		Config: TopicConfig{ReplicationFactor: len(replicas),
			MinInsyncReplicas: int(args.integer(t, "min-insync")), UncleanLeaderElection: unclean},
	}
	if _, ok := args["id"]; ok {
		create.ID = parseTestTopicID(t, strings.Join(args["id"], ""))
	}
	for i := range int(args.integer(t, "partitions")) {
		rotated := append(append([]BrokerID{}, replicas[i%len(replicas):]...), replicas[:i%len(replicas)]...)
		create.Partitions = append(create.Partitions, PartitionState{
			TopicPartition: TopicPartition{Topic: create.Name, Partition: int32(i)},
			Replicas:       rotated, ISR: append([]BrokerID{}, rotated...), Leader: rotated[0],
		})
	}
	return create
}

// parseCreatePartitions gives every new partition the same replicas, ISR
// (the replicas unless isr= is given) and leader (the first replica unless
// leader= is given), so a line can show one bad partition state.
func parseCreatePartitions(t *testing.T, args recordArgs) CreatePartitions {
	name := strings.Join(args["topic"], "")
	create := CreatePartitions{Topic: name}
	if _, ok := args["id"]; ok {
		create.ID = parseTestTopicID(t, strings.Join(args["id"], ""))
	}
	replicas := args.brokers(t, "replicas")
	isr := replicas
	if _, ok := args["isr"]; ok {
		isr = args.brokers(t, "isr")
	}
	leader := NoBroker
	if len(replicas) > 0 {
		leader = replicas[0]
	}
	if _, ok := args["leader"]; ok {
		leader = BrokerID(args.integer(t, "leader"))
	}
	first := int32(args.integer(t, "first"))
	for i := range int32(args.integer(t, "count")) {
		create.Partitions = append(create.Partitions, PartitionState{
			TopicPartition: TopicPartition{Topic: name, Partition: first + i},
			Replicas:       append([]BrokerID{}, replicas...), ISR: append([]BrokerID{}, isr...), Leader: leader,
		})
	}
	return create
}

// parseTestTopicID reads an id as Kafka prints it, or a small number n for
// the id whose last byte is n, to keep test files readable.
func parseTestTopicID(t *testing.T, text string) TopicID {
	t.Helper()
	if n, err := strconv.Atoi(text); err == nil {
		return TopicID{15: byte(n)}
	}
	id, err := ParseTopicID(text)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
