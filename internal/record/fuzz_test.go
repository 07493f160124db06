package record

import (
	"bytes"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// fuzzLimits are the limits each fuzz input is validated under: producer input
// and log input, with a small size limit too so TooLarge is reachable.
var fuzzLimits = []Limits{
	DefaultLimits(),
	sparseLimits,
	{MaxBatchBytes: 200, RequireDenseOffsets: true},
}

// seedBatches are valid batches and near misses to start the fuzzers from.
func seedBatches() [][]byte {
	seeds := [][]byte{nil, goodBatch(), goodBatch()[:60], append(goodBatch(), 0)}
	for _, group := range [][]validateCase{corruptCases(), invalidHeaderCases(), invalidRecordCases(), acceptedCases()} {
		for _, test := range group {
			seeds = append(seeds, test.batch)
		}
	}
	for seed := range uint64(8) {
		seeds = append(seeds, Build(randomBuildOptions(newRandom(seed), 4)))
	}
	return seeds
}

// FuzzValidate checks, for any bytes, that Validate returns (it must never
// panic or hang), that a rejection is a well-formed *Error, and that an
// acceptance agrees with ParseHeader and with kmsg's decoding of the records.
func FuzzValidate(f *testing.F) {
	for _, seed := range seedBatches() {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		original := bytes.Clone(data)
		for _, limits := range fuzzLimits {
			header, err := Validate(data, limits)
			if err != nil {
				checkFuzzError(t, err, 0, len(data))
				continue
			}
			checkFuzzAccepted(t, data, header)
		}
		if !bytes.Equal(data, original) {
			t.Fatal("Validate changed its input")
		}
	})
}

// checkFuzzError checks an error's type and that its positions lie inside the
// buffer, at or after the batch start.
func checkFuzzError(t *testing.T, err error, batchPosition, length int) {
	t.Helper()
	recordError := asError(t, err)
	if recordError.Kind < ErrKindTruncated || recordError.Kind > ErrKindTooLarge ||
		recordError.BatchPosition != batchPosition || recordError.Position < batchPosition ||
		recordError.Position > length || recordError.Reason == "" {
		t.Fatalf("malformed error %+v for a batch at %d in %d bytes", recordError, batchPosition, length)
	}
}

func checkFuzzAccepted(t *testing.T, data []byte, header Header) {
	t.Helper()
	parsed, err := ParseHeader(data)
	if err != nil || parsed != header || header.Size() != len(data) {
		t.Fatalf("Validate accepted %+v; ParseHeader = %+v, %v; %d bytes", header, parsed, err, len(data))
	}
	var decoded kmsg.RecordBatch
	if err := decoded.ReadFrom(data); err != nil {
		t.Fatalf("Validate accepted what kmsg cannot read: %v", err)
	}
	if header.Compression() != CompressionNone {
		return
	}
	records := kmsgReadRecords(t, decoded.Records, int(header.RecordCount))
	previousOffsetDelta := int32(-1)
	for _, record := range records {
		if record.OffsetDelta <= previousOffsetDelta || record.OffsetDelta > header.LastOffsetDelta {
			t.Fatalf("Validate accepted offsetDelta %d after %d, lastOffsetDelta %d",
				record.OffsetDelta, previousOffsetDelta, header.LastOffsetDelta)
		}
		previousOffsetDelta = record.OffsetDelta
	}
}

// FuzzValidateAll checks, for any bytes, that ValidateAll accounts for every
// byte: the good batches it returns tile the buffer from the start, each is
// what Validate says of its bytes alone, and an error starts where they end.
func FuzzValidateAll(f *testing.F) {
	seeds := seedBatches()
	for index, seed := range seeds {
		f.Add(seed)
		f.Add(concat(seeds[(index+1)%len(seeds)], seed))
	}
	buffer, _ := concatenatedBatches(5, 3)
	f.Add(buffer)
	f.Add(buffer[:len(buffer)-1])
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, limits := range fuzzLimits {
			headers, err := ValidateAll(data, limits)
			position := 0
			for _, header := range headers {
				alone, err := Validate(data[position:position+header.Size()], limits)
				if err != nil || alone != header {
					t.Fatalf("batch at %d: ValidateAll %+v, Validate %+v, %v", position, header, alone, err)
				}
				position += header.Size()
			}
			if err == nil && position != len(data) {
				t.Fatalf("no error, but batches end at %d of %d bytes", position, len(data))
			}
			if err != nil {
				checkFuzzError(t, err, position, len(data))
			}
		}
	})
}
