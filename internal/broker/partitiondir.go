package broker

import (
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/tidelog/tide/internal/disk"
	"github.com/tidelog/tide/internal/metadata"
)

// A partition directory is named <topic>-<partition> under the node's Dir
// and holds, besides the log, partition.metadata: the id of the topic it
// belongs to (KIP-516), in Kafka's format, so that a directory left behind
// by a deleted topic is never served as a later topic of the same name
// (issue 13: a deleted record came back after `topic create`, `delete`,
// `create`). A deleted topic's directories are renamed aside, to Kafka's
// <topic>-<partition>.<32 hex digits>-delete, and removed in Tick, a
// bounded number of files at a time; leftovers are removed after a restart.

const (
	// partitionMetadataName is Kafka's PartitionMetadataFile.
	partitionMetadataName = "partition.metadata"
	// maxPartitionMetadataBytes bounds what is read of one: Kafka's is 43.
	maxPartitionMetadataBytes = 256
	// deleteSuffix ends the name of a directory set aside for removal.
	deleteSuffix = "-delete"
	// maxDirectoryNameBytes is the longest file name the disks take; a
	// long topic name is cut in a -delete name to fit, as Kafka does.
	maxDirectoryNameBytes = 255
	// defaultDeletedFilesPerTick is Config.DeletedFilesPerTick's default.
	defaultDeletedFilesPerTick = 64
)

// ErrPartitionMetadata means a partition.metadata file could not be read:
// the partition goes offline rather than be served under a guessed id.
var ErrPartitionMetadata = errors.New("broker: unreadable partition.metadata")

// encodePartitionMetadata is Kafka's format: two lines, no newline after
// the second.
func encodePartitionMetadata(id metadata.TopicID) []byte {
	return []byte("version: 0\ntopic_id: " + id.String())
}

// decodePartitionMetadata reads Kafka's format as its reader does: each
// line splits at a colon and whitespace into two parts, any version from 0
// is accepted (a newer writer may add nothing tide needs), and the zero id
// is refused.
func decodePartitionMetadata(data []byte) (metadata.TopicID, error) {
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) != 2 {
		return metadata.NoTopicID, fmt.Errorf("%w: %d lines", ErrPartitionMetadata, len(lines))
	}
	values := make([]string, 2)
	for i, key := range []string{"version", "topic_id"} {
		name, value, ok := strings.Cut(lines[i], ":")
		value = strings.TrimSpace(value)
		if !ok || name != key || value == "" {
			return metadata.NoTopicID, fmt.Errorf("%w: line %q", ErrPartitionMetadata, lines[i])
		}
		values[i] = value
	}
	if version, err := strconv.Atoi(values[0]); err != nil || version < 0 {
		return metadata.NoTopicID, fmt.Errorf("%w: version %q", ErrPartitionMetadata, values[0])
	}
	id, err := metadata.ParseTopicID(values[1])
	if err != nil || id.IsZero() {
		return metadata.NoTopicID, fmt.Errorf("%w: topic id %q", ErrPartitionMetadata, values[1])
	}
	return id, nil
}

// partitionDirectory is where a partition's log lives.
func (n *Node) partitionDirectory(tp metadata.TopicPartition) string {
	return path.Join(n.config.Dir, tp.String())
}

// readDirectoryTopicID returns the topic id a partition directory holds:
// found false when it has no partition.metadata (it does not exist, or a
// build before topic ids wrote it).
func (n *Node) readDirectoryTopicID(dir string) (id metadata.TopicID, found bool, err error) {
	file, err := n.config.FS.Open(path.Join(dir, partitionMetadataName))
	if errors.Is(err, disk.ErrNotExist) {
		return metadata.NoTopicID, false, nil
	}
	if err != nil {
		return metadata.NoTopicID, false, err
	}
	defer file.Close()
	size, err := file.Size()
	if err != nil {
		return metadata.NoTopicID, false, err
	}
	if size > maxPartitionMetadataBytes {
		return metadata.NoTopicID, false, fmt.Errorf("%w: %d bytes", ErrPartitionMetadata, size)
	}
	data := make([]byte, size)
	if _, err := file.ReadAt(data, 0); err != nil {
		return metadata.NoTopicID, false, err
	}
	id, err = decodePartitionMetadata(data)
	return id, err == nil, err
}

// writeDirectoryTopicID records the topic id in a partition directory,
// atomically and durably (tmp, sync, rename, directory sync), before the
// log may take its first append: a directory with records always says
// whose they are.
func (n *Node) writeDirectoryTopicID(dir string, id metadata.TopicID) error {
	if err := n.config.FS.MkdirAll(dir); err != nil {
		return err
	}
	return disk.WriteFileAtomically(n.config.FS, dir, partitionMetadataName, encodePartitionMetadata(id))
}

// directoryExists reports whether dir is there.
func (n *Node) directoryExists(dir string) (bool, error) {
	_, err := n.config.FS.List(dir)
	if errors.Is(err, disk.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// deletionName is the name a partition directory is renamed to for
// removal: Kafka's <topic>-<partition>.<32 hex>-delete, where the hex,
// random in Kafka, is this incarnation's broker epoch and a counter, so it
// is unique without randomness: no two renames of one incarnation share a
// counter, and no two incarnations an epoch. The topic is cut to keep the
// name within maxDirectoryNameBytes.
func (n *Node) deletionName(tp metadata.TopicPartition) string {
	n.deletionsNamed++
	suffix := fmt.Sprintf("-%d.%016x%016x%s", tp.Partition, uint64(n.epoch), n.deletionsNamed, deleteSuffix)
	topic := tp.Topic
	if len(topic)+len(suffix) > maxDirectoryNameBytes {
		topic = topic[:maxDirectoryNameBytes-len(suffix)]
	}
	return topic + suffix
}

// moveAside renames a partition directory out of the way and queues it for
// removal (rule delete-by-rename): once renamed, no later open of the
// partition can find the old records, whatever a crash leaves of the
// removal. The directory must not be open.
func (n *Node) moveAside(tp metadata.TopicPartition) error {
	target := path.Join(n.config.Dir, n.deletionName(tp))
	if err := n.config.FS.Rename(n.partitionDirectory(tp), target); err != nil {
		return fmt.Errorf("broker %d: set %s aside for deletion: %w", n.config.ID, tp, err)
	}
	if err := n.config.FS.SyncDir(n.config.Dir); err != nil {
		return err
	}
	n.deletions = append(n.deletions, target)
	return nil
}

// removeDeletions carries on removing the directories set aside, at most
// DeletedFilesPerTick files per call, so that deleting a large topic never
// holds up the node's loop. The first call also queues what an earlier
// incarnation set aside and did not finish removing. A directory that
// cannot be removed is left for the next start.
func (n *Node) removeDeletions() {
	if !n.deletionsScanned {
		n.deletionsScanned = true
		n.queueLeftoverDeletions()
	}
	budget := n.config.DeletedFilesPerTick
	if budget <= 0 {
		budget = defaultDeletedFilesPerTick
	}
	for budget > 0 && len(n.deletions) > 0 {
		removed, done := n.removeSome(n.deletions[0], budget)
		budget -= removed
		if done {
			n.deletions = n.deletions[1:]
		}
	}
}

// removeSome removes up to budget files of dir, and dir once empty; done
// when dir is gone or cannot be removed now.
func (n *Node) removeSome(dir string, budget int) (removed int, done bool) {
	names, err := n.config.FS.List(dir)
	if err != nil {
		return 0, true
	}
	for _, name := range names {
		if removed == budget {
			return removed, false
		}
		if err := n.config.FS.Remove(path.Join(dir, name)); err != nil && !errors.Is(err, disk.ErrNotExist) {
			return removed, true
		}
		removed++
	}
	if err := n.config.FS.Remove(dir); err == nil {
		n.config.FS.SyncDir(n.config.Dir)
	}
	return removed, true
}

// queueLeftoverDeletions queues the -delete directories found in Dir.
func (n *Node) queueLeftoverDeletions() {
	names, err := n.config.FS.List(n.config.Dir)
	if err != nil {
		return // no data directory yet: nothing left over
	}
	for _, name := range names {
		if strings.HasSuffix(name, deleteSuffix) {
			n.deletions = append(n.deletions, path.Join(n.config.Dir, name))
		}
	}
}

// PendingDeletions lists the directories set aside and not yet removed.
func (n *Node) PendingDeletions() []string { return append([]string(nil), n.deletions...) }

// parsePartitionDirectory reads a directory name as <topic>-<partition>.
func parsePartitionDirectory(name string) (metadata.TopicPartition, bool) {
	dash := strings.LastIndexByte(name, '-')
	if dash < 1 {
		return metadata.TopicPartition{}, false
	}
	partition, err := strconv.ParseInt(name[dash+1:], 10, 32)
	if err != nil || partition < 0 || strconv.FormatInt(partition, 10) != name[dash+1:] {
		return metadata.TopicPartition{}, false
	}
	return metadata.TopicPartition{Topic: name[:dash], Partition: int32(partition)}, true
}

// prepareDirectory decides whether a partition's directory may be opened
// as topic id's (rule directory-topic-id): a directory that holds another
// topic's id is never opened. It is set aside for deletion when its id is
// known to be deleted (this node applied the deletion, or it has caught up
// with the metadata log, so any other id than the image's is a deleted
// topic's); until then the partition is not served here (stale), since the
// directory may belong to a later topic of the name that this node, still
// replaying the log, has not reached. A directory without an id (written
// before topic ids) is the topic's; it is adopted and gets the id. A
// directory with no id of its own gets the topic's before its log opens.
// ok false: not served now (stale, or failed with the cause).
func (n *Node) prepareDirectory(tp metadata.TopicPartition, id metadata.TopicID) (ok bool) {
	dir := n.partitionDirectory(tp)
	dirID, found, err := n.readDirectoryTopicID(dir)
	switch {
	case err != nil:
		n.failed[tp] = fmt.Errorf("broker %d: %s: %w", n.config.ID, tp, err)
		return false
	case found && dirID == id:
		return true
	case found && !n.caughtUp && !n.deletedTopicIDs[dirID]:
		n.stale[tp] = dirID
		return false
	case found:
		if err := n.moveAside(tp); err != nil {
			n.failed[tp] = err
			return false
		}
	case id.IsZero():
		return true // a topic still without its id: the directory waits for it
	}
	if id.IsZero() {
		return true
	}
	if err := n.writeDirectoryTopicID(dir, id); err != nil {
		n.failed[tp] = fmt.Errorf("broker %d: write %s of %s: %w", n.config.ID, partitionMetadataName, tp, err)
		return false
	}
	return true
}

// dropTopic stops serving a deleted topic (as the image had it before the
// deletion) and sets its partition directories aside for removal (rule
// delete-by-rename). A directory holding the topic's id is its; one
// without an id (written before topic ids) is its when this node served
// it for the topic or has caught up with the metadata log; one with
// another id is a later topic's and stays. A rename that fails leaves the
// directory under its name, where its id keeps it from being served to a
// later topic.
func (n *Node) dropTopic(topic metadata.Topic) {
	if !topic.ID.IsZero() {
		n.deletedTopicIDs[topic.ID] = true
	}
	for _, state := range topic.Partitions {
		tp := state.TopicPartition
		p, open := n.partitions[tp]
		if open {
			p.log.Close()
			delete(n.partitions, tp)
			n.sorted = nil
		}
		_, failed := n.failed[tp]
		delete(n.failed, tp)
		delete(n.stale, tp)
		dir := n.partitionDirectory(tp)
		if exists, err := n.directoryExists(dir); err != nil || !exists {
			continue
		}
		dirID, found, err := n.readDirectoryTopicID(dir)
		served := open || failed
		switch {
		case err != nil && !served, found && dirID != topic.ID, !found && err == nil && !served && !n.caughtUp:
			continue
		}
		n.moveAside(tp)
	}
}

// adoptTopicID writes a topic's newly assigned id (AssignTopicID, the
// upgrade) into the directories of its hosted partitions.
func (n *Node) adoptTopicID(name string, id metadata.TopicID) {
	for _, tp := range n.Partitions() {
		if tp.Topic == name {
			if err := n.writeDirectoryTopicID(n.partitionDirectory(tp), id); err != nil {
				n.fail(tp, fmt.Errorf("broker %d: write %s of %s: %w", n.config.ID, partitionMetadataName, tp, err))
			}
		}
	}
}

// CaughtUp reports whether MarkCaughtUp was called: the node's image is
// the cluster's, not a stale or empty one of a broker still starting.
func (n *Node) CaughtUp() bool { return n.caughtUp }

// MarkCaughtUp tells the node it has applied the whole metadata log as the
// controller had it (the Lifecycle calls it after an answer that carried
// less than it could). The first time, the image is the cluster's: the
// partitions held back as stale are tried again, and so set aside, and
// the partition directories of topics the image no longer has, or that
// hold another id than the image's topic, are set aside (stray
// directories: a topic deleted, or deleted and created again, while this
// broker was down or before topic ids).
func (n *Node) MarkCaughtUp() error {
	if n.caughtUp {
		return nil
	}
	n.caughtUp = true
	stale := make([]metadata.TopicPartition, 0, len(n.stale))
	for tp := range n.stale {
		stale = append(stale, tp)
	}
	sortPartitions(stale)
	for _, tp := range stale {
		delete(n.stale, tp)
		if err := n.applyPartitionState(tp); err != nil {
			return err
		}
	}
	n.sweepStrayDirectories()
	return nil
}

// sweepStrayDirectories sets aside the partition directories no topic of
// the image may use; see MarkCaughtUp. Directories of hosted or failed
// partitions, and names that are not partition directories, are left.
func (n *Node) sweepStrayDirectories() {
	names, err := n.config.FS.List(n.config.Dir)
	if err != nil {
		return
	}
	for _, name := range names {
		tp, ok := parsePartitionDirectory(name)
		if !ok || strings.HasSuffix(name, deleteSuffix) {
			continue
		}
		_, hosted := n.partitions[tp]
		_, failed := n.failed[tp]
		if hosted || failed {
			continue
		}
		topic, exists := n.image.Topic(tp.Topic)
		if exists && int(tp.Partition) < len(topic.Partitions) {
			dirID, found, err := n.readDirectoryTopicID(n.partitionDirectory(tp))
			// A directory of the topic's partition is kept while this
			// broker is a replica of it; a reassignment that moved the
			// partition away while it was down left it stray.
			mine := topic.Partitions[tp.Partition].IsReplica(n.config.ID)
			if err != nil || (mine && (!found || dirID == topic.ID)) {
				continue
			}
		}
		n.moveAside(tp)
	}
}
