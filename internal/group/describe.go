package group

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// DescribeGroups (15), v0-v5, and ListGroups (16), v0-v5 (KIP-518 state
// filter from v4, KIP-848's type filter from v5). Both answer from the live
// state.

// authorizedOperationsNotRequested is Kafka's INT32 minimum: the
// operations were not asked for.
const authorizedOperationsNotRequested = -2147483648

// authorizedGroupOperations is what Kafka reports without an authorizer:
// every operation a group supports, READ (3), DELETE (6) and DESCRIBE (8),
// as bits of AclOperation codes. tide has no ACLs.
const authorizedGroupOperations = 1<<3 | 1<<6 | 1<<8

// handleDescribeGroups describes each group: an unknown one as Dead with
// no error, as Kafka does; a Stable one with its protocol and every
// member's metadata and assignment; other states with members but neither.
func (c *Coordinator) handleDescribeGroups(id RequestID, request *kmsg.DescribeGroupsRequest) {
	response := request.ResponseKind().(*kmsg.DescribeGroupsResponse)
	response.Version = request.Version
	for _, groupID := range request.Groups {
		out := kmsg.DescribeGroupsResponseGroup{Group: groupID, State: stateDead.String(), AuthorizedOperations: authorizedOperationsNotRequested}
		if request.Version >= 3 && request.IncludeAuthorizedOperations {
			out.AuthorizedOperations = authorizedGroupOperations
		}
		if consumer := c.consumerGroups[groupID]; consumer != nil {
			c.describeConsumerGroup(&out, consumer)
		} else if group := c.groups[groupID]; group != nil {
			out.State, out.ProtocolType = group.state.String(), group.protocolType
			if group.state == stateStable {
				out.Protocol = group.protocol
			}
			for _, memberID := range group.sortedMemberIDs() {
				member := group.members[memberID]
				entry := kmsg.DescribeGroupsResponseGroupMember{MemberID: member.id, ClientID: member.clientID, ClientHost: member.clientHost}
				if member.instanceID != "" {
					instanceID := member.instanceID
					entry.InstanceID = &instanceID
				}
				if group.state == stateStable {
					entry.ProtocolMetadata, entry.MemberAssignment = member.metadataFor(group.protocol), member.assignment
				}
				out.Members = append(out.Members, entry)
			}
		}
		response.Groups = append(response.Groups, out)
	}
	c.answer(id, response)
}

// handleListGroups lists this partition's groups, filtered by state (v4+,
// case-insensitive) and type (v5+: "classic" or "consumer"), in group id
// order.
func (c *Coordinator) handleListGroups(id RequestID, request *kmsg.ListGroupsRequest) {
	response := request.ResponseKind().(*kmsg.ListGroupsResponse)
	response.Version = request.Version
	var listed []kmsg.ListGroupsResponseGroup
	for _, groupID := range sortedKeys(c.groups) {
		group := c.groups[groupID]
		if group.state == stateDead {
			continue // being deleted; Kafka has already dropped it
		}
		listed = append(listed, kmsg.ListGroupsResponseGroup{Group: groupID, ProtocolType: group.protocolType,
			GroupState: group.state.String(), GroupType: "classic"})
	}
	for _, groupID := range sortedKeys(c.consumerGroups) {
		listed = append(listed, kmsg.ListGroupsResponseGroup{Group: groupID, ProtocolType: consumerProtocolType,
			GroupState: c.consumerGroups[groupID].state(), GroupType: "consumer"})
	}
	slices.SortFunc(listed, func(a, b kmsg.ListGroupsResponseGroup) int { return strings.Compare(a.Group, b.Group) })
	for _, group := range listed {
		if request.Version >= 4 && len(request.StatesFilter) > 0 && !containsFold(request.StatesFilter, group.GroupState) {
			continue
		}
		if request.Version >= 5 && len(request.TypesFilter) > 0 && !containsFold(request.TypesFilter, group.GroupType) {
			continue
		}
		response.Groups = append(response.Groups, group)
	}
	c.answer(id, response)
}

func containsFold(values []string, want string) bool {
	for _, value := range values {
		if strings.EqualFold(value, want) {
			return true
		}
	}
	return false
}
