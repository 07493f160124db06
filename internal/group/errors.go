package group

import (
	"github.com/twmb/franz-go/pkg/kmsg"
)

// errorResponse answers a whole request with one error code, in the shape
// its API carries errors: per partition for OffsetCommit, per group for
// DescribeGroups, DeleteGroups and OffsetFetch v8+, at the top otherwise.
// It serves COORDINATOR_LOAD_IN_PROGRESS, NOT_COORDINATOR and the
// requests refused before any group is looked at.
func errorResponse(request kmsg.Request, errorCode int16) kmsg.Response {
	response := request.ResponseKind()
	response.SetVersion(request.GetVersion())
	switch request := request.(type) {
	case *kmsg.OffsetCommitRequest:
		fillOffsetCommitError(response.(*kmsg.OffsetCommitResponse), request, errorCode)
	case *kmsg.OffsetFetchRequest:
		fillOffsetFetchError(response.(*kmsg.OffsetFetchResponse), request, errorCode)
	case *kmsg.DescribeGroupsRequest:
		out := response.(*kmsg.DescribeGroupsResponse)
		for _, id := range request.Groups {
			out.Groups = append(out.Groups, kmsg.DescribeGroupsResponseGroup{Group: id, ErrorCode: errorCode, AuthorizedOperations: -2147483648})
		}
	case *kmsg.DeleteGroupsRequest:
		out := response.(*kmsg.DeleteGroupsResponse)
		for _, id := range request.Groups {
			out.Groups = append(out.Groups, kmsg.DeleteGroupsResponseGroup{Group: id, ErrorCode: errorCode})
		}
	case *kmsg.ListGroupsRequest:
		response.(*kmsg.ListGroupsResponse).ErrorCode = errorCode
	case *kmsg.JoinGroupRequest:
		out := response.(*kmsg.JoinGroupResponse)
		out.ErrorCode, out.Generation, out.MemberID = errorCode, -1, request.MemberID
	case *kmsg.SyncGroupRequest:
		response.(*kmsg.SyncGroupResponse).ErrorCode = errorCode
	case *kmsg.HeartbeatRequest:
		response.(*kmsg.HeartbeatResponse).ErrorCode = errorCode
	case *kmsg.LeaveGroupRequest:
		response.(*kmsg.LeaveGroupResponse).ErrorCode = errorCode
	case *kmsg.OffsetDeleteRequest:
		response.(*kmsg.OffsetDeleteResponse).ErrorCode = errorCode
	case *kmsg.ConsumerGroupHeartbeatRequest:
		response.(*kmsg.ConsumerGroupHeartbeatResponse).ErrorCode = errorCode
	case *kmsg.ConsumerGroupDescribeRequest:
		out := response.(*kmsg.ConsumerGroupDescribeResponse)
		for _, id := range request.Groups {
			group := kmsg.NewConsumerGroupDescribeResponseGroup()
			group.Group, group.ErrorCode = id, errorCode
			out.Groups = append(out.Groups, group)
		}
	}
	return response
}

// fillOffsetCommitError gives every partition of the request the same
// error, as Kafka does when the group-level validation fails
// (OffsetCommitRequest.getErrorResponse).
func fillOffsetCommitError(response *kmsg.OffsetCommitResponse, request *kmsg.OffsetCommitRequest, errorCode int16) {
	for _, topic := range request.Topics {
		out := kmsg.OffsetCommitResponseTopic{Topic: topic.Topic}
		for _, partition := range topic.Partitions {
			out.Partitions = append(out.Partitions, kmsg.OffsetCommitResponseTopicPartition{Partition: partition.Partition, ErrorCode: errorCode})
		}
		response.Topics = append(response.Topics, out)
	}
}

// fillOffsetFetchError sets the group error: per group from v8, at the top
// from v2, and on every requested partition before that (v0-v1 have no
// top-level error).
func fillOffsetFetchError(response *kmsg.OffsetFetchResponse, request *kmsg.OffsetFetchRequest, errorCode int16) {
	if request.Version >= 8 {
		for _, group := range request.Groups {
			response.Groups = append(response.Groups, kmsg.OffsetFetchResponseGroup{Group: group.Group, ErrorCode: errorCode})
		}
		return
	}
	response.ErrorCode = errorCode
	if request.Version >= 2 {
		return
	}
	for _, topic := range request.Topics {
		out := kmsg.OffsetFetchResponseTopic{Topic: topic.Topic}
		for _, partition := range topic.Partitions {
			out.Partitions = append(out.Partitions, kmsg.OffsetFetchResponseTopicPartition{Partition: partition, Offset: -1, LeaderEpoch: -1, ErrorCode: errorCode})
		}
		response.Topics = append(response.Topics, out)
	}
}
