// Package leaderepoch is the leader-epoch cache: which leader epoch began at
// which offset. It is pure (no I/O) so that the partition log on disk and the
// replication core share one implementation of the lookups that epoch
// truncation depends on.
package leaderepoch

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/tidelog/tide/internal/record"
)

// Entry says that leader epoch Epoch began at StartOffset: the first
// batch appended in that epoch has base offset StartOffset (or will have, for
// the entry a new leader records at its log end offset before any write).
type Entry struct {
	Epoch       record.LeaderEpoch
	StartOffset record.Offset
}

// Cache maps leader epochs to the offset at which each began. It is
// what lets a follower find where its log diverges from a new leader's by
// epoch instead of by its own (possibly lagging) high watermark, the fix for
// KAFKA-1211 (KIP-101, KIP-279).
//
// Invariant: both Epoch and StartOffset strictly increase along entries.
// Cache is a plain value with no I/O; the Log persists it.
type Cache struct {
	entries []Entry
}

// Entries returns a copy of the cache's entries, oldest first.
func (c *Cache) Entries() []Entry {
	return append([]Entry(nil), c.entries...)
}

// Latest returns the newest entry, and false when the cache is empty.
func (c *Cache) Latest() (Entry, bool) {
	if len(c.entries) == 0 {
		return Entry{}, false
	}
	return c.entries[len(c.entries)-1], true
}

// LatestEpoch returns the newest epoch, or record.NoLeaderEpoch.
func (c *Cache) LatestEpoch() record.LeaderEpoch {
	latest, ok := c.Latest()
	if !ok {
		return record.NoLeaderEpoch
	}
	return latest.Epoch
}

// Assign records that epoch began at start. It is a no-op when epoch is
// already the latest epoch and start is not below its start offset. Any
// entry with an epoch >= epoch or a start offset >= start is removed first,
// so the cache stays strictly increasing in both. It reports whether the
// cache changed.
func (c *Cache) Assign(epoch record.LeaderEpoch, start record.Offset) bool {
	if epoch < 0 || start < 0 {
		panic(fmt.Sprintf("leaderepoch: assign epoch %d at offset %d", epoch, start))
	}
	if latest, ok := c.Latest(); ok && latest.Epoch == epoch && start >= latest.StartOffset {
		return false
	}
	n := len(c.entries)
	for n > 0 && (c.entries[n-1].Epoch >= epoch || c.entries[n-1].StartOffset >= start) {
		n--
	}
	c.entries = append(c.entries[:n], Entry{Epoch: epoch, StartOffset: start})
	return true
}

// TruncateFromEnd removes every entry whose start offset is at or above end:
// the epochs that began in a suffix the log no longer has. It reports whether
// the cache changed.
func (c *Cache) TruncateFromEnd(end record.Offset) bool {
	n := len(c.entries)
	for n > 0 && c.entries[n-1].StartOffset >= end {
		n--
	}
	changed := n != len(c.entries)
	c.entries = c.entries[:n]
	return changed
}

// TruncateFromStart forgets epochs that ended before the new log start
// offset. The epoch in force at start keeps its entry, moved up to start, so
// that lookups still know which epoch the first retained offset belongs to.
func (c *Cache) TruncateFromStart(start record.Offset) bool {
	drop := 0
	for drop < len(c.entries) && c.entries[drop].StartOffset <= start {
		drop++
	}
	if drop == 0 {
		return false
	}
	kept := c.entries[drop-1]
	if drop == 1 && kept.StartOffset == start {
		return false
	}
	kept.StartOffset = start
	c.entries = append([]Entry{kept}, c.entries[drop:]...)
	return true
}

// EndOffsetFor answers OffsetsForLeaderEpoch for requested on a log whose
// log end offset is logEnd. The end offset of an epoch is the start offset of
// the next higher epoch in the cache, or logEnd for the latest epoch. It
// returns the largest cached epoch at or below requested with that end
// offset, and (NoLeaderEpoch, -1) when the answer is unknown: the requested
// epoch is undefined or newer than anything cached. When requested predates
// the cache, it returns (requested, start of the first cached epoch)
// (KAFKA-7415). See reference/kafka-replication.md section 1.3.
func (c *Cache) EndOffsetFor(requested record.LeaderEpoch, logEnd record.Offset) (record.LeaderEpoch, record.Offset) {
	if requested == record.NoLeaderEpoch || len(c.entries) == 0 {
		return record.NoLeaderEpoch, -1
	}
	latest := c.entries[len(c.entries)-1]
	if requested == latest.Epoch {
		return requested, logEnd
	}
	if requested > latest.Epoch {
		return record.NoLeaderEpoch, -1
	}
	// First entry with an epoch above requested; it exists because
	// requested < latest.Epoch.
	higher := 0
	for c.entries[higher].Epoch <= requested {
		higher++
	}
	if higher == 0 {
		return requested, c.entries[0].StartOffset
	}
	return c.entries[higher-1].Epoch, c.entries[higher].StartOffset
}

// EpochAt returns the epoch in force at offset: that of the last entry whose
// start offset is at or below offset, or NoLeaderEpoch.
func (c *Cache) EpochAt(offset record.Offset) record.LeaderEpoch {
	epoch := record.NoLeaderEpoch
	for _, entry := range c.entries {
		if entry.StartOffset > offset {
			break
		}
		epoch = entry.Epoch
	}
	return epoch
}

// Validate returns an error when the entries are not strictly
// increasing in epoch and start offset.
func (c *Cache) Validate() error {
	for i := 0; i < len(c.entries); i++ {
		if c.entries[i].Epoch < 0 || c.entries[i].StartOffset < 0 {
			return fmt.Errorf("epoch cache entry %d is negative: %v", i, c.entries[i])
		}
	}
	for i := 1; i < len(c.entries); i++ {
		previous, entry := c.entries[i-1], c.entries[i]
		if entry.Epoch <= previous.Epoch || entry.StartOffset <= previous.StartOffset {
			return fmt.Errorf("epoch cache not increasing at entry %d: %v after %v", i, entry, previous)
		}
	}
	return nil
}

// ErrMalformedCheckpoint is wrapped by UnmarshalCheckpoint's errors.
var ErrMalformedCheckpoint = errors.New("malformed leader-epoch checkpoint")

// FromEntries returns a cache holding entries, which must strictly increase
// in epoch and start offset.
func FromEntries(entries []Entry) (Cache, error) {
	cache := Cache{entries: append([]Entry(nil), entries...)}
	if err := cache.Validate(); err != nil {
		return Cache{}, err
	}
	return cache, nil
}

// Clone returns an independent copy: copies of a Cache value share storage,
// so a copy that will change must be a clone.
func (c *Cache) Clone() Cache { return Cache{entries: c.Entries()} }

// Len returns the number of entries.
func (c *Cache) Len() int { return len(c.entries) }

// The checkpoint format follows Kafka's leader-epoch-checkpoint: a version
// line, a count line, then one "epoch startOffset" line per entry.
const epochCheckpointVersion = 0

func (c *Cache) MarshalCheckpoint() []byte {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "%d\n%d\n", epochCheckpointVersion, len(c.entries))
	for _, entry := range c.entries {
		fmt.Fprintf(&buf, "%d %d\n", entry.Epoch, entry.StartOffset)
	}
	return buf.Bytes()
}

func UnmarshalCheckpoint(data []byte) (Cache, error) {
	scanner := bufio.NewScanner(bytes.NewReader(data))
	var lines []string
	for scanner.Scan() {
		lines = append(lines, strings.TrimSpace(scanner.Text()))
	}
	if len(lines) < 2 || lines[0] != strconv.Itoa(epochCheckpointVersion) {
		return Cache{}, fmt.Errorf("%w: header", ErrMalformedCheckpoint)
	}
	count, err := strconv.Atoi(lines[1])
	if err != nil || count < 0 || count != len(lines)-2 {
		return Cache{}, fmt.Errorf("%w: entry count %q", ErrMalformedCheckpoint, lines[1])
	}
	var cache Cache
	for _, line := range lines[2:] {
		var epoch int32
		var start int64
		if _, err := fmt.Sscanf(line, "%d %d", &epoch, &start); err != nil || epoch < 0 || start < 0 {
			return Cache{}, fmt.Errorf("%w: entry %q", ErrMalformedCheckpoint, line)
		}
		cache.entries = append(cache.entries, Entry{Epoch: record.LeaderEpoch(epoch), StartOffset: record.Offset(start)})
	}
	if err := cache.Validate(); err != nil {
		return Cache{}, fmt.Errorf("%w: %v", ErrMalformedCheckpoint, err)
	}
	return cache, nil
}
