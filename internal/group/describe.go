package group

import (
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
		if group := c.groups[groupID]; group != nil {
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
// case-insensitive) and type (v5+; every group here is "classic").
func (c *Coordinator) handleListGroups(id RequestID, request *kmsg.ListGroupsRequest) {
	response := request.ResponseKind().(*kmsg.ListGroupsResponse)
	response.Version = request.Version
	for _, groupID := range sortedKeys(c.groups) {
		group := c.groups[groupID]
		if group.state == stateDead {
			continue // being deleted; Kafka has already dropped it
		}
		if request.Version >= 4 && len(request.StatesFilter) > 0 && !containsFold(request.StatesFilter, group.state.String()) {
			continue
		}
		if request.Version >= 5 && len(request.TypesFilter) > 0 && !containsFold(request.TypesFilter, "classic") {
			continue
		}
		response.Groups = append(response.Groups, kmsg.ListGroupsResponseGroup{Group: groupID, ProtocolType: group.protocolType,
			GroupState: group.state.String(), GroupType: "classic"})
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
