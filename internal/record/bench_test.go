package record

import (
	"bytes"
	"fmt"
	"testing"
)

// batchOfSize builds a dense batch of records with valueSize-byte values and
// 16-byte keys, as many as fit in size bytes.
func batchOfSize(size, valueSize int) []byte {
	record := Record{Key: bytes.Repeat([]byte("k"), 16), Value: bytes.Repeat([]byte("v"), valueSize)}
	opts := BuildOptions{BaseTimestampMs: 1_700_000_000_000, Records: []Record{record}}
	for {
		opts.Records = append(opts.Records, record)
		if len(Build(opts)) > size {
			opts.Records = opts.Records[:len(opts.Records)-1]
			return Build(opts)
		}
	}
}

func BenchmarkValidate(b *testing.B) {
	for _, size := range []struct {
		name              string
		bytes, valueBytes int
	}{
		{"1KiB", 1 << 10, 100},
		{"16KiB", 16 << 10, 100},
		{"16KiB/small-records", 16 << 10, 10},
		{"16KiB/one-record", 16 << 10, 16<<10 - 100},
	} {
		batch := batchOfSize(size.bytes, size.valueBytes)
		records := decodeHeader(batch).RecordCount
		b.Run(fmt.Sprintf("%s/records=%d", size.name, records), func(b *testing.B) {
			b.SetBytes(int64(len(batch)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Validate(batch, DefaultLimits()); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkValidateAll(b *testing.B) {
	buffer, _ := concatenatedBatches(6, 64)
	b.SetBytes(int64(len(buffer)))
	b.ReportAllocs()
	for b.Loop() {
		iterator := NewIterator(buffer, DefaultLimits())
		for iterator.Next() {
		}
		if err := iterator.Err(); err != nil {
			b.Fatal(err)
		}
	}
}
