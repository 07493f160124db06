package record

import (
	"bytes"
	"testing"
)

// concatenatedBatches returns count random batches at consecutive offsets,
// one after another in a buffer, and each batch's start.
func concatenatedBatches(seed uint64, count int) ([]byte, []int) {
	random := newRandom(seed)
	var buffer []byte
	var positions []int
	nextOffset := Offset(0)
	for range count {
		opts := randomBuildOptions(random, 10)
		opts.BaseOffset = nextOffset
		positions = append(positions, len(buffer))
		buffer = AppendBatch(buffer, opts)
		nextOffset += Offset(len(opts.Records))
	}
	return buffer, positions
}

func TestIterator(t *testing.T) {
	buffer, positions := concatenatedBatches(1, 5)
	iterator := NewIterator(buffer, DefaultLimits())
	index := 0
	for iterator.Next() {
		end := len(buffer)
		if index+1 < len(positions) {
			end = positions[index+1]
		}
		if iterator.Position() != positions[index] || !bytes.Equal(iterator.Batch(), buffer[positions[index]:end]) ||
			cap(iterator.Batch()) != end-positions[index] {
			t.Fatalf("batch %d: position %d, %d bytes", index, iterator.Position(), len(iterator.Batch()))
		}
		if index > 0 && BaseOffset(iterator.Batch()) != BaseOffset(buffer[positions[index-1]:])+
			Offset(decodeHeader(buffer[positions[index-1]:]).RecordCount) {
			t.Fatalf("batch %d does not follow its predecessor", index)
		}
		index++
	}
	if iterator.Err() != nil || index != len(positions) {
		t.Fatalf("iterated %d of %d batches: %v", index, len(positions), iterator.Err())
	}
	headers, err := ValidateAll(nil, DefaultLimits())
	if headers != nil || err != nil {
		t.Fatalf("empty buffer: %v, %v", headers, err)
	}
}

// TestValidateAllTornTail cuts the last of several batches at every length
// short of whole, as a crash mid-write leaves a log's tail, and checks that
// the good batches are reported and the torn one is found where it starts.
func TestValidateAllTornTail(t *testing.T) {
	buffer, positions := concatenatedBatches(2, 4)
	tornStart := positions[len(positions)-1]
	for end := tornStart + 1; end < len(buffer); end++ {
		headers, err := ValidateAll(buffer[:end], DefaultLimits())
		recordError := asError(t, err)
		if recordError.Kind != ErrKindTruncated || recordError.BatchPosition != tornStart ||
			recordError.Position != end {
			t.Fatalf("cut at %d: %v, want truncated batch at %d", end, err, tornStart)
		}
		if len(headers) != len(positions)-1 {
			t.Fatalf("cut at %d: %d good headers, want %d", end, len(headers), len(positions)-1)
		}
		for index, header := range headers {
			if want, _ := ParseHeader(buffer[positions[index]:]); header != want {
				t.Fatalf("cut at %d: header %d = %+v, want %+v", end, index, header, want)
			}
		}
	}
}

// TestValidateAllCorruptMiddle checks that positions in an error from a
// later batch are relative to the whole buffer.
func TestValidateAllCorruptMiddle(t *testing.T) {
	buffer, positions := concatenatedBatches(3, 3)
	buffer[positions[1]+HeaderSize] ^= 0x10
	headers, err := ValidateAll(buffer, DefaultLimits())
	recordError := asError(t, err)
	if len(headers) != 1 || recordError.Kind != ErrKindCorrupt || recordError.BatchPosition != positions[1] ||
		recordError.Position != positions[1]+CRCPosition {
		t.Fatalf("%d headers, %v", len(headers), err)
	}
}
