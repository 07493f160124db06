package group

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestLoadingAnswersEveryAPIInItsShape: while loading, each API gets
// COORDINATOR_LOAD_IN_PROGRESS where its version carries errors (per
// partition for OffsetCommit, per group for DescribeGroups, DeleteGroups
// and OffsetFetch v8+, per partition for OffsetFetch v0-v1), and each
// answer encodes at the request's version.
func TestLoadingAnswersEveryAPIInItsShape(t *testing.T) {
	loading := NewCoordinator(DefaultConfig(), 0)
	code := kerr.CoordinatorLoadInProgress.Code
	for _, test := range []struct {
		request kmsg.Request
		codeOf  func(kmsg.Response) int16
	}{
		{commitRequest(2, "g", 1, "m", "t", map[int32]int64{0: 1}), func(r kmsg.Response) int16 {
			return r.(*kmsg.OffsetCommitResponse).Topics[0].Partitions[0].ErrorCode
		}},
		{fetchRequest(1, "g", "t", 0), func(r kmsg.Response) int16 { return r.(*kmsg.OffsetFetchResponse).Topics[0].Partitions[0].ErrorCode }},
		{fetchRequest(5, "g", "t", 0), func(r kmsg.Response) int16 { return r.(*kmsg.OffsetFetchResponse).ErrorCode }},
		{fetchRequest(8, "g", "t", 0), func(r kmsg.Response) int16 { return r.(*kmsg.OffsetFetchResponse).Groups[0].ErrorCode }},
		{&kmsg.DescribeGroupsRequest{Version: 5, Groups: []string{"g"}}, func(r kmsg.Response) int16 { return r.(*kmsg.DescribeGroupsResponse).Groups[0].ErrorCode }},
		{&kmsg.DeleteGroupsRequest{Version: 1, Groups: []string{"g"}}, func(r kmsg.Response) int16 { return r.(*kmsg.DeleteGroupsResponse).Groups[0].ErrorCode }},
		{&kmsg.ListGroupsRequest{Version: 4}, func(r kmsg.Response) int16 { return r.(*kmsg.ListGroupsResponse).ErrorCode }},
		{joinRequestFor(6, "g", "m"), func(r kmsg.Response) int16 { return r.(*kmsg.JoinGroupResponse).ErrorCode }},
		{syncRequestFor("g", "m", 1, nil), func(r kmsg.Response) int16 { return r.(*kmsg.SyncGroupResponse).ErrorCode }},
		{&kmsg.HeartbeatRequest{Version: 2, Group: "g"}, func(r kmsg.Response) int16 { return r.(*kmsg.HeartbeatResponse).ErrorCode }},
		{&kmsg.LeaveGroupRequest{Version: 5, Group: "g"}, func(r kmsg.Response) int16 { return r.(*kmsg.LeaveGroupResponse).ErrorCode }},
		{&kmsg.OffsetDeleteRequest{Group: "g"}, func(r kmsg.Response) int16 { return r.(*kmsg.OffsetDeleteResponse).ErrorCode }},
	} {
		loading.Handle(0, 1, test.request)
		answers := loading.Ready().Answers
		if len(answers) != 1 {
			t.Fatalf("%T: %d answers", test.request, len(answers))
		}
		response := answers[0].Response
		if got := test.codeOf(response); got != code {
			t.Errorf("%T v%d: error %d", test.request, test.request.GetVersion(), got)
		}
		if response.GetVersion() != test.request.GetVersion() {
			t.Errorf("%T: answered at v%d, asked at v%d", test.request, response.GetVersion(), test.request.GetVersion())
		}
		response.AppendTo(nil)
	}
}

// TestConfigValidate: Kafka's defaults pass; impossible limits do not.
func TestConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for name, change := range map[string]func(*Config){
		"inverted session bounds": func(c *Config) { c.MaxSessionTimeoutMs = c.MinSessionTimeoutMs - 1 },
		"negative initial delay":  func(c *Config) { c.InitialRebalanceDelayMs = -1 },
		"no group size":           func(c *Config) { c.MaxSize = 0 },
		"no retention":            func(c *Config) { c.OffsetsRetentionMs = 0 },
		"negative metadata size":  func(c *Config) { c.OffsetMetadataMaxBytes = -1 },
		"no pending appends":      func(c *Config) { c.MaxPendingAppends = 0 },
	} {
		config := DefaultConfig()
		change(&config)
		if config.Validate() == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestLimitsRefuseWithARetriableError: beyond MaxPendingAppends a commit,
// and beyond MaxParkedRequests a join that would wait, get
// COORDINATOR_NOT_AVAILABLE, which every client retries.
func TestLimitsRefuseWithARetriableError(t *testing.T) {
	config := DefaultConfig()
	config.MaxPendingAppends, config.MaxParkedRequests = 1, 1
	h := newHarness(t, config)
	h.autoCommit = false
	h.send(commitRequest(8, "g", -1, "", "t", map[int32]int64{0: 1}))
	refused := h.answer(h.send(commitRequest(8, "g", -1, "", "t", map[int32]int64{0: 2}))).(*kmsg.OffsetCommitResponse)
	if got := refused.Topics[0].Partitions[0].ErrorCode; got != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("commit beyond MaxPendingAppends: %d", got)
	}
	h.commitAll()
	h.autoCommit = true
	h.send(joinRequestFor(3, "other", ""))
	if got := joinResponseOf(t, h, h.send(joinRequestFor(3, "other", ""))).ErrorCode; got != kerr.CoordinatorNotAvailable.Code {
		t.Fatalf("join beyond MaxParkedRequests: %d", got)
	}
}
