package record

import (
	"bytes"
	"compress/gzip"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// DefaultMaxDecompressedBatchBytes is the default for
// Limits.MaxDecompressedBatchBytes: 64 MiB, 64 times Kafka's default
// message.max.bytes, room for any real producer's compression ratio on a
// full-size batch while a batch that inflates further (a decompression bomb:
// 65 KB of zstd can claim 2 GiB) is refused without being inflated.
const DefaultMaxDecompressedBatchBytes = 64 << 20

// MaxDecompressedBatchBytesMax bounds the configurable limit: what one
// batch may cost in memory while it is checked.
const MaxDecompressedBatchBytesMax = 1 << 30

// xerialPrefix starts snappy data framed the way the Java producer writes
// it (xerial snappy-java's stream format): the magic, then a version and a
// compatible version, then chunks of a big-endian length and a raw snappy
// block.
var xerialPrefix = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

const xerialHeaderBytes = 16

// decompress inflates a batch's records (data, the bytes after the header)
// with codec, and refuses them once they pass limit bytes. No codec is
// trusted with a size the data claims: the streaming codecs are read through
// a reader that stops one byte past the limit, and snappy's claimed block
// sizes are checked against the limit before anything is allocated, so a
// bomb costs at most limit bytes and the time to inflate them.
//
// Every decoder runs in the calling goroutine: gzip and snappy are plain
// functions, lz4 is told to use one goroutine (its default), and zstd with
// concurrency 1 decodes synchronously as it is read (no goroutines started).
// A failure of the codec is ErrKindCorrupt (the bytes are not what the
// attribute says), passing the limit ErrKindInvalid.
func decompress(codec Compression, data []byte, limit int) ([]byte, *Error) {
	var out []byte
	var err error
	switch codec {
	case CompressionGzip:
		out, err = decompressGzip(data, limit)
	case CompressionSnappy:
		out, err = decompressSnappy(data, limit)
	case CompressionLZ4:
		reader := lz4.NewReader(bytes.NewReader(data))
		if err = reader.Apply(lz4.ConcurrencyOption(1)); err == nil {
			out, err = readBounded(reader, len(data), limit)
		}
	case CompressionZstd:
		out, err = decompressZstd(data, limit)
	default:
		panic(fmt.Sprintf("record: decompress of codec %s", codec))
	}
	if err == errInflatesPastLimit {
		return nil, newError(ErrKindInvalid, 0, HeaderSize,
			fmt.Sprintf("%s records inflate past the limit of %d bytes", codec, limit))
	}
	if err != nil {
		return nil, newError(ErrKindCorrupt, 0, HeaderSize, fmt.Sprintf("%s records do not decompress: %v", codec, err))
	}
	return out, nil
}

// errInflatesPastLimit says the records would pass the decompressed-size
// limit; decompress turns it into an *Error.
var errInflatesPastLimit = errors.New("records inflate past the limit")

// readBounded reads reader, which inflates compressedBytes of data, to its
// end, or fails with errInflatesPastLimit once it yields more than limit
// bytes. The buffer starts at a few times the compressed size (what real
// producers' ratios need) and grows with what was actually read, never to a
// size the data claims.
func readBounded(reader io.Reader, compressedBytes, limit int) ([]byte, error) {
	var out bytes.Buffer
	out.Grow(min(limit, 4*compressedBytes) + bytes.MinRead)
	n, err := out.ReadFrom(io.LimitReader(reader, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if n > int64(limit) {
		return nil, errInflatesPastLimit
	}
	return out.Bytes(), nil
}

func decompressGzip(data []byte, limit int) ([]byte, error) {
	reader, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	return readBounded(reader, len(data), limit)
}

// decompressZstd decodes a zstd stream synchronously: with concurrency 1
// the decoder starts no goroutines and decodes as it is read. Its memory
// bound (window and frame sizes) is the limit too, so a frame that declares a
// larger window is refused before the decoder allocates it.
func decompressZstd(data []byte, limit int) ([]byte, error) {
	decoder, err := zstd.NewReader(bytes.NewReader(data), zstd.WithDecoderConcurrency(1),
		zstd.WithDecoderLowmem(true), zstd.WithDecoderMaxMemory(uint64(limit)))
	if err != nil {
		return nil, err
	}
	defer decoder.Close()
	out, err := readBounded(decoder, len(data), limit)
	if err == zstd.ErrDecoderSizeExceeded || err == zstd.ErrWindowSizeExceeded {
		return nil, errInflatesPastLimit
	}
	return out, err
}

// decompressSnappy decodes a raw snappy block, or xerial-framed blocks.
// Snappy's block format states its decoded length up front and the decoder
// allocates it, so every claim is checked against the limit first.
func decompressSnappy(data []byte, limit int) ([]byte, error) {
	if !bytes.HasPrefix(data, xerialPrefix) {
		return decodeSnappyBlock(nil, data, limit)
	}
	if len(data) < xerialHeaderBytes {
		return nil, fmt.Errorf("xerial header of %d bytes", len(data))
	}
	var out []byte
	for chunks := data[xerialHeaderBytes:]; len(chunks) > 0; {
		if len(chunks) < 4 {
			return nil, fmt.Errorf("xerial chunk length cut short")
		}
		length := binary.BigEndian.Uint32(chunks)
		chunks = chunks[4:]
		if uint64(length) > uint64(len(chunks)) {
			return nil, fmt.Errorf("xerial chunk of %d bytes, %d left", length, len(chunks))
		}
		var err error
		if out, err = decodeSnappyBlock(out, chunks[:length], limit); err != nil {
			return nil, err
		}
		chunks = chunks[length:]
	}
	return out, nil
}

// decodeSnappyBlock appends the decoded block to out, refusing it when the
// total would pass limit.
func decodeSnappyBlock(out, block []byte, limit int) ([]byte, error) {
	length, err := s2.DecodedLen(block)
	if err != nil {
		return nil, err
	}
	if length > limit-len(out) {
		return nil, errInflatesPastLimit
	}
	decoded, err := s2.Decode(nil, block)
	if err != nil {
		return nil, err
	}
	return append(out, decoded...), nil
}
