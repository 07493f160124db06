package wire

import (
	"encoding/binary"
	"testing"

	"github.com/tidelog/tide/internal/replica"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// seedRequests returns kmsg-encoded requests of every served API at every
// served version: each empty as kmsg's defaults make it, plus the richer
// requests the table tests build.
func seedRequests() [][]byte {
	var seeds [][]byte
	for _, entry := range servedVersions() {
		for version := entry.MinVersion; version <= entry.MaxVersion; version++ {
			request := kmsg.RequestForKey(entry.ApiKey)
			request.SetVersion(version)
			seeds = append(seeds, encodeRequest(request, 1))
		}
	}
	rich := []kmsg.Request{
		produceRequest(3, replica.AcksAll, map[string][][]byte{"orders": {testBatch(2, "a")}}),
		produceRequest(9, replica.AcksNone, map[string][][]byte{"orders": {testBatch(1, "b")}, "missing": {testBatch(1, "c")}}),
		testFetchRequest(4, 0, -1), testFetchRequest(12, 1, 0),
		listOffsetsRequest(1, -1, replica.EarliestTimestamp), listOffsetsRequest(7, 0, replica.LatestTimestamp, 5),
		consumerJoin(0, "app", "orders"), consumerJoin(1, "app", "orders", "missing"),
	}
	for _, request := range rich {
		seeds = append(seeds, encodeRequest(request, 2))
	}
	above := encodeRequest(kmsg.NewPtrApiVersionsRequest(), 3)
	binary.BigEndian.PutUint16(above[2:], 9)
	return append(seeds, above)
}

// FuzzHandle runs arbitrary bytes through the whole request path: header,
// version check, kmsg decoding, the handler, the fake Backend (with real
// group coordinators) and the response encoding. It must never panic, must call done exactly once
// (produce answers and empty fetches are held by the fake and given after
// Handle returns, so the late-answer path is fuzzed too), and every
// response must decode with kmsg at the version asked for (v0 for an
// ApiVersions above the range).
func FuzzHandle(f *testing.F) {
	for _, seed := range seedRequests() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, request []byte) {
		backend := newFakeBackend()
		backend.addTopic("orders", 2, 1)
		backend.holdProduce, backend.parkFetches = true, true
		// Group requests reach real coordinators: the group decoders and
		// the coordinator's handling are fuzzed with the rest.
		backend.groupPartitions, backend.groupServe = 2, coordinatorServe(groupTopics(backend))
		h := newTestHandler(t, backend)
		calls := 0
		var response []byte
		var err error
		h.Handle(append([]byte(nil), request...), func(r []byte, e error) { response, err, calls = r, e, calls+1 })
		backend.releaseProduce()
		backend.expireFetches()
		if calls != 1 {
			t.Fatalf("done called %d times", calls)
		}
		if err != nil || response == nil {
			return
		}
		key, version := int16(binary.BigEndian.Uint16(request)), int16(binary.BigEndian.Uint16(request[2:]))
		if served, _ := lookup(key); version < served.min || version > served.max {
			version = 0 // the ApiVersions downgrade answer
		}
		decoded := kmsg.ResponseForKey(key)
		decoded.SetVersion(version)
		decodeResponse(t, response, int32(binary.BigEndian.Uint32(request[4:])), decoded)
	})
}
