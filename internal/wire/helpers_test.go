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
	raw, err := call(t, h, encodeRequest(request, testCorrelationID))
	if err != nil {
		t.Fatalf("%s v%d: %v", kmsg.NameForKey(request.Key()), request.GetVersion(), err)
	}
	response := request.ResponseKind()
	decodeResponse(t, raw, testCorrelationID, response)
	return response
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
