package consumerheartbeat

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

var defaults = Options{ServerAssignors: []string{"uniform", "range"}}

func text(value string) *string { return &value }

// join is a well-formed v1 join: a client-generated member id, epoch 0, a
// rebalance timeout, a subscription and an empty owned list.
func join() *kmsg.ConsumerGroupHeartbeatRequest {
	request := kmsg.NewPtrConsumerGroupHeartbeatRequest()
	request.Version = 1
	request.Group, request.MemberID = "orders-app", "Xv1b2c3d4e5f6g7h8i9j0k"
	request.RebalanceTimeoutMillis = 300000
	request.SubscribedTopicNames = []string{"orders"}
	request.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{}
	return request
}

func TestValidate(t *testing.T) {
	for _, test := range []struct {
		name    string
		change  func(*kmsg.ConsumerGroupHeartbeatRequest)
		code    *kerr.Error
		message string
	}{
		{"a join", func(*kmsg.ConsumerGroupHeartbeatRequest) {}, nil, ""},
		{"a v0 join without a member id (the coordinator makes one)", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Version, r.MemberID = 0, "" }, nil, ""},
		{"a v1 join without a member id (KIP-1082)", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID = "" },
			kerr.InvalidRequest, "MemberId can't be empty."},
		{"a v0 heartbeat without a member id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Version, r.MemberID, r.MemberEpoch = 0, "", 3 },
			kerr.InvalidRequest, "MemberId can't be empty."},
		{"a v0 leave without a member id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Version, r.MemberID, r.MemberEpoch = 0, "", -1 },
			kerr.InvalidRequest, "MemberId can't be empty."},
		{"an empty group id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Group = "" }, kerr.InvalidRequest, "GroupId can't be empty."},
		{"an empty instance id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.InstanceID = text("") }, kerr.InvalidRequest, "InstanceId can't be empty."},
		{"an empty rack id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RackID = text("") }, kerr.InvalidRequest, "RackId can't be empty."},
		{"a join without a rebalance timeout", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.RebalanceTimeoutMillis = -1 },
			kerr.InvalidRequest, "RebalanceTimeoutMs must be provided in first request."},
		{"a join with owned partitions null", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.Topics = nil },
			kerr.InvalidRequest, "TopicPartitions must be empty when (re-)joining."},
		{"a join that owns partitions", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.Topics = []kmsg.ConsumerGroupHeartbeatRequestTopic{{Partitions: []int32{0}}}
		}, kerr.InvalidRequest, "TopicPartitions must be empty when (re-)joining."},
		{"a join without a subscription", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = nil },
			kerr.InvalidRequest, "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."},
		{"a join subscribed to nothing", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicNames = []string{} }, nil, ""},
		{"a heartbeat that leaves every field unchanged", func(r *kmsg.ConsumerGroupHeartbeatRequest) {
			r.MemberEpoch, r.RebalanceTimeoutMillis, r.SubscribedTopicNames, r.Topics = 7, -1, nil, nil
		}, nil, ""},
		{"a leave", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -1 }, nil, ""},
		{"a static leave", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch, r.InstanceID = -2, text("consumer-1") }, nil, ""},
		{"a static leave without an instance id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -2 },
			kerr.InvalidRequest, "InstanceId can't be null."},
		{"an epoch below -2", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberEpoch = -3 }, kerr.InvalidRequest, "MemberEpoch is invalid."},
		{"a server assignor the broker serves", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = text("range") }, nil, ""},
		{"a server assignor it does not", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.ServerAssignor = text("sticky") },
			kerr.UnsupportedAssignor, "ServerAssignor sticky is not supported. Supported assignors: uniform, range."},
		{"a regex", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.SubscribedTopicRegex = text("orders.*") },
			kerr.InvalidRequest, "SubscribedTopicRegex is not supported yet."},
		{"the member id is checked before the group id", func(r *kmsg.ConsumerGroupHeartbeatRequest) { r.MemberID, r.Group = "", "" },
			kerr.InvalidRequest, "MemberId can't be empty."},
	} {
		t.Run(test.name, func(t *testing.T) {
			request := join()
			test.change(request)
			err := Validate(request, defaults)
			checkError(t, err, test.code, test.message)
		})
	}
}

func checkError(t *testing.T, err error, code *kerr.Error, message string) {
	t.Helper()
	if code == nil {
		if err != nil {
			t.Fatalf("refused: %v", err)
		}
		return
	}
	var refused *Error
	if !errors.As(err, &refused) || refused.Code != code || refused.Message != message || !errors.Is(err, code) {
		t.Fatalf("got %v, want %s %q", err, code.Message, message)
	}
}

func TestValidateRegexWhenAllowed(t *testing.T) {
	options := defaults
	options.AllowRegex = true
	request := join()
	request.SubscribedTopicNames, request.SubscribedTopicRegex = nil, text("orders-.*")
	checkError(t, Validate(request, options), nil, "")
	request.SubscribedTopicRegex = text("orders-(")
	checkError(t, Validate(request, options), kerr.InvalidRegularExpression,
		"SubscribedTopicRegex `orders-(` is not a valid regular expression: error parsing regexp: missing closing ): `orders-(`.")
}

// FuzzValidate decodes arbitrary bytes as a ConsumerGroupHeartbeat request
// of each version and validates what decodes: it must never panic, and a
// request it accepts must satisfy the rules the coordinator then relies
// on.
func FuzzValidate(f *testing.F) {
	for _, version := range []int16{0, 1} {
		request := join()
		request.Version = version
		f.Add(version, request.AppendTo(nil))
		request.MemberEpoch, request.Topics = 5, nil
		f.Add(version, request.AppendTo(nil))
	}
	f.Fuzz(func(t *testing.T, version int16, data []byte) {
		request := kmsg.NewPtrConsumerGroupHeartbeatRequest()
		request.Version = version & 1
		if request.ReadFrom(data) != nil {
			return
		}
		err := Validate(request, defaults)
		var refused *Error
		if err != nil {
			if !errors.As(err, &refused) || refused.Code == nil || refused.Message == "" {
				t.Fatalf("an error without a Kafka code and message: %v", err)
			}
			return
		}
		if request.MemberEpoch < -2 || request.Group == "" || (request.MemberEpoch != 0 && request.MemberEpoch != -2 && request.MemberID == "") {
			t.Fatalf("accepted %+v", request)
		}
		if request.MemberEpoch == 0 && (request.Topics == nil || len(request.Topics) != 0 || request.RebalanceTimeoutMillis == -1) {
			t.Fatalf("accepted a join %+v", request)
		}
	})
}
