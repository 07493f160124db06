package record

import "fmt"

// Recompress returns batch (one whole, validated v2 batch) with its records
// compressed by codec (CompressionNone for uncompressed): what a leader
// does to a produced batch on a topic whose compression.type names a
// codec, as Kafka's LogValidator does. Every other field is kept: base
// offset, lastOffsetDelta, leader epoch, producer id, epoch and base
// sequence, the timestamp type and the records' timestamps, keys, values
// and headers; the record count, lengths and CRC are recomputed. A batch
// already in codec is returned as it is. The result must fit
// limits.MaxBatchBytes (ErrKindTooLarge, Kafka's MESSAGE_TOO_LARGE), since
// a batch can grow when its codec changes.
func Recompress(batch []byte, codec Compression, limits Limits) ([]byte, Header, error) {
	if codec < CompressionNone || codec > CompressionZstd {
		panic(fmt.Sprintf("record: recompress with codec %d", codec))
	}
	header, records, err := DecodeRecords(batch, limits.MaxBatchBytes, limits.MaxDecompressedBatchBytes)
	if err != nil {
		return nil, Header{}, err
	}
	if header.Compression() == codec || len(records) == 0 {
		return batch, header, nil
	}
	header.Attributes = header.Attributes&^attributeCompressionMask | int16(codec)
	rewritten, err := RewriteBatch(header, records, -1)
	if err != nil {
		return nil, Header{}, err
	}
	if len(rewritten) > limits.MaxBatchBytes {
		return nil, Header{}, newError(ErrKindTooLarge, 0, BatchLengthPosition,
			fmt.Sprintf("%d bytes once compressed with %s, above %d", len(rewritten), codec, limits.MaxBatchBytes))
	}
	recompressed, err := ParseHeader(rewritten)
	if err != nil {
		return nil, Header{}, fmt.Errorf("record: a recompressed batch does not parse: %w", err)
	}
	return rewritten, recompressed, nil
}
