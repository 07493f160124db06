package record

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestHeaderLayoutMatchesKmsg encodes a batch header with kmsg, giving each
// field a distinct value, and checks that decodeHeader finds every value at
// the positions this package declares.
func TestHeaderLayoutMatchesKmsg(t *testing.T) {
	kmsgBatch := kmsg.RecordBatch{
		FirstOffset: 0x0102030405060708, Length: MinBatchLength, PartitionLeaderEpoch: 0x11121314,
		Magic: Magic, CRC: 0x21222324, Attributes: 0x3132, LastOffsetDelta: 0x41424344,
		FirstTimestamp: 0x5152535455565758, MaxTimestamp: 0x6162636465666768,
		ProducerID: 0x7172737475767778, ProducerEpoch: 0x0182, FirstSequence: 0x01929394, NumRecords: 0x01a2a3a4,
	}
	encoded := kmsgBatch.AppendTo(nil)
	if len(encoded) != HeaderSize {
		t.Fatalf("kmsg header is %d bytes, HeaderSize is %d", len(encoded), HeaderSize)
	}
	want := Header{
		BaseOffset: 0x0102030405060708, BatchLength: MinBatchLength, PartitionLeaderEpoch: 0x11121314,
		Magic: Magic, CRC: 0x21222324, Attributes: 0x3132, LastOffsetDelta: 0x41424344,
		BaseTimestampMs: 0x5152535455565758, MaxTimestampMs: 0x6162636465666768,
		ProducerID: 0x7172737475767778, ProducerEpoch: 0x0182, BaseSequence: 0x01929394, RecordCount: 0x01a2a3a4,
	}
	if got := decodeHeader(encoded); got != want {
		t.Fatalf("decodeHeader = %+v\nwant           %+v", got, want)
	}
}

// TestStampingKeepsTheCRC checks that the fields the leader stamps lie
// outside the CRC: a stamped batch still validates, with the new values.
func TestStampingKeepsTheCRC(t *testing.T) {
	batch := Build(randomBuildOptions(newRandom(4), 10))
	crcBefore := decodeHeader(batch).CRC
	SetBaseOffset(batch, 1<<50+3)
	SetPartitionLeaderEpoch(batch, 42)
	header, err := Validate(batch, DefaultLimits())
	if err != nil {
		t.Fatal(err)
	}
	if header.CRC != crcBefore || header.BaseOffset != 1<<50+3 || header.PartitionLeaderEpoch != 42 ||
		BaseOffset(batch) != 1<<50+3 || PartitionLeaderEpoch(batch) != 42 {
		t.Fatalf("after stamping: %+v", header)
	}
	SetPartitionLeaderEpoch(batch, NoLeaderEpoch)
	if PartitionLeaderEpoch(batch) != NoLeaderEpoch {
		t.Fatalf("epoch %d after stamping NoLeaderEpoch", PartitionLeaderEpoch(batch))
	}
}

func TestStampingAssertsABatch(t *testing.T) {
	notBatches := map[string][]byte{
		"short":   make([]byte, HeaderSize-1),
		"magic 1": make([]byte, HeaderSize),
	}
	for name, b := range notBatches {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: SetBaseOffset did not panic", name)
				}
			}()
			SetBaseOffset(b, 1)
		}()
	}
}

func TestHeaderAttributes(t *testing.T) {
	batch := Build(BuildOptions{Control: true, Transactional: true, Records: []Record{{Value: []byte("x")}}})
	header, err := Validate(batch, DefaultLimits())
	if err != nil || !header.IsControl() || !header.IsTransactional() || header.IsLogAppendTime() {
		t.Fatalf("%+v, %v", header, err)
	}
	header.Attributes = int16(CompressionLZ4) | attributeLogAppendTime
	if header.Compression() != CompressionLZ4 || !header.IsLogAppendTime() || header.IsControl() {
		t.Fatalf("attributes 0x%x: %v", header.Attributes, header.Compression())
	}
	for codec, name := range map[Compression]string{CompressionNone: "none", CompressionGzip: "gzip",
		CompressionSnappy: "snappy", CompressionLZ4: "lz4", CompressionZstd: "zstd", 5: "unknown(5)"} {
		if codec.String() != name {
			t.Errorf("Compression(%d).String() = %q, want %q", codec, codec.String(), name)
		}
	}
}
