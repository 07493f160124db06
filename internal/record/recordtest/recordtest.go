// Package recordtest builds compressed record batches for tests: the
// batches producers send with each of Kafka's codecs, and the ones hostile
// clients send. Production code never compresses (tide stores batches as
// producers encoded them), so the encoders live here, out of the pure
// record package.
package recordtest

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"fmt"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/tidelog/tide/internal/record"
)

// Compress returns raw compressed with codec the way Kafka producers write
// it: a gzip stream, xerial-framed snappy (the Java producer's), an lz4
// frame, or a zstd frame.
func Compress(codec record.Compression, raw []byte) []byte {
	var out bytes.Buffer
	switch codec {
	case record.CompressionNone:
		return bytes.Clone(raw)
	case record.CompressionGzip:
		writer := gzip.NewWriter(&out)
		writer.Write(raw)
		writer.Close()
	case record.CompressionSnappy:
		return Xerial(raw, 32<<10)
	case record.CompressionLZ4:
		writer := lz4.NewWriter(&out)
		writer.Write(raw)
		writer.Close()
	case record.CompressionZstd:
		encoder, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
		if err != nil {
			panic(err)
		}
		defer encoder.Close()
		return encoder.EncodeAll(raw, nil)
	default:
		panic(fmt.Sprintf("recordtest: codec %s", codec))
	}
	return out.Bytes()
}

// Xerial frames raw as snappy-java's stream does: its header, then chunks
// of at most chunkBytes, each a big-endian length and a raw snappy block.
func Xerial(raw []byte, chunkBytes int) []byte {
	out := []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1}
	for len(raw) > 0 {
		n := min(chunkBytes, len(raw))
		block := s2.EncodeSnappy(nil, raw[:n])
		out = binary.BigEndian.AppendUint32(out, uint32(len(block)))
		out = append(out, block...)
		raw = raw[n:]
	}
	return out
}

// CompressBatch returns batch (one valid uncompressed batch) with its
// records compressed with codec and the codec in its attributes, every
// other header field as it was and a CRC that matches: what a producer
// using codec would have sent.
func CompressBatch(batch []byte, codec record.Compression) []byte {
	header, err := record.ParseHeader(batch)
	if err != nil {
		panic(err)
	}
	header.Attributes = header.Attributes&^0x07 | int16(codec)
	return record.EncodeBatch(header, Compress(codec, batch[record.HeaderSize:header.Size()]))
}

// Bomb returns a batch whose header claims recordCount records (at dense
// offsets) and whose records are inflatedBytes zero bytes compressed with
// codec: a decompression bomb when inflatedBytes is large.
func Bomb(codec record.Compression, inflatedBytes int, recordCount int32) []byte {
	header := record.Header{
		Attributes: int16(codec), LastOffsetDelta: recordCount - 1, RecordCount: recordCount,
		PartitionLeaderEpoch: record.NoLeaderEpoch, ProducerID: -1, ProducerEpoch: -1, BaseSequence: -1,
	}
	return record.EncodeBatch(header, Compress(codec, make([]byte, inflatedBytes)))
}
