package metadata

import (
	"bytes"
	"testing"
)

// A broker's endpoint travels in its RegisterBroker record and in image
// snapshots; an image with no endpoint encodes as before endpoints
// existed (version 1), byte for byte, and a record without one keeps the
// old tag, so logs and snapshots written before still decode.
func TestEndpointsInRecordsAndImages(t *testing.T) {
	img := NewImage()
	apply := func(r Record) {
		t.Helper()
		if _, err := img.Apply(Entry{Offset: img.Offset() + 1, Record: r}); err != nil {
			t.Fatal(err)
		}
	}
	apply(RegisterBroker{ID: 1, Epoch: 0, Incarnation: "one"})
	old := EncodeImage(nil, img)
	if old[0] != codecVersion {
		t.Fatalf("an image without endpoints encoded as version %d", old[0])
	}
	if record := EncodeRecords(nil, []Record{RegisterBroker{ID: 1, Epoch: 0, Incarnation: "one"}}); record[1] != tagRegisterBroker {
		t.Fatalf("a registration without an endpoint has tag %d", record[1])
	}
	apply(RegisterBroker{ID: 2, Epoch: 1, Incarnation: "two", Endpoint: "10.0.0.2:9092"})
	if img.Endpoint(2) != "10.0.0.2:9092" || img.Endpoint(1) != "" {
		t.Fatalf("endpoints %q and %q", img.Endpoint(1), img.Endpoint(2))
	}
	snapshot := EncodeImage(nil, img)
	if snapshot[0] != imageEndpointsVersion {
		t.Fatalf("an image with an endpoint encoded as version %d", snapshot[0])
	}
	decoded, err := DecodeImage(snapshot)
	if err != nil || decoded.Endpoint(2) != "10.0.0.2:9092" || !decoded.Equal(img) {
		t.Fatalf("decoded endpoint %q, %v", decoded.Endpoint(2), err)
	}
	if again, err := DecodeImage(old); err != nil || !bytes.Equal(EncodeImage(nil, again), old) {
		t.Fatalf("a version 1 image: %v", err)
	}
	apply(RegisterBroker{ID: 2, Epoch: 3, Incarnation: "two-again", Endpoint: "10.0.0.9:9092"})
	if img.Endpoint(2) != "10.0.0.9:9092" {
		t.Fatalf("a restarted broker's new endpoint: %q", img.Endpoint(2))
	}
}
