package commitlog

import (
	"fmt"

	"github.com/tidelog/tide/internal/record"
)

// ReadHeaders returns, in offset order, the header of every batch from the
// log start offset to the log end offset for which keep (nil keeps all)
// returns true. It reads only the 61 header bytes of each batch, skipping
// the records by the batch length: what a replica needs to rebuild its
// idempotent producer state (internal/producer) after a restart or a
// truncation. It still visits every batch, so its cost grows with the log:
// Kafka bounds it with producer state snapshots, which tide does not write
// yet (docs/replication.md).
func (l *Log) ReadHeaders(keep func(record.Header) bool) ([]record.Header, error) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	if err := l.usableLocked(); err != nil {
		return nil, err
	}
	var headers []record.Header
	for _, s := range l.segments {
		for position := int64(0); position < s.size; {
			header, err := s.readHeader(position)
			if err == nil && position+batchSize(header) > s.size {
				err = fmt.Errorf("batch of %d bytes runs past the segment end: %w", batchSize(header), record.ErrCorrupt)
			}
			if err != nil {
				return nil, &CorruptionError{Segment: segmentFileName(s.baseOffset), Position: position, Offset: header.BaseOffset, Cause: err}
			}
			position += batchSize(header)
			if header.LastOffset() < l.logStartOffset || (keep != nil && !keep(header)) {
				continue
			}
			headers = append(headers, header)
		}
	}
	return headers, nil
}
