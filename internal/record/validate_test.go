package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"testing"
)

// threeRecords is the records section of a dense batch of three 9-byte
// records at positions 61, 70 and 79, ending at 88.
var threeRecords = concat(simpleRecord(0, "k", "v"), simpleRecord(1, "k", "v"), simpleRecord(2, "k", "v"))

func concat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// goodBatch is a valid dense batch of 88 bytes.
func goodBatch() []byte { return encodeBatch(plainHeader(2, 3), threeRecords) }

// changed returns a copy of b with change applied and the CRC left as is.
func changed(b []byte, change func([]byte)) []byte {
	b = bytes.Clone(b)
	change(b)
	return b
}

func withBatchLength(batchLength int32) func([]byte) {
	return func(b []byte) { binary.BigEndian.PutUint32(b[BatchLengthPosition:], uint32(batchLength)) }
}

func withAttributes(attributes int16) func(*Header) {
	return func(h *Header) { h.Attributes = attributes }
}

var sparseLimits = Limits{MaxBatchBytes: DefaultMaxBatchBytes, RequireDenseOffsets: false}

// headerOnlyLimits are a leader's producer limits without the checks that
// need decompression or exact timestamps: what a follower or recovery uses,
// but dense.
var headerOnlyLimits = Limits{MaxBatchBytes: DefaultMaxBatchBytes, RequireDenseOffsets: true}

type validateCase struct {
	name   string
	batch  []byte
	limits Limits // zero means DefaultLimits()
	// kind is the expected error kind, zero when the batch is acceptable;
	// position the expected Error.Position.
	kind     ErrorKind
	position int
}

func truncatedCases() []validateCase {
	return []validateCase{
		{name: "empty buffer", batch: nil, kind: ErrKindTruncated, position: 0},
		{name: "no room for batchLength", batch: goodBatch()[:11], kind: ErrKindTruncated, position: 11},
		{name: "header cut short", batch: goodBatch()[:60], kind: ErrKindTruncated, position: 60},
		{name: "last byte missing", batch: goodBatch()[:87], kind: ErrKindTruncated, position: 87},
	}
}

func corruptCases() []validateCase {
	return []validateCase{
		{name: "batchLength below the header", batch: changed(goodBatch(), withBatchLength(48)),
			kind: ErrKindCorrupt, position: BatchLengthPosition},
		{name: "negative batchLength", batch: changed(goodBatch(), withBatchLength(-1)),
			kind: ErrKindCorrupt, position: BatchLengthPosition},
		{name: "batchLength one short", batch: changed(goodBatch(), withBatchLength(75)),
			kind: ErrKindCorrupt, position: CRCPosition},
		{name: "value bit flipped", batch: changed(goodBatch(), func(b []byte) { b[86] ^= 0x01 }),
			kind: ErrKindCorrupt, position: CRCPosition},
		{name: "crc bit flipped", batch: changed(goodBatch(), func(b []byte) { b[CRCPosition] ^= 0x80 }),
			kind: ErrKindCorrupt, position: CRCPosition},
		{name: "attribute bit flipped", batch: changed(goodBatch(), func(b []byte) { b[AttributesPosition+1] ^= 0x04 }),
			kind: ErrKindCorrupt, position: CRCPosition},
	}
}

func tooLargeCases() []validateCase {
	return []validateCase{
		{name: "one byte over MaxBatchBytes", batch: goodBatch(), limits: Limits{MaxBatchBytes: 87, RequireDenseOffsets: true},
			kind: ErrKindTooLarge, position: BatchLengthPosition},
		{name: "huge batchLength on a short buffer", batch: changed(goodBatch(), withBatchLength(math.MaxInt32)),
			kind: ErrKindTooLarge, position: BatchLengthPosition},
	}
}

func invalidHeaderCases() []validateCase {
	return []validateCase{
		{name: "magic 1", batch: changed(goodBatch(), func(b []byte) { b[MagicPosition] = 1 }),
			kind: ErrKindInvalid, position: MagicPosition},
		{name: "magic 3", batch: changed(goodBatch(), func(b []byte) { b[MagicPosition] = 3 }),
			kind: ErrKindInvalid, position: MagicPosition},
		{name: "codec 5", batch: editHeader(goodBatch(), withAttributes(5)),
			kind: ErrKindInvalid, position: AttributesPosition},
		{name: "codec 7 among other bits", batch: editHeader(goodBatch(), withAttributes(0x37)),
			kind: ErrKindInvalid, position: AttributesPosition},
		{name: "negative lastOffsetDelta", batch: editHeader(goodBatch(), func(h *Header) { h.LastOffsetDelta = -1 }),
			kind: ErrKindInvalid, position: LastOffsetDeltaPosition},
		{name: "negative recordCount", batch: encodeBatch(plainHeader(2, -1), threeRecords), limits: sparseLimits,
			kind: ErrKindInvalid, position: RecordCountPosition},
		{name: "more records than offsets", batch: encodeBatch(plainHeader(2, 4), threeRecords), limits: sparseLimits,
			kind: ErrKindInvalid, position: RecordCountPosition},
		{name: "dense: fewer records than offsets", batch: encodeBatch(plainHeader(3, 3), threeRecords),
			kind: ErrKindInvalid, position: RecordCountPosition},
		{name: "dense: empty batch", batch: encodeBatch(plainHeader(0, 0), nil),
			kind: ErrKindInvalid, position: RecordCountPosition},
		{name: "dense: lastOffsetDelta at int32 max", batch: encodeBatch(plainHeader(math.MaxInt32, 3), threeRecords),
			kind: ErrKindInvalid, position: RecordCountPosition},
		{name: "gzip: counts still checked", batch: encodeBatch(withCodec(plainHeader(2, 2), CompressionGzip), []byte{1, 2}),
			kind: ErrKindInvalid, position: RecordCountPosition},
		{name: "bytes after the batch", batch: append(goodBatch(), 0),
			kind: ErrKindInvalid, position: 88},
	}
}

func withCodec(header Header, codec Compression) Header {
	header.Attributes |= int16(codec)
	return header
}

// recordCase is a batch of records with a header claiming lastOffsetDelta and
// recordCount.
func recordCase(name string, lastOffsetDelta, recordCount int32, limits Limits, kind ErrorKind, position int, records ...[]byte) validateCase {
	return validateCase{name: name, batch: encodeBatch(plainHeader(lastOffsetDelta, recordCount), concat(records...)),
		limits: limits, kind: kind, position: position}
}

func invalidRecordCases() []validateCase {
	dense := DefaultLimits()
	record0 := simpleRecord(0, "k", "v")
	// Fields of records whose length is 1 byte at 61, so attributes are at
	// 62, timestampDelta at 63, offsetDelta at 64, the key at 65.
	attributes, zero := []byte{0}, varint(0)
	null, one, value := varint(-1), varint(1), []byte("v")
	return []validateCase{
		recordCase("recordCount beyond the records", 3, 4, dense, ErrKindInvalid, 88, threeRecords),
		recordCase("record length beyond the batch", 0, 1, dense, ErrKindInvalid, 61, varint(100), record0[1:]),
		recordCase("negative record length", 0, 1, dense, ErrKindInvalid, 61, varint(-1), record0[1:]),
		recordCase("bytes after the last record", 2, 3, dense, ErrKindInvalid, 88, threeRecords, []byte{0, 0}),
		recordCase("dense: offsetDelta not its index", 2, 3, dense, ErrKindInvalid, 70,
			record0, simpleRecord(2, "k", "v"), simpleRecord(1, "k", "v")),
		recordCase("offsetDelta repeated", 2, 3, sparseLimits, ErrKindInvalid, 79,
			record0, simpleRecord(1, "k", "v"), simpleRecord(1, "k", "v")),
		recordCase("offsetDelta negative", 2, 1, sparseLimits, ErrKindInvalid, 61, simpleRecord(-1, "k", "v")),
		recordCase("offsetDelta beyond lastOffsetDelta", 2, 2, sparseLimits, ErrKindInvalid, 70,
			record0, simpleRecord(3, "k", "v")),
		recordCase("key length -2", 0, 1, dense, ErrKindInvalid, 65,
			rawRecord(attributes, zero, zero, varint(-2), one, value, zero)),
		recordCase("key beyond the record", 0, 1, dense, ErrKindInvalid, 65,
			rawRecord(attributes, zero, zero, varint(9), one, value, zero)),
		recordCase("null header key", 0, 1, dense, ErrKindInvalid, 68,
			rawRecord(attributes, zero, zero, null, null, one, null, null)),
		recordCase("negative header count", 0, 1, dense, ErrKindInvalid, 67,
			rawRecord(attributes, zero, zero, null, null, varint(-1))),
		recordCase("header count beyond the record", 0, 1, dense, ErrKindInvalid, 69,
			rawRecord(attributes, zero, zero, null, null, varint(1000))),
		recordCase("record longer than its fields", 0, 1, dense, ErrKindInvalid, 70,
			rawRecord(attributes, zero, zero, one, value, one, value, zero, []byte{0})),
		recordCase("record ends inside attributes", 0, 1, dense, ErrKindInvalid, 62, rawRecord()),
		recordCase("offsetDelta varint of 6 bytes", 0, 1, dense, ErrKindInvalid, 64,
			rawRecord(attributes, zero, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x00}, null, null, zero)),
		recordCase("offsetDelta varint beyond 32 bits", 0, 1, dense, ErrKindInvalid, 64,
			rawRecord(attributes, zero, []byte{0xff, 0xff, 0xff, 0xff, 0x1f}, null, null, zero)),
		recordCase("timestampDelta varlong beyond 64 bits", 0, 1, dense, ErrKindInvalid, 63,
			rawRecord(attributes, bytes.Repeat([]byte{0xff}, 9), []byte{0x02}, zero, null, null, zero)),
	}
}

func acceptedCases() []validateCase {
	attributes, zero, null := []byte{0}, varint(0), varint(-1)
	sparse := concat(simpleRecord(0, "k", "v"), simpleRecord(2, "k", "v"), simpleRecord(5, "k", "v"))
	return []validateCase{
		{name: "dense", batch: goodBatch()},
		{name: "exactly MaxBatchBytes", batch: goodBatch(), limits: Limits{MaxBatchBytes: 88}},
		{name: "sparse, as compaction leaves it", batch: encodeBatch(plainHeader(6, 3), sparse), limits: sparseLimits},
		{name: "sparse rejected for a producer", batch: encodeBatch(plainHeader(6, 3), sparse),
			kind: ErrKindInvalid, position: RecordCountPosition},
		{name: "compacted to no records", batch: encodeBatch(plainHeader(4, 0), nil), limits: sparseLimits},
		{name: "gzip: records not walked unless opened", batch: encodeBatch(withCodec(plainHeader(2, 3), CompressionGzip), []byte{0xff, 0xfe}),
			limits: headerOnlyLimits},
		{name: "zstd: records not walked unless opened", batch: encodeBatch(withCodec(plainHeader(0, 1), CompressionZstd), nil),
			limits: headerOnlyLimits},
		{name: "null key, value and header value", batch: encodeBatch(plainHeader(0, 1),
			rawRecord(attributes, zero, zero, null, null, varint(1), varint(1), []byte("h"), null))},
		{name: "timestampDelta of 10 bytes", batch: encodeBatch(plainHeader(0, 1),
			rawRecord(attributes, varint(math.MinInt64), zero, null, null, zero)), limits: headerOnlyLimits},
	}
}

func TestValidate(t *testing.T) {
	var cases []validateCase
	for _, group := range [][]validateCase{truncatedCases(), corruptCases(), tooLargeCases(),
		invalidHeaderCases(), invalidRecordCases(), acceptedCases()} {
		cases = append(cases, group...)
	}
	for _, test := range cases {
		t.Run(test.name, func(t *testing.T) {
			limits := test.limits
			if limits == (Limits{}) {
				limits = DefaultLimits()
			}
			header, err := Validate(test.batch, limits)
			if test.kind == 0 {
				checkAccepted(t, test.batch, header, err)
				return
			}
			recordError := asError(t, err)
			if recordError.Kind != test.kind || recordError.Position != test.position || recordError.BatchPosition != 0 {
				t.Fatalf("got %v (kind %v, position %d), want kind %v at position %d",
					err, recordError.Kind, recordError.Position, test.kind, test.position)
			}
			checkSentinels(t, err, test.kind)
			if header != (Header{}) {
				t.Fatalf("rejected batch returned header %+v", header)
			}
		})
	}
}

func checkAccepted(t *testing.T, batch []byte, header Header, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("rejected a valid batch: %v", err)
	}
	parsed, err := ParseHeader(batch)
	if err != nil || parsed != header || header.Size() != len(batch) {
		t.Fatalf("ParseHeader = %+v, %v; Validate = %+v; %d bytes", parsed, err, header, len(batch))
	}
}

// checkSentinels checks that err matches the sentinel for kind, and no other.
func checkSentinels(t *testing.T, err error, kind ErrorKind) {
	t.Helper()
	sentinels := map[ErrorKind]error{ErrKindTruncated: ErrTruncated, ErrKindCorrupt: ErrCorrupt,
		ErrKindInvalid: ErrInvalid, ErrKindTooLarge: ErrTooLarge}
	for sentinelKind, sentinel := range sentinels {
		if errors.Is(err, sentinel) != (sentinelKind == kind) {
			t.Errorf("errors.Is(%v, %v) = %v", err, sentinel, !(sentinelKind == kind))
		}
	}
}

func TestKafkaCode(t *testing.T) {
	for kind, code := range map[ErrorKind]int16{
		ErrKindTruncated: 2, ErrKindCorrupt: 2, ErrKindTooLarge: 10, ErrKindInvalid: 87,
	} {
		if got := (&Error{Kind: kind}).KafkaCode(); got != code {
			t.Errorf("%v: KafkaCode() = %d, want %d", kind, got, code)
		}
	}
}

func TestErrorMessage(t *testing.T) {
	_, err := Validate(changed(goodBatch(), func(b []byte) { b[86] ^= 1 }), DefaultLimits())
	const prefix = "record: corrupt batch at byte 0: crc 0x"
	if got := err.Error(); len(got) < len(prefix) || got[:len(prefix)] != prefix {
		t.Fatalf("message %q, want prefix %q", got, prefix)
	}
}

func TestLimits(t *testing.T) {
	for _, limits := range []Limits{{}, {MaxBatchBytes: HeaderSize - 1}, {MaxBatchBytes: math.MaxInt}} {
		if limits.Validate() == nil {
			t.Errorf("%+v passed Limits.Validate", limits)
		}
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("Validate accepted limits %+v", limits)
				}
			}()
			_, _ = Validate(goodBatch(), limits)
		}()
	}
	if err := DefaultLimits().Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestParseHeader(t *testing.T) {
	for _, test := range []struct {
		name     string
		batch    []byte
		kind     ErrorKind
		position int
	}{
		{"60 bytes", goodBatch()[:60], ErrKindTruncated, 60},
		{"short batchLength", changed(goodBatch(), withBatchLength(48)), ErrKindCorrupt, BatchLengthPosition},
		{"magic 0", changed(goodBatch(), func(b []byte) { b[MagicPosition] = 0 }), ErrKindInvalid, MagicPosition},
	} {
		_, err := ParseHeader(test.batch)
		recordError := asError(t, err)
		if recordError.Kind != test.kind || recordError.Position != test.position {
			t.Errorf("%s: got %v, want kind %v at %d", test.name, err, test.kind, test.position)
		}
	}
	// ParseHeader reads only the header: a batch whose body is missing or
	// damaged still yields its header.
	header, err := ParseHeader(goodBatch()[:HeaderSize])
	if err != nil || header.Size() != 88 || header.RecordCount != 3 {
		t.Fatalf("ParseHeader of a bare header = %+v, %v", header, err)
	}
}

// MatchHeaders takes batches with their own headers, and refuses a header
// that is not the bytes' (a field changed on either side), a batch
// missing or left over, and bytes that do not frame.
func TestMatchHeaders(t *testing.T) {
	one := Build(BuildOptions{BaseOffset: 0, Records: []Record{{Value: []byte("a")}, {Value: []byte("b")}}})
	two := Build(BuildOptions{BaseOffset: 2, Records: []Record{{Value: []byte("c")}}})
	batches := append(append([]byte(nil), one...), two...)
	headers, err := ValidateAll(batches, DefaultLimits())
	if err != nil || len(headers) != 2 {
		t.Fatalf("ValidateAll: %v, %d headers", err, len(headers))
	}
	if err := MatchHeaders(batches, headers); err != nil {
		t.Fatalf("the batches' own headers: %v", err)
	}
	if err := MatchHeaders(nil, nil); err != nil {
		t.Fatalf("no batches: %v", err)
	}
	changedHeader := append([]Header(nil), headers...)
	changedHeader[1].BaseOffset = 3
	changedBytes := append([]byte(nil), batches...)
	SetPartitionLeaderEpoch(changedBytes[len(one):], 7)
	for name, test := range map[string]struct {
		batches []byte
		headers []Header
	}{
		"a header field changed":     {batches, changedHeader},
		"the bytes changed":          {changedBytes, headers},
		"a batch left over":          {batches, headers[:1]},
		"a header without its batch": {one, headers},
		"bytes that do not frame":    {batches[:len(batches)-1], headers},
	} {
		err := MatchHeaders(test.batches, test.headers)
		if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated) {
			t.Errorf("%s: %v, want a corrupt or truncated batch", name, err)
		}
	}
}
