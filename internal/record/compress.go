package record

import (
	"bytes"
	"compress/gzip"
	"fmt"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// compress deflates a batch's records with codec, for the one place tide
// re-encodes a batch: the log cleaner, which writes the records it keeps
// with the codec the producer chose, as Kafka's cleaner does. The codecs are
// the ones franz-go brings and decompress reads; every encoder runs in the
// calling goroutine (lz4 and zstd with concurrency 1, snappy as one raw
// block, as franz-go writes it).
func compress(codec Compression, data []byte) ([]byte, error) {
	switch codec {
	case CompressionGzip:
		var out bytes.Buffer
		writer := gzip.NewWriter(&out)
		if _, err := writer.Write(data); err != nil {
			return nil, err
		}
		if err := writer.Close(); err != nil {
			return nil, err
		}
		return out.Bytes(), nil
	case CompressionSnappy:
		return s2.EncodeSnappy(nil, data), nil
	case CompressionLZ4:
		var out bytes.Buffer
		writer := lz4.NewWriter(&out)
		if err := writer.Apply(lz4.ConcurrencyOption(1)); err != nil {
			return nil, err
		}
		if _, err := writer.Write(data); err != nil {
			return nil, err
		}
		if err := writer.Close(); err != nil {
			return nil, err
		}
		return out.Bytes(), nil
	case CompressionZstd:
		encoder, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		defer encoder.Close()
		return encoder.EncodeAll(data, nil), nil
	}
	panic(fmt.Sprintf("record: compress with codec %s", codec))
}
