package commitlog

import (
	"sync"

	"github.com/tidelog/tide/internal/record"
)

// readCursorsMax bounds the read cursors a log keeps: enough for the
// consumers and followers that read one partition at once in most
// clusters; a log read by more falls back, for some reads, to the lookup.
const readCursorsMax = 8

// readCursor is where a read ended: the batch at position in segment
// begins at offset. A reader that goes on from there (a consumer's or a
// follower's next fetch asks for the offset its last one ended at) starts
// at position without the index lookup and the scan of batch headers
// that find does. Since only the active segment keeps its index in
// memory, that lookup is a binary search of reads of the index file for
// every older segment, which is where a consumer reading from the start
// spends its fetches.
//
// A cursor is only a hint and checks itself before use: its segment must
// still be the one holding offset (retention and the cleaner replace or
// drop segments), and generation the log's syncGeneration, which every
// truncation, deletion and close advances (invalidateSyncsLocked), so a
// cursor never points into bytes that were truncated and written again.
type readCursor struct {
	segment    *segment
	generation uint64
	offset     record.Offset
	position   int64
}

// readCursors are a log's cursors, the newest replacing the oldest. Reads
// run alongside each other under the log's read lock, so the cursors have
// a lock of their own.
type readCursors struct {
	mu      sync.Mutex
	cursors [readCursorsMax]readCursor
	next    int
	// hits counts the reads that began at a cursor, for tests.
	hits int64
}

// find returns the position of the batch beginning at offset in s, if a
// cursor knows it and still holds for generation.
func (c *readCursors) find(s *segment, generation uint64, offset record.Offset) (int64, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, cursor := range c.cursors {
		if cursor.segment == s && cursor.generation == generation && cursor.offset == offset && cursor.position < s.size {
			c.hits++
			return cursor.position, true
		}
	}
	return 0, false
}

// remember records where a read that began at from ended, in place of the
// cursor that read began at when there is one (the same reader going on),
// else in place of the oldest.
func (c *readCursors) remember(from record.Offset, ended readCursor) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, cursor := range c.cursors {
		if cursor.segment == ended.segment && cursor.offset == from {
			c.cursors[i] = ended
			return
		}
	}
	c.cursors[c.next] = ended
	c.next = (c.next + 1) % readCursorsMax
}

// reset drops every cursor: the next reads look their start up.
func (c *readCursors) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.cursors, c.next = [readCursorsMax]readCursor{}, 0
}
