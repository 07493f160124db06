package wire

import (
	"errors"
	"testing"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/replica"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestRequestLimits checks a request naming more topics or partitions than
// Config allows closes the connection before any Backend call.
func TestRequestLimits(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 4, 0)
	config := testConfig()
	config.MaxTopicsPerRequest, config.MaxPartitionsPerRequest = 1, 3
	h, err := New(config, backend)
	if err != nil {
		t.Fatal(err)
	}
	produce := produceRequest(9, replica.AcksAll, map[string][][]byte{"orders": {testBatch(1, "a"), testBatch(1, "b"), testBatch(1, "c"), testBatch(1, "d")}})
	fetch := testFetchRequest(12, 0, -1) // two topics
	offsets := listOffsetsRequest(7, -1, -1, -1, -1, -1)
	metadataRequest := kmsg.NewPtrMetadataRequest()
	metadataRequest.Topics = make([]kmsg.MetadataRequestTopic, 2)
	for i := range metadataRequest.Topics {
		metadataRequest.Topics[i].Topic = kmsg.StringPtr("orders")
	}
	for _, request := range []kmsg.Request{produce, fetch, offsets, metadataRequest} {
		if _, err := call(t, h, encodeRequest(request, 1)); !errors.Is(err, ErrTooManyPartitions) {
			t.Errorf("%s: %v, want ErrTooManyPartitions", kmsg.NameForKey(request.Key()), err)
		}
	}
	if len(backend.produces)+len(backend.fetches) != 0 {
		t.Fatalf("a request over the limits reached the Backend")
	}
}

func TestUnknownIsolationLevelClosesTheConnection(t *testing.T) {
	h := newTestHandler(t, newFakeBackend())
	fetch := testFetchRequest(4, 0, -1)
	fetch.IsolationLevel = 2
	offsets := listOffsetsRequest(2, -1, -1)
	offsets.IsolationLevel = -1
	for _, request := range []kmsg.Request{fetch, offsets} {
		if _, err := call(t, h, encodeRequest(request, 1)); !errors.Is(err, ErrMalformedRequest) {
			t.Errorf("%s: %v, want ErrMalformedRequest", kmsg.NameForKey(request.Key()), err)
		}
	}
}

// TestFetchExpires checks a held fetch is answered, empty, when the
// Backend's wait ends.
func TestFetchExpires(t *testing.T) {
	backend := newFakeBackend()
	backend.addTopic("orders", 2, 0)
	backend.parkFetches = true
	h := newTestHandler(t, backend)
	request := testFetchRequest(12, 0, -1)
	request.Topics, request.MaxWaitMillis = request.Topics[:1], 3
	var raw []byte
	h.Handle(encodeRequest(request, 4), func(r []byte, err error) { raw = r })
	for range 2 {
		backend.tick()
	}
	if raw != nil {
		t.Fatalf("answered before MaxWait")
	}
	backend.tick()
	if raw == nil {
		t.Fatalf("not answered after MaxWait")
	}
	response := request.ResponseKind().(*kmsg.FetchResponse)
	decodeResponse(t, raw, 4, response)
	if p := response.Topics[0].Partitions[0]; p.ErrorCode != 0 || len(p.RecordBatches) != 0 || p.HighWatermark != 0 {
		t.Fatalf("expired fetch answered %+v", p)
	}
}

// twiceBackend answers every produce twice: a broken Backend.
type twiceBackend struct{ *fakeBackend }

func (b twiceBackend) Produce(_ metadata.TopicPartition, request replica.ProduceRequest, done func(replica.ProduceAnswer)) {
	done(replica.ProduceAnswer{ID: request.ID})
	done(replica.ProduceAnswer{ID: request.ID})
}

// TestBackendAnsweringTwicePanics checks the contract is asserted: a
// Backend that answers twice is a programmer error, not a second response.
func TestBackendAnsweringTwicePanics(t *testing.T) {
	h := newTestHandler(t, twiceBackend{newFakeBackend()})
	defer func() {
		if recover() == nil {
			t.Fatalf("no panic")
		}
	}()
	h.Handle(encodeRequest(produceRequest(9, replica.AcksAll, map[string][][]byte{"orders": {testBatch(1, "a")}}), 1), func([]byte, error) {})
}
