package controller

import (
	"math"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/metadata"
)

// ProducerIDBlockSize is how many producer ids one AllocateProducerIds hands
// a broker (Kafka's ProducerIdsBlock.PRODUCER_ID_BLOCK_SIZE): large enough
// that a broker asks rarely, small enough that the ids a crashed broker
// never gave out are no loss.
const ProducerIDBlockSize = 1000

// ProducerIDBlock is a range of producer ids, [FirstProducerID,
// FirstProducerID+Length), that one broker may give out.
type ProducerIDBlock struct {
	FirstProducerID int64
	Length          int64
}

// AllocateProducerIDs decides Kafka's AllocateProducerIds (KIP-730): the
// block a broker gives idempotent producers their ids from, and the
// ProducerIDs record that must be committed to the metadata log before the
// broker is told of it. The block starts at the image's next producer id,
// which only the committed records move, so no id is handed out twice, not
// even by a controller that restarted or failed over: that is what keeps
// two producers from sharing an id and deduplicating each other's batches.
//
// A broker that is not registered with that epoch gets STALE_BROKER_EPOCH
// (an older incarnation's request must not take ids); when the ids of an
// int64 run out, UNKNOWN_SERVER_ERROR, as Kafka answers.
func AllocateProducerIDs(img *metadata.Image, id metadata.BrokerID, epoch metadata.BrokerEpoch) ([]metadata.Record, ProducerIDBlock, int16, error) {
	broker, ok := img.Broker(id)
	if !ok || broker.Epoch != epoch {
		return nil, ProducerIDBlock{}, kerr.StaleBrokerEpoch.Code, nil
	}
	first := img.NextProducerID()
	if first > math.MaxInt64-ProducerIDBlockSize {
		return nil, ProducerIDBlock{}, kerr.UnknownServerError.Code, nil
	}
	d := newDecision(img)
	if err := d.append(metadata.ProducerIDs{BrokerID: id, BrokerEpoch: epoch, NextProducerID: first + ProducerIDBlockSize}); err != nil {
		return nil, ProducerIDBlock{}, 0, err
	}
	return d.records, ProducerIDBlock{FirstProducerID: first, Length: ProducerIDBlockSize}, 0, nil
}
