package consumerheartbeat

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// Member epochs with a meaning of their own in a heartbeat (KIP-848).
const (
	// JoinEpoch (0) joins or rejoins the group.
	JoinEpoch int32 = 0
	// LeaveEpoch (-1) leaves the group for good.
	LeaveEpoch int32 = -1
	// StaticLeaveEpoch (-2) is a static member leaving for a while: it
	// keeps its assignment for the session timeout.
	StaticLeaveEpoch int32 = -2
)

// clientGeneratedMemberIDVersion is the first version in which the client
// must generate its member id, also when joining (KIP-1082; Kafka's
// CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION).
const clientGeneratedMemberIDVersion = 1

// Error is a refused request: the Kafka error code for the response's
// ErrorCode and the message for its ErrorMessage, which clients log.
type Error struct {
	Code    *kerr.Error
	Message string
}

func (e *Error) Error() string { return e.Code.Message + ": " + e.Message }

// Unwrap lets errors.Is(err, kerr.InvalidRequest) see the code.
func (e *Error) Unwrap() error { return e.Code }

// Options are the broker settings validation depends on.
type Options struct {
	// ServerAssignors are the assignor names the broker serves, in
	// group.consumer.assignors order ("uniform", "range" by default).
	ServerAssignors []string
	// AllowRegex accepts SubscribedTopicRegex (v1, Kafka 4.0), which must
	// then compile as an RE2 expression. Without it a regex is refused as
	// Kafka 3.x refused it, since the coordinator does not resolve one.
	AllowRegex bool
}

// Validate returns nil for a well-formed request and an *Error otherwise,
// checking in Kafka's order so that a request breaking two rules gets
// Kafka's message. A nil slice in the request is a null field (kmsg
// decodes null arrays to nil and empty ones to empty slices).
func Validate(request *kmsg.ConsumerGroupHeartbeatRequest, options Options) error {
	if err := validateIdentity(request); err != nil {
		return err
	}
	if err := validateEpoch(request); err != nil {
		return err
	}
	if request.SubscribedTopicRegex != nil {
		if !options.AllowRegex {
			return invalid("SubscribedTopicRegex is not supported yet.")
		}
		if _, err := regexp.Compile(*request.SubscribedTopicRegex); err != nil {
			return &Error{Code: kerr.InvalidRegularExpression,
				Message: fmt.Sprintf("SubscribedTopicRegex `%s` is not a valid regular expression: %v.", *request.SubscribedTopicRegex, err)}
		}
	}
	if assignor := request.ServerAssignor; assignor != nil && !slices.Contains(options.ServerAssignors, *assignor) {
		return &Error{Code: kerr.UnsupportedAssignor, Message: fmt.Sprintf("ServerAssignor %s is not supported. Supported assignors: %s.",
			*assignor, strings.Join(options.ServerAssignors, ", "))}
	}
	return nil
}

// validateIdentity checks the member, group, instance and rack ids: a
// member id is required from v1 on (KIP-1082) and, in every version, once
// the member has an epoch or leaves; no id may be present but empty.
func validateIdentity(request *kmsg.ConsumerGroupHeartbeatRequest) error {
	if request.Version >= clientGeneratedMemberIDVersion || request.MemberEpoch > 0 || request.MemberEpoch == LeaveEpoch {
		if request.MemberID == "" {
			return invalid("MemberId can't be empty.")
		}
	}
	switch {
	case request.Group == "":
		return invalid("GroupId can't be empty.")
	case request.InstanceID != nil && *request.InstanceID == "":
		return invalid("InstanceId can't be empty.")
	case request.RackID != nil && *request.RackID == "":
		return invalid("RackId can't be empty.")
	}
	return nil
}

// validateEpoch checks what each kind of epoch requires: a join carries
// its rebalance timeout, an empty owned list (it owns nothing when it
// (re)joins) and a subscription (names or a regex; an empty list is a
// member subscribed to nothing); a static leave names its instance; no
// epoch is below -2.
func validateEpoch(request *kmsg.ConsumerGroupHeartbeatRequest) error {
	switch epoch := request.MemberEpoch; {
	case epoch == JoinEpoch:
		if request.RebalanceTimeoutMillis == -1 {
			return invalid("RebalanceTimeoutMs must be provided in first request.")
		}
		if request.Topics == nil || len(request.Topics) > 0 {
			return invalid("TopicPartitions must be empty when (re-)joining.")
		}
		if request.SubscribedTopicNames == nil && request.SubscribedTopicRegex == nil {
			return invalid("Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining.")
		}
	case epoch == StaticLeaveEpoch:
		if request.InstanceID == nil {
			return invalid("InstanceId can't be null.")
		}
	case epoch < StaticLeaveEpoch:
		return invalid("MemberEpoch is invalid.")
	}
	return nil
}

func invalid(message string) error {
	return &Error{Code: kerr.InvalidRequest, Message: message}
}
