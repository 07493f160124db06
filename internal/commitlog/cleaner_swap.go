package commitlog

import (
	"encoding/binary"
	"fmt"
	"path"

	"github.com/tidelog/tide/internal/disk"
)

// swapSegmentLocked replaces segments[i] with the cleaned version w wrote,
// crash-safely. The rewrite holds the same offsets as the original (the
// same base offset and file names, batches covering the same range), so
// either version is a valid segment at every moment, and one rename per file
// replaces it atomically:
//
//  1. write the cleaned index beside the cleaned segment, and sync both;
//  2. rename the index over the original index, then the segment over the
//     original segment;
//  3. sync the directory before the next segment's swap.
//
// A crash before the segment's rename is durable leaves the original (and
// a .cleaned leftover that recovery removes); after it, the cleaned segment.
// Either index may come with either segment: recovery checks every index
// entry against the batch it names and rebuilds an index that disagrees.
// Swapping oldest first, each durable before the next, means a crash leaves
// the cleaned versions of a prefix of the segments: a record a rewrite
// removed was superseded by a later one, in the same segment or a later
// one, which is still there (the later segment is still original, or its
// rewrite kept the record or removed it for a still later one). Kafka's
// .swap and .deleted renames do the same for groups of segments merged
// into one; tide rewrites segment for segment, which needs neither.
func (l *Log) swapSegmentLocked(i int, w *segmentWriter) error {
	fs, dir, s := l.cfg.FS, l.cfg.Dir, l.segments[i]
	segmentName, indexName := path.Join(dir, segmentFileName(s.baseOffset)), path.Join(dir, indexFileName(s.baseOffset))
	if err := w.finish(fs, indexName+cleanedSuffix); err != nil {
		return l.failLocked(fmt.Errorf("cleaner: write %s: %w", segmentName+cleanedSuffix, err))
	}
	if err := fs.Rename(indexName+cleanedSuffix, indexName); err != nil {
		return l.failLocked(fmt.Errorf("cleaner: swap %s: %w", indexName, err))
	}
	if err := fs.Rename(segmentName+cleanedSuffix, segmentName); err != nil {
		return l.failLocked(fmt.Errorf("cleaner: swap %s: %w", segmentName, err))
	}
	if err := fs.SyncDir(dir); err != nil {
		return l.failLocked(fmt.Errorf("cleaner: sync dir: %w", err))
	}
	// The original's files stay open until the next pass (retireLocked):
	// a Chunk read from it before the swap may still be on its way to a
	// socket, and the renamed-over file lives on while it is open.
	l.cleaner.retired = append(l.cleaner.retired, s)
	fresh, err := openSegment(fs, dir, s.baseOffset, s.createdAtMs)
	if err != nil {
		return l.failLocked(fmt.Errorf("cleaner: reopen %s: %w", segmentName, err))
	}
	fresh.nextOffset = s.nextOffset
	fresh.index.setWritten(w.index)
	// The time index stays the original's: cleaning only removes records,
	// so an entry's "nothing up to this offset is newer" still holds, and
	// retention by the original's newest timestamp can only come later.
	fresh.timeIndex.adopt(&s.timeIndex.entryFile)
	fresh.firstTimestampMs, fresh.maxTimestampMs, fresh.offsetOfMaxTimestamp = s.firstTimestampMs, s.maxTimestampMs, s.offsetOfMaxTimestamp
	if fresh.size != w.size {
		panic(fmt.Sprintf("commitlog: cleaned segment %s is %d bytes, %d were written", segmentName, fresh.size, w.size))
	}
	fresh.spillIndexes() // a cleaned segment is never the active one
	l.segments[i] = fresh
	return nil
}

// finish syncs the cleaned segment and writes and syncs its index.
func (w *segmentWriter) finish(fs disk.FS, indexName string) error {
	if err := w.file.Sync(); err != nil {
		w.file.Close()
		return err
	}
	if err := w.file.Close(); err != nil {
		return err
	}
	index, err := fs.Create(indexName)
	if err != nil {
		return err
	}
	data := make([]byte, 0, len(w.index)*indexEntryBytes)
	for _, entry := range w.index {
		data = binary.BigEndian.AppendUint32(data, entry.relativeOffset)
		data = binary.BigEndian.AppendUint32(data, entry.position)
	}
	if _, err := index.Write(data); err != nil {
		index.Close()
		return err
	}
	if err := index.Sync(); err != nil {
		index.Close()
		return err
	}
	return index.Close()
}

// closeRetiredLocked closes the files of segments an earlier pass swapped
// out. A Chunk of them handed out before that pass must be finished with by
// now: a pass runs at most once per broker cleaner interval.
func (l *Log) closeRetiredLocked() error {
	if len(l.cleaner.retired) > 0 {
		// A sync job may name a swapped-out segment. A failed drain fails
		// the log, which every later call reports; the files close anyway.
		_ = l.invalidateSyncsLocked()
	}
	var err error
	for _, s := range l.cleaner.retired {
		if closeErr := s.close(); err == nil {
			err = closeErr
		}
	}
	l.cleaner.retired = nil
	return err
}
