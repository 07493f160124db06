package group

import "fmt"

// CheckInvariants walks the whole coordinator and reports the first
// broken invariant: a programming error, never a client's. It costs time
// in the number of groups and members; the tests run it after every step,
// and a host may run it in builds with the invariants tag.
func (c *Coordinator) CheckInvariants() error {
	parked := len(c.stableWaits)
	for _, id := range sortedKeys(c.groups) {
		group := c.groups[id]
		if group.id != id {
			return fmt.Errorf("group %q filed under %q", group.id, id)
		}
		count, err := group.checkInvariants()
		if err != nil {
			return fmt.Errorf("group %q: %w", id, err)
		}
		if earliest := group.earliestDeadlineMs(); c.phase == serving && earliest < c.nextDeadlineMs {
			return fmt.Errorf("group %q has a timer at %d, before the next deadline Tick looks at, %d", id, earliest, c.nextDeadlineMs)
		}
		parked += count
	}
	if c.phase == serving && parked != c.parked {
		return fmt.Errorf("%d requests counted as parked, %d held", c.parked, parked)
	}
	byGroup := map[string]int{}
	for _, write := range c.pending {
		for _, group := range write.groups {
			byGroup[group]++
		}
	}
	for group, count := range c.pendingByGroup {
		if byGroup[group] != count {
			return fmt.Errorf("group %q: %d appends counted in flight, %d are", group, count, byGroup[group])
		}
	}
	if len(byGroup) != len(c.pendingByGroup) {
		return fmt.Errorf("appends in flight for %d groups, counted for %d", len(byGroup), len(c.pendingByGroup))
	}
	return c.checkConsumerGroups()
}

// checkInvariants checks one group and counts its parked requests.
func (g *group) checkInvariants() (held int, err error) {
	switch {
	case g.state == stateEmpty && len(g.members) > 0:
		return 0, fmt.Errorf("state Empty with %d members", len(g.members))
	case g.state != stateEmpty && g.state != stateDead && g.state != statePreparingRebalance && len(g.members) == 0:
		return 0, fmt.Errorf("%s without members", g.state)
	case (g.state == stateStable || g.state == stateCompletingRebalance) && g.protocol == "":
		return 0, fmt.Errorf("%s without a protocol", g.state)
	case len(g.members) > 0 && g.members[g.leader] == nil:
		return 0, fmt.Errorf("leader %q is not a member", g.leader)
	case len(g.members) == 0 && g.leader != "":
		return 0, fmt.Errorf("leader %q of no members", g.leader)
	}
	for instance, memberID := range g.instances {
		if member := g.members[memberID]; member == nil || member.instanceID != instance {
			return 0, fmt.Errorf("instance %q maps to %q, which does not hold it", instance, memberID)
		}
	}
	for memberID := range g.pendingSync {
		if g.members[memberID] == nil {
			return 0, fmt.Errorf("pending sync of non-member %q", memberID)
		}
	}
	for _, id := range g.sortedMemberIDs() {
		member := g.members[id]
		switch {
		case member.id != id:
			return 0, fmt.Errorf("member %q filed under %q", member.id, id)
		case member.instanceID != "" && g.instances[member.instanceID] != id:
			return 0, fmt.Errorf("member %q holds instance %q, mapped to %q", id, member.instanceID, g.instances[member.instanceID])
		case member.join != nil && g.state != statePreparingRebalance:
			return 0, fmt.Errorf("member %q has a join parked in %s", id, g.state)
		case member.sync != nil && g.state != stateCompletingRebalance:
			return 0, fmt.Errorf("member %q has a sync parked in %s", id, g.state)
		}
		for _, park := range []*parked{member.join, member.sync} {
			if park != nil && park.held {
				held++
			}
		}
	}
	return held, nil
}
