package replica

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/record"
)

// keylessRecords returns, for the first batch that has any, the indexes of
// its records without a key. The batches passed validateProduced with the
// same limits, so they decode; one that does not is a bug.
func keylessRecords(batches []byte, headers []record.Header, limits record.Limits) []int32 {
	position := 0
	for _, header := range headers {
		batch := batches[position : position+header.Size()]
		position += header.Size()
		_, records, err := record.DecodeRecords(batch, limits.MaxBatchBytes, limits.MaxDecompressedBatchBytes)
		if err != nil {
			panic(fmt.Sprintf("replica: a validated batch does not decode: %v", err))
		}
		var keyless []int32
		for index, stored := range records {
			if stored.Key == nil {
				keyless = append(keyless, int32(index))
			}
		}
		if len(keyless) > 0 {
			return keyless
		}
	}
	return nil
}

// maxRecordErrorsShown is how many record errors Kafka's LogValidator
// names in a produce answer's error message.
const maxRecordErrorsShown = 3

// refuseKeyless answers a produce to a compacted topic whose batch has
// records without a key: INVALID_RECORD, a record error for each, and the
// messages Kafka's LogValidator gives (validateKey, processRecordErrors),
// so clients that print them print what Kafka's would.
func (r *Replica) refuseKeyless(id uint64, keyless []int32) {
	message := "Compacted topic cannot accept message without key in topic partition " + r.config.Partition.String()
	answer := ProduceAnswer{ID: id, ErrorCode: kerr.InvalidRecord.Code, BaseOffset: -1, LogStartOffset: r.log.start}
	var shown []string
	for _, index := range keyless {
		answer.RecordErrors = append(answer.RecordErrors, RecordError{BatchIndex: index, Message: message})
		if len(shown) < maxRecordErrorsShown {
			shown = append(shown, fmt.Sprintf("RecordError(batchIndex=%d, message='%s')", index, message))
		}
	}
	answer.ErrorMessage = fmt.Sprintf("One or more records have been rejected due to %d record errors in total, "+
		"and only showing the first three errors at most: [%s]", len(keyless), strings.Join(shown, ", "))
	r.ready.Answers = append(r.ready.Answers, Answer{Produce: &answer})
}

// recompressBatches returns the produced batches with each one in another
// codec recompressed to codec (record.Recompress), and their new headers.
// A batch that no longer fits the produce bound once recompressed fails
// the whole request (MESSAGE_TOO_LARGE), before anything is appended.
func recompressBatches(batches []byte, headers []record.Header, codec record.Compression, limits record.Limits) ([]byte, []record.Header, error) {
	out := make([]byte, 0, len(batches))
	recompressed := make([]record.Header, len(headers))
	position := 0
	for i, header := range headers {
		batch, next, err := record.Recompress(batches[position:position+header.Size()], codec, limits)
		if err != nil {
			return nil, nil, err
		}
		position += header.Size()
		out, recompressed[i] = append(out, batch...), next
	}
	return out, recompressed, nil
}
