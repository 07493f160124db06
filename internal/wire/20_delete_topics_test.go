package wire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestDeleteTopics(t *testing.T) {
	for _, version := range testVersions(t, 20) {
		backend := newFakeBackend()
		backend.addTopic("orders", 1, 0)
		h := newTestHandler(t, backend)
		request := kmsg.NewPtrDeleteTopicsRequest()
		request.Version = version
		names := []string{"orders", "missing", "twice", "twice"}
		if version < 6 {
			request.TopicNames = names
		} else {
			for _, name := range names {
				topic := kmsg.NewDeleteTopicsRequestTopic()
				topic.Topic = kmsg.StringPtr(name)
				request.Topics = append(request.Topics, topic)
			}
			byID := kmsg.NewDeleteTopicsRequestTopic()
			byID.TopicID = [16]byte{9}
			request.Topics = append(request.Topics, byID)
		}
		response := roundTrip(t, h, request).(*kmsg.DeleteTopicsResponse)
		want := []int16{0, kerr.UnknownTopicOrPartition.Code, kerr.InvalidRequest.Code, kerr.InvalidRequest.Code, kerr.UnknownTopicID.Code}
		for i, topic := range response.Topics {
			if topic.ErrorCode != want[i] {
				t.Fatalf("v%d: entry %d error %d, want %d", version, i, topic.ErrorCode, want[i])
			}
			if version >= 5 && topic.ErrorCode != 0 && topic.ErrorMessage == nil {
				t.Fatalf("v%d: entry %d has no error message", version, i)
			}
		}
		if backend.topics["orders"] != nil {
			t.Fatalf("v%d: orders not deleted", version)
		}
	}
}
