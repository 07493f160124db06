// Package record understands Kafka's RecordBatch v2 ("magic 2") format: the
// unit that producers send, tide stores, and followers and consumers fetch.
//
// Tide keeps a batch exactly as the producer encoded it. The leader never
// decodes and re-encodes records; it validates the bytes once where they enter
// (Validate, ValidateAll, Iterator), then only stamps the two header fields
// that lie outside the CRC (SetBaseOffset, SetPartitionLeaderEpoch), so the
// producer's CRC stays valid end to end and a consumer can check it.
//
// The same validators run wherever bytes cross a trust boundary: a produce
// request from a client, a fetch response from the leader, a log segment read
// back during recovery. A producer's batch gets the most: its compressed
// records are decompressed (bounded by Limits.MaxDecompressedBatchBytes) and
// walked like uncompressed ones, and CheckFromProducer applies Kafka's
// client-only rules; the decompressed bytes are dropped once checked, and the
// batch is stored as it came. Errors are *Error values with a Kind that says what
// the caller should do: reject the request, or truncate a torn log tail.
//
// Layout of a batch (big endian), positions in bytes:
//
//	0  baseOffset           int64
//	8  batchLength          int32  bytes after this field: size = 12 + batchLength
//	12 partitionLeaderEpoch int32
//	16 magic                int8   always 2
//	17 crc                  uint32 CRC-32C (Castagnoli) of bytes [21, size)
//	21 attributes           int16  bits 0-2 compression, 3 timestamp type,
//	                               4 transactional, 5 control
//	23 lastOffsetDelta      int32
//	27 baseTimestamp        int64  milliseconds since the Unix epoch
//	35 maxTimestamp         int64  milliseconds since the Unix epoch
//	43 producerId           int64
//	51 producerEpoch        int16
//	53 baseSequence         int32
//	57 recordCount          int32
//	61 records              recordCount records, possibly compressed
//
// Each record, when uncompressed, is: varint length (of what follows),
// attributes int8, varlong timestampDelta, varint offsetDelta, varint key
// length (-1 = null) and key, varint value length (-1 = null) and value,
// varint header count, then per header a varint key length and key (never
// null) and a varint value length (-1 = null) and value. Varints are zigzag
// encoded as in protobuf.
package record
