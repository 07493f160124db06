package commitlog

import (
	"fmt"

	"github.com/tidelog/tide/internal/invariants"
)

// assertInvariantsLocked panics when the log's state contradicts itself: a
// broken invariant is a bug in this package, and carrying on could serve or
// acknowledge records that are not there. The offset checks are cheap and
// always on; the walk over every segment and epoch entry runs only with the
// invariants build tag.
func (l *Log) assertInvariantsLocked(when string) {
	end := l.logEndOffsetLocked()
	if l.logStartOffset > l.highWatermark || l.highWatermark > end {
		panic(fmt.Sprintf("commitlog: %s: high watermark %d outside [%d, %d]", when, l.highWatermark, l.logStartOffset, end))
	}
	if l.recoveryPoint > l.durableEndOffset || l.durableEndOffset > end {
		panic(fmt.Sprintf("commitlog: %s: recovery point %d, durable end %d, log end %d out of order", when, l.recoveryPoint, l.durableEndOffset, end))
	}
	if !invariants.Enabled {
		return
	}
	for i, s := range l.segments {
		pending := int64(0)
		for _, buffer := range s.pending {
			pending += int64(len(buffer))
		}
		unsettled := i == len(l.segments)-1 || l.isRolledLocked(s)
		if s.flushed+pending != s.size || (!unsettled && pending > 0) {
			panic(fmt.Sprintf("commitlog: %s: segment %d of %d has %d bytes, %d flushed and %d pending", when, i, len(l.segments), s.size, s.flushed, pending))
		}
		if s.index.flushed > s.index.length() || s.timeIndex.flushed > s.timeIndex.length() || (!unsettled && s.pendingIndexEntries() > 0) {
			panic(fmt.Sprintf("commitlog: %s: segment %d of %d has index entries %d/%d flushed of %d/%d", when, i, len(l.segments), s.index.flushed, s.timeIndex.flushed, s.index.length(), s.timeIndex.length()))
		}
		if s.nextOffset < s.baseOffset || (i > 0 && s.baseOffset != l.segments[i-1].nextOffset) {
			panic(fmt.Sprintf("commitlog: %s: segment %d [%d, %d) does not follow [%d, %d)", when, i, s.baseOffset, s.nextOffset, l.segments[max(i-1, 0)].baseOffset, l.segments[max(i-1, 0)].nextOffset))
		}
	}
	if err := l.epochs.Validate(); err != nil {
		panic(fmt.Sprintf("commitlog: %s: %v", when, err))
	}
	if latest, ok := l.epochs.Latest(); ok && latest.StartOffset > end {
		panic(fmt.Sprintf("commitlog: %s: epoch %d starts at %d, past the log end %d", when, latest.Epoch, latest.StartOffset, end))
	}
}
