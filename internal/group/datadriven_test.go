package group

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestDatadriven runs the traces in testdata/: group requests handed to a
// coordinator, each command printing the answers and appends that came
// out. Appends are reported only by append-done, so a trace shows what
// waits for a commit. Member ids print as m1, m2, ... in the order they
// were handed out.
//
// Commands:
//
//	join group=G [member=M] [version=V] [instance=I] [protocols=(P,...)] [session=MS] [rebalance=MS]
//	sync group=G member=M generation=N [instance=I] [assign=(M:bytes,...)]
//	heartbeat group=G member=M generation=N [instance=I]
//	leave group=G [members=(M,...)] [instances=(I,...)] [version=V]
//	commit group=G [member=M] [generation=N] offsets=(topic/partition=offset,...) [version=V]
//	fetch group=G [partitions=(topic/partition,...)] [stable] [version=V]
//	delete groups=(G,...)
//	consumer-heartbeat group=G member=M epoch=N [topics=(T,...)] [owned=(T/P,...)|owned=none] [instance=I]
//	                           a KIP-848 heartbeat (v1): a join with epoch=0 (topics default to t);
//	                           owned absent is a null field; owned=none an empty list
//	consumer-describe group=G  ConsumerGroupDescribe
//	tick ms=MS
//	append-done [error=CODE]   reports every append in flight
//	failover                   a new coordinator loads the committed log
//	describe                   the live groups and the durable view
func TestDatadriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		trace := &trace{h: newHarness(t, DefaultConfig()), aliases: map[string]string{}, names: map[string]string{}, kinds: map[RequestID]string{}}
		trace.h.autoCommit = false
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			return trace.run(t, d)
		})
	})
}

type trace struct {
	h       *harness
	aliases map[string]string // member id -> m1
	names   map[string]string // m1 -> member id
	kinds   map[RequestID]string
	printed int
	appends int
}

// commandArgs are a command's arguments, with defaults.
type commandArgs struct {
	t      *testing.T
	values map[string][]string
}

func (a commandArgs) one(key, fallback string) string {
	if values, ok := a.values[key]; ok && len(values) > 0 {
		return values[0]
	}
	return fallback
}

func (a commandArgs) number(key string, fallback int64) int64 {
	value, err := strconv.ParseInt(a.one(key, strconv.FormatInt(fallback, 10)), 10, 64)
	if err != nil {
		a.t.Fatalf("%s: %v", key, err)
	}
	return value
}

func (tr *trace) run(t *testing.T, d *datadriven.TestData) string {
	args := commandArgs{t: t, values: map[string][]string{}}
	for _, arg := range d.CmdArgs {
		args.values[arg.Key] = arg.Vals
	}
	switch d.Cmd {
	case "tick":
		tr.h.advance(args.number("ms", 0))
	case "append-done":
		if code := int16(args.number("error", 0)); code != 0 {
			tr.h.failAll(code)
		} else {
			tr.h.commitAll()
		}
	case "failover":
		tr.h.failover()
	case "describe":
		return tr.describe()
	default:
		request := tr.request(t, d, args)
		if version := int16(args.number("version", -1)); version >= 0 {
			request.SetVersion(version)
		}
		tr.kinds[tr.h.nextRequest+1] = d.Cmd
		tr.h.send(request)
	}
	return tr.output()
}

// request builds the request a command sends.
func (tr *trace) request(t *testing.T, d *datadriven.TestData, args commandArgs) kmsg.Request {
	group, member := args.one("group", "g"), tr.member(args.one("member", ""))
	switch d.Cmd {
	case "join":
		request := joinRequestFor(9, group, member, args.values["protocols"]...)
		request.SessionTimeoutMillis, request.RebalanceTimeoutMillis = int32(args.number("session", 10000)), int32(args.number("rebalance", 20000))
		if instance := args.one("instance", ""); instance != "" {
			request.InstanceID = &instance
		}
		return request
	case "sync":
		assignments := map[string]string{}
		for _, entry := range args.values["assign"] {
			assigned, assignment, _ := strings.Cut(entry, ":")
			assignments[tr.member(assigned)] = assignment
		}
		request := syncRequestFor(group, member, int32(args.number("generation", 0)), assignments)
		if instance := args.one("instance", ""); instance != "" {
			request.InstanceID = &instance
		}
		return request
	case "heartbeat":
		request := &kmsg.HeartbeatRequest{Version: 4, Group: group, MemberID: member, Generation: int32(args.number("generation", 0))}
		if instance := args.one("instance", ""); instance != "" {
			request.InstanceID = &instance
		}
		return request
	case "leave":
		request := &kmsg.LeaveGroupRequest{Version: 4, Group: group}
		for _, leaving := range args.values["members"] {
			request.Members = append(request.Members, kmsg.LeaveGroupRequestMember{MemberID: tr.member(leaving)})
			request.MemberID = tr.member(leaving)
		}
		for _, instance := range args.values["instances"] {
			request.Members = append(request.Members, kmsg.LeaveGroupRequestMember{InstanceID: &instance})
		}
		return request
	case "commit":
		return tr.commit(t, args)
	case "fetch":
		request := &kmsg.OffsetFetchRequest{Version: 7, Group: group, RequireStable: d.HasArg("stable")}
		for _, entry := range args.values["partitions"] {
			topic, partition := parsePartition(t, entry)
			request.Topics = append(request.Topics, kmsg.OffsetFetchRequestTopic{Topic: topic, Partitions: []int32{partition}})
		}
		return request
	case "delete":
		return &kmsg.DeleteGroupsRequest{Version: 2, Groups: args.values["groups"]}
	case "consumer-heartbeat":
		return tr.consumerHeartbeat(t, group, args)
	case "consumer-describe":
		return &kmsg.ConsumerGroupDescribeRequest{Version: 1, Groups: []string{group}}
	}
	t.Fatalf("unknown command %q", d.Cmd)
	return nil
}

func (tr *trace) commit(t *testing.T, args commandArgs) *kmsg.OffsetCommitRequest {
	request := kmsg.NewPtrOffsetCommitRequest()
	request.Version, request.Group, request.MemberID = 8, args.one("group", "g"), tr.member(args.one("member", ""))
	request.Generation = int32(args.number("generation", -1))
	for _, entry := range args.values["offsets"] {
		key, value, _ := strings.Cut(entry, "=")
		topic, partition := parsePartition(t, key)
		offset, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			t.Fatalf("offset %q: %v", entry, err)
		}
		request.Topics = append(request.Topics, kmsg.OffsetCommitRequestTopic{Topic: topic,
			Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: partition, Offset: offset, LeaderEpoch: 1}}})
	}
	return request
}

func (tr *trace) consumerHeartbeat(t *testing.T, group string, args commandArgs) *kmsg.ConsumerGroupHeartbeatRequest {
	epoch := int32(args.number("epoch", 0))
	request := consumerBeat(group, args.one("member", ""), epoch, nil)
	if epoch == 0 {
		request = consumerJoin(group, args.one("member", ""), "t")
		if topics, ok := args.values["topics"]; ok {
			request.SubscribedTopicNames = topics
		}
	}
	if instance := args.one("instance", ""); instance != "" {
		request.InstanceID = &instance
	}
	owned, ok := args.values["owned"]
	if !ok {
		return request
	}
	request.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	for _, entry := range owned {
		if entry == "none" {
			continue
		}
		topic, partition := parsePartition(t, entry)
		request.Topics = append(request.Topics, kmsg.ConsumerGroupHeartbeatRequestTopic{TopicID: testTopics[topic].ID, Partitions: []int32{partition}})
	}
	return request
}

func parsePartition(t *testing.T, entry string) (string, int32) {
	topic, partition, _ := strings.Cut(entry, "/")
	number, err := strconv.ParseInt(partition, 10, 32)
	if err != nil {
		t.Fatalf("partition %q: %v", entry, err)
	}
	return topic, int32(number)
}

// member turns an alias into the member id it stands for ("" stays "").
func (tr *trace) member(alias string) string {
	if id, ok := tr.names[alias]; ok {
		return id
	}
	return alias
}

// alias names a member id, handing out the next name for a new one.
func (tr *trace) alias(id string) string {
	if id == "" {
		return `""`
	}
	if alias, ok := tr.aliases[id]; ok {
		return alias
	}
	alias := fmt.Sprintf("m%d", len(tr.aliases)+1)
	tr.aliases[id], tr.names[alias] = alias, id
	return alias
}

// output prints what came out of Ready since the last command.
func (tr *trace) output() string {
	var out strings.Builder
	for _, write := range tr.h.appendOrder[tr.appends:] {
		fmt.Fprintf(&out, "append %d: %s\n", write.ID, tr.describeRecords(write.Records))
	}
	tr.appends = len(tr.h.appendOrder)
	for _, id := range tr.h.answerOrder[tr.printed:] {
		fmt.Fprintf(&out, "%s#%d -> %s\n", tr.kinds[id], id, tr.describeAnswer(tr.h.answers[id]))
	}
	tr.printed = len(tr.h.answerOrder)
	if out.Len() == 0 {
		return "ok\n"
	}
	return out.String()
}

func (tr *trace) describeRecords(records []Record) string {
	var parts []string
	for _, record := range records {
		decoded, err := decodeRecord(record)
		switch {
		case err != nil:
			parts = append(parts, "bad record")
		case decoded.consumer != nil:
			parts = append(parts, tr.describeConsumerRecord(decoded.consumer))
		case decoded.partition != nil && decoded.offset == nil:
			parts = append(parts, fmt.Sprintf("offset %s %s/%d deleted", decoded.group, decoded.partition.topic, decoded.partition.partition))
		case decoded.partition != nil:
			parts = append(parts, fmt.Sprintf("offset %s %s/%d=%d", decoded.group, decoded.partition.topic, decoded.partition.partition, decoded.offset.offset))
		case decoded.metadata == nil:
			parts = append(parts, fmt.Sprintf("group %s deleted", decoded.group))
		default:
			var members []string
			for _, member := range decoded.metadata.members {
				members = append(members, fmt.Sprintf("%s:%s", tr.alias(member.memberID), member.assignment))
			}
			parts = append(parts, fmt.Sprintf("group %s generation=%d protocol=%q members=(%s)", decoded.group, decoded.metadata.generation,
				decoded.metadata.protocol, strings.Join(members, ",")))
		}
	}
	return strings.Join(parts, "; ")
}

func errorName(code int16) string {
	if code == 0 {
		return "NONE"
	}
	if err := kerr.ErrorForCode(code); err != nil {
		if known, ok := err.(*kerr.Error); ok {
			return known.Message
		}
	}
	return strconv.Itoa(int(code))
}

func (tr *trace) describeAnswer(response kmsg.Response) string {
	switch response := response.(type) {
	case *kmsg.JoinGroupResponse:
		if response.ErrorCode != 0 {
			return fmt.Sprintf("%s member=%s", errorName(response.ErrorCode), tr.alias(response.MemberID))
		}
		var members []string
		for _, member := range response.Members {
			members = append(members, tr.alias(member.MemberID))
		}
		skip := ""
		if response.SkipAssignment {
			skip = " skip-assignment"
		}
		return fmt.Sprintf("NONE member=%s generation=%d protocol=%s leader=%s members=(%s)%s", tr.alias(response.MemberID), response.Generation,
			*response.Protocol, tr.alias(response.LeaderID), strings.Join(members, ","), skip)
	case *kmsg.SyncGroupResponse:
		return fmt.Sprintf("%s assignment=%q", errorName(response.ErrorCode), response.MemberAssignment)
	case *kmsg.HeartbeatResponse:
		return errorName(response.ErrorCode)
	case *kmsg.LeaveGroupResponse:
		var members []string
		for _, member := range response.Members {
			members = append(members, tr.alias(member.MemberID)+":"+errorName(member.ErrorCode))
		}
		return fmt.Sprintf("%s members=(%s)", errorName(response.ErrorCode), strings.Join(members, ","))
	case *kmsg.OffsetCommitResponse:
		var parts []string
		for _, topic := range response.Topics {
			for _, partition := range topic.Partitions {
				parts = append(parts, fmt.Sprintf("%s/%d=%s", topic.Topic, partition.Partition, errorName(partition.ErrorCode)))
			}
		}
		return strings.Join(parts, " ")
	case *kmsg.OffsetFetchResponse:
		parts := []string{errorName(response.ErrorCode)}
		for _, topic := range response.Topics {
			for _, partition := range topic.Partitions {
				parts = append(parts, fmt.Sprintf("%s/%d=%d epoch=%d", topic.Topic, partition.Partition, partition.Offset, partition.LeaderEpoch))
			}
		}
		return strings.Join(parts, " ")
	case *kmsg.ConsumerGroupHeartbeatResponse, *kmsg.ConsumerGroupDescribeResponse:
		return describeConsumerAnswer(response)
	case *kmsg.DeleteGroupsResponse:
		var parts []string
		for _, group := range response.Groups {
			parts = append(parts, group.Group+"="+errorName(group.ErrorCode))
		}
		return strings.Join(parts, " ")
	}
	return fmt.Sprintf("%T", response)
}

// describe prints the live groups with aliases, then the durable view.
func (tr *trace) describe() string {
	var out strings.Builder
	c := tr.h.coordinator
	for _, id := range sortedKeys(c.groups) {
		group := c.groups[id]
		var members []string
		for _, memberID := range group.sortedMemberIDs() {
			members = append(members, tr.alias(memberID))
		}
		sort.Strings(members)
		fmt.Fprintf(&out, "live %s %s generation=%d protocol=%q leader=%s members=(%s)\n", id, group.state, group.generation, group.protocol,
			tr.alias(group.leader), strings.Join(members, ","))
	}
	for _, id := range sortedKeys(c.durable) {
		durable := c.durable[id]
		if metadata := durable.metadata; metadata != nil {
			var members []string
			for _, member := range metadata.members {
				members = append(members, fmt.Sprintf("%s:%s", tr.alias(member.memberID), member.assignment))
			}
			fmt.Fprintf(&out, "durable %s generation=%d protocol=%q members=(%s)\n", id, metadata.generation, metadata.protocol, strings.Join(members, ","))
		}
		for _, partition := range sortedPartitions(durable.offsets) {
			fmt.Fprintf(&out, "durable %s %s/%d=%d\n", id, partition.topic, partition.partition, durable.offsets[partition].offset)
		}
	}
	if out.Len() == 0 {
		return "nothing\n"
	}
	return out.String()
}

// topicNameOf names a topic id of testTopics.
func topicNameOf(id [16]byte) string {
	for name, topic := range testTopics {
		if topic.ID == id {
			return name
		}
	}
	return fmt.Sprintf("%x", id)
}

func describeWireAssignment(assignment kmsg.Assignment) string {
	var partitions []string
	for _, topic := range assignment.TopicPartitions {
		for _, partition := range topic.Partitions {
			partitions = append(partitions, fmt.Sprintf("%s/%d", topic.Topic, partition))
		}
	}
	return "(" + strings.Join(partitions, ",") + ")"
}

// describeConsumerRecord prints a KIP-848 record: its type, member and
// the value's meaning.
func (tr *trace) describeConsumerRecord(record *consumerRecord) string {
	key := record.key
	name := map[int16]string{3: "epoch", 4: "subscription", 5: "member", 6: "assignment-epoch", 7: "target", 8: "current"}[key.recordType]
	prefix := fmt.Sprintf("cg %s %s", key.group, name)
	if key.member != "" {
		prefix += " " + key.member
	}
	if record.value == nil {
		return prefix + " deleted"
	}
	partitions := func(topics []topicIDPartitions) string {
		var out []string
		for _, topic := range topics {
			for _, partition := range topic.partitions {
				out = append(out, fmt.Sprintf("%s/%d", topicNameOf(topic.id), partition))
			}
		}
		return "(" + strings.Join(out, ",") + ")"
	}
	switch key.recordType {
	case recordTypeConsumerGroupMetadata, recordTypeConsumerGroupTargetAssignmentMetadata:
		epoch, _ := decodeGroupEpochValue(record.value, "")
		return fmt.Sprintf("%s=%d", prefix, epoch)
	case recordTypeConsumerGroupPartitionMetadata:
		topics, _ := decodePartitionMetadataValue(record.value)
		var out []string
		for _, topic := range topics {
			out = append(out, fmt.Sprintf("%s:%d", topic.name, topic.partitions))
		}
		return prefix + " (" + strings.Join(out, ",") + ")"
	case recordTypeConsumerGroupMemberMetadata:
		member, _ := decodeMemberMetadataValue(record.value)
		return fmt.Sprintf("%s topics=(%s)", prefix, strings.Join(member.subscribedTopicNames, ","))
	case recordTypeConsumerGroupTargetAssignmentMember:
		topics, _ := decodeTargetMemberValue(record.value)
		return prefix + " " + partitions(topics)
	}
	current, _ := decodeCurrentAssignmentValue(record.value)
	return fmt.Sprintf("%s epoch=%d state=%s assigned=%s pending=%s", prefix, current.memberEpoch, reconcileStateName(current.state),
		partitions(current.assigned), partitions(current.pendingRevocation))
}

// describeConsumerAnswer prints a KIP-848 answer.
func describeConsumerAnswer(response kmsg.Response) string {
	switch response := response.(type) {
	case *kmsg.ConsumerGroupHeartbeatResponse:
		if response.ErrorCode != 0 {
			return errorName(response.ErrorCode)
		}
		text := fmt.Sprintf("NONE epoch=%d", response.MemberEpoch)
		if response.Assignment != nil {
			var partitions []string
			for _, topic := range response.Assignment.Topics {
				for _, partition := range topic.Partitions {
					partitions = append(partitions, fmt.Sprintf("%s/%d", topicNameOf(topic.TopicID), partition))
				}
			}
			text += fmt.Sprintf(" assigned=(%s)", strings.Join(partitions, ","))
		}
		return text
	case *kmsg.ConsumerGroupDescribeResponse:
		var parts []string
		for _, group := range response.Groups {
			if group.ErrorCode != 0 {
				parts = append(parts, group.Group+"="+errorName(group.ErrorCode))
				continue
			}
			text := fmt.Sprintf("%s %s epoch=%d assignment-epoch=%d assignor=%s", group.Group, group.State, group.Epoch, group.AssignmentEpoch, group.AssignorName)
			for _, member := range group.Members {
				text += fmt.Sprintf("\n  %s epoch=%d assigned=%s target=%s", member.MemberID, member.MemberEpoch,
					describeWireAssignment(member.Assignment), describeWireAssignment(member.TargetAssignment))
			}
			parts = append(parts, text)
		}
		return strings.Join(parts, "\n")
	}
	return ""
}
