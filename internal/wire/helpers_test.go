package wire

import (
	crand "crypto/rand"
	"encoding/binary"
	"slices"
	"testing"

	"github.com/tidelog/tide/internal/metadata"

	"github.com/twmb/franz-go/pkg/kmsg"
)

const testCorrelationID = 7

func newTestHandler(t testing.TB, backend Backend) *Handler {
	t.Helper()
	config := testConfig()
	config.Tick = 1e6 // 1 ms: timeouts in ticks equal the milliseconds
	h, err := New(config, backend)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// encodeRequest returns a request as it comes off a connection, without
// the 4-byte size, encoded by kmsg as a client would.
func encodeRequest(request kmsg.Request, correlationID int32) []byte {
	formatter := kmsg.NewRequestFormatter(kmsg.FormatterClientID("wire-test"))
	return formatter.AppendRequest(nil, request, correlationID)[4:]
}

// call runs raw bytes through Handle, which must answer synchronously.
func call(t testing.TB, h *Handler, request []byte) ([]byte, error) {
	t.Helper()
	var response []byte
	var err error
	calls := 0
	h.Handle(request, func(r []byte, e error) { response, err = r, e; calls++ })
	if calls != 1 {
		t.Fatalf("done called %d times, want 1", calls)
	}
	return response, err
}

// roundTrip encodes request at its version, handles it and decodes the
// response kmsg would expect.
func roundTrip(t testing.TB, h *Handler, request kmsg.Request) kmsg.Response {
	t.Helper()
	fetch, _ := request.(*kmsg.FetchRequest)
	if fetch != nil && fetch.Version >= 13 {
		fetchByTopicID(h.backend, fetch)
	}
	raw, err := call(t, h, encodeRequest(request, testCorrelationID))
	if err != nil {
		t.Fatalf("%s v%d: %v", kmsg.NameForKey(request.Key()), request.GetVersion(), err)
	}
	response := request.ResponseKind()
	decodeResponse(t, raw, testCorrelationID, response)
	if fetch != nil && fetch.Version >= 13 {
		nameFetchedTopics(fetch, response.(*kmsg.FetchResponse))
	}
	return response
}

// fetchByTopicID gives the topics of a fetch written with names the ids a
// v13+ fetch names them by: the Backend's, or for a topic it does not
// have one no topic has, so that the tests of every version can be
// written with names.
func fetchByTopicID(backend Backend, request *kmsg.FetchRequest) {
	for i := range request.Topics {
		topic := &request.Topics[i]
		if topic.TopicID != [16]byte{} || topic.Topic == "" {
			continue
		}
		if known, ok := backend.Topic(topic.Topic); ok {
			topic.TopicID = known.ID
		} else {
			copy(topic.TopicID[:], "unknown:"+topic.Topic)
		}
	}
}

// nameFetchedTopics puts back in a v13+ answer the names the request's
// ids stood for.
func nameFetchedTopics(request *kmsg.FetchRequest, response *kmsg.FetchResponse) {
	for i := range response.Topics {
		for _, asked := range request.Topics {
			if asked.TopicID == response.Topics[i].TopicID {
				response.Topics[i].Topic = asked.Topic
			}
		}
	}
}

// decodeResponse checks the response header and decodes the body into
// response, whose version is set.
func decodeResponse(t testing.TB, raw []byte, correlationID int32, response kmsg.Response) {
	t.Helper()
	if len(raw) < 4 {
		t.Fatalf("response of %d bytes", len(raw))
	}
	if got := int32(binary.BigEndian.Uint32(raw)); got != correlationID {
		t.Fatalf("correlation id %d, want %d", got, correlationID)
	}
	body := raw[4:]
	if response.IsFlexible() && response.Key() != apiVersionsKey {
		if len(body) == 0 || body[0] != 0 {
			t.Fatalf("flexible response header without an empty tag section")
		}
		body = body[1:]
	}
	if err := response.ReadFrom(body); err != nil {
		t.Fatalf("decoding %s v%d: %v", kmsg.NameForKey(response.Key()), response.GetVersion(), err)
	}
}

// testVersions returns the versions of a key every table test covers: the
// served minimum and maximum, and the last non-flexible and first flexible
// versions when the switch falls inside the range.
func testVersions(t testing.TB, key int16) []int16 {
	t.Helper()
	served, ok := lookup(key)
	if !ok {
		t.Fatalf("key %d not served", key)
	}
	versions := []int16{served.min}
	request := kmsg.RequestForKey(key)
	for v := served.min + 1; v <= served.max; v++ {
		request.SetVersion(v)
		if request.IsFlexible() {
			versions = append(versions, v-1, v)
			break
		}
	}
	versions = append(versions, served.max)
	slices.Sort(versions)
	return slices.Compact(versions)
}

func tp(topic string, partition int32) metadata.TopicPartition {
	return metadata.TopicPartition{Topic: topic, Partition: partition}
}

// testConfig is DefaultConfig with crypto/rand for the response markers.
func testConfig() Config {
	config := DefaultConfig()
	config.Random = crand.Reader
	return config
}
