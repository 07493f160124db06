package metadata

import (
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
)

// TopicID is a topic's 128-bit id (KIP-516), drawn by the controller when
// the topic is created and kept in the metadata log and in every partition
// directory (partition.metadata). A topic deleted and created again under
// the same name gets a new id: that is how a broker tells the old
// incarnation's directories, fetch sessions and clients from the new one,
// and why a re-created topic no longer serves the deleted topic's records.
//
// The zero TopicID means "no id": a topic created by a build before topic
// ids, until the controller's AssignTopicID record gives it one, and on the
// wire a request that names its topic by name.
type TopicID [16]byte

// NoTopicID is the zero id, Kafka's Uuid.ZERO_UUID.
var NoTopicID TopicID

// MetadataTopicID is the id Kafka reserves for its metadata topic
// (Uuid.METADATA_TOPIC_ID, also Uuid.ONE_UUID); no topic gets it.
var MetadataTopicID = TopicID{15: 1}

// maxTopicIDDraws bounds the draws for one id: a draw is refused only when
// it is reserved, prints with a leading "-", or collides with a topic in
// the image, each with a probability far below 2^-5 for a good source, so
// running out of draws means the source is broken.
const maxTopicIDDraws = 32

// ErrTopicIDSource means the random source failed or kept giving ids that
// may not be used.
var ErrTopicIDSource = errors.New("metadata: no usable topic id from the random source")

// String is Kafka's text form (Uuid.toString): URL-safe base64 without
// padding, 22 characters.
func (id TopicID) String() string { return base64.RawURLEncoding.EncodeToString(id[:]) }

// Hex is the id as 32 lowercase hex digits, the form Kafka puts in the
// names of partition directories set aside for deletion.
func (id TopicID) Hex() string { return hex.EncodeToString(id[:]) }

// IsZero reports whether id is NoTopicID.
func (id TopicID) IsZero() bool { return id == NoTopicID }

// Usable reports whether a topic may have id (rule usable-topic-id, after
// Kafka's Uuid.randomUuid): not the zero id, which means "none" on the
// wire, not the reserved metadata topic id, and not one whose text starts
// with "-", which a command line would take for a flag.
func (id TopicID) Usable() bool {
	return id != NoTopicID && id != MetadataTopicID && id.String()[0] != '-'
}

// ParseTopicID reads Kafka's text form of an id.
func ParseTopicID(text string) (TopicID, error) {
	var id TopicID
	decoded, err := base64.RawURLEncoding.DecodeString(text)
	if err != nil || len(decoded) != len(id) {
		return NoTopicID, fmt.Errorf("metadata: %q is not a topic id", text)
	}
	copy(id[:], decoded)
	return id, nil
}

// NewTopicID draws a usable id that no topic of img has, from random: the
// controller's injected source (crypto/rand in tide serve, the seeded
// source in the simulator, so a run stays a function of its seed).
func NewTopicID(img *Image, random io.Reader) (TopicID, error) {
	for range maxTopicIDDraws {
		var id TopicID
		if _, err := io.ReadFull(random, id[:]); err != nil {
			return NoTopicID, fmt.Errorf("%w: %v", ErrTopicIDSource, err)
		}
		if _, taken := img.TopicByID(id); id.Usable() && !taken {
			return id, nil
		}
	}
	return NoTopicID, ErrTopicIDSource
}

// AssignTopicID gives a topic created without an id (by a build before
// topic ids) its id, once: the upgrade path, as Kafka's controller gives
// ids to the topics it migrates. The controller writes one per such topic
// when it becomes active; an id never changes afterwards, so a record for
// a topic that has one is refused.
type AssignTopicID struct {
	Name string
	ID   TopicID
}

func (AssignTopicID) isRecord() {}

func (r AssignTopicID) String() string {
	return fmt.Sprintf("assign-topic-id name=%s id=%s", r.Name, r.ID)
}

// TopicByID returns the name of the topic with id; the zero id names none.
// Fetch v13+ asks for every topic of every fetch, so it is a map lookup.
func (img *Image) TopicByID(id TopicID) (string, bool) {
	if id.IsZero() {
		return "", false
	}
	name, ok := img.topicIDIndex()[id]
	return name, ok
}

// topicIDIndex returns the index of topics by id, building it if a record
// applied since the last build dropped it.
func (img *Image) topicIDIndex() map[TopicID]string {
	if img.topicsByID == nil {
		img.topicsByID = make(map[TopicID]string, len(img.topics))
		for name, topic := range img.topics {
			if !topic.id.IsZero() {
				img.topicsByID[topic.id] = name
			}
		}
	}
	return img.topicsByID
}

// TopicID returns a topic's id, NoTopicID for a topic that has none yet.
func (img *Image) TopicID(name string) (TopicID, bool) {
	topic, ok := img.topics[name]
	if !ok {
		return NoTopicID, false
	}
	return topic.id, true
}

// TopicsWithoutID returns the names of the topics that have no id yet,
// sorted: the ones the controller's upgrade step assigns ids to.
func (img *Image) TopicsWithoutID() []string {
	var names []string
	for name, topic := range img.topics {
		if topic.id.IsZero() {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// checkNewTopicID checks the id a CreateTopic or AssignTopicID brings for
// topic name: usable and no other topic's. The zero id is allowed only
// from CreateTopic records written before topic ids (allowZero).
func (img *Image) checkNewTopicID(name string, id TopicID, allowZero bool) error {
	if id.IsZero() && allowZero {
		return nil
	}
	if !id.Usable() {
		return fmt.Errorf("%w: topic %q with id %s", ErrInvariant, name, id)
	}
	if other, taken := img.TopicByID(id); taken && other != name {
		return fmt.Errorf("%w: topic %q with the id %s of %q", ErrInvariant, name, id, other)
	}
	return nil
}

func (img *Image) applyAssignTopicID(r AssignTopicID) (bool, error) {
	topic, ok := img.topics[r.Name]
	if !ok {
		return false, fmt.Errorf("%w: %q", ErrUnknownTopic, r.Name)
	}
	if !topic.id.IsZero() {
		return false, fmt.Errorf("%w: topic %q already has id %s", ErrInvariant, r.Name, topic.id)
	}
	if err := img.checkNewTopicID(r.Name, r.ID, false); err != nil {
		return false, err
	}
	topic.id = r.ID
	return true, nil
}
