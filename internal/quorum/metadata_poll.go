package quorum

import (
	"github.com/twmb/franz-go/pkg/kerr"
)

// Metadata by long poll. A KRaft broker learns committed metadata by
// fetching the metadata log from the quorum leader, and the leader holds
// a fetch that has nothing new until a record commits or the fetch's wait
// is up. tide's brokers do the same with FetchMetadataRequest: the broker
// sends the next one as soon as an answer arrives, so a record reaches
// every broker one round trip after it is applied here, not at the
// broker's next heartbeat (the failure this prevents: a topic created
// through one broker is UNKNOWN_TOPIC_OR_PARTITION on the others for up to
// a heartbeat interval, and `tide topic create X && tide produce X` fails).
//
// Rules:
//   - poll-waits-for-newer: a fetch is answered at once when the committed
//     image is past its applied offset, else held until it is, or until
//     min(its MaxWaitTicks, Config.MaxMetadataWaitTicks) have passed
//     (an empty answer, so the broker learns the controller still leads).
//   - one-poll-per-broker: a broker has at most one fetch held; a newer one
//     answers the older at once. Only a registered incarnation's fetches
//     are held (others get STALE_BROKER_EPOCH), so the held fetches are
//     bounded by the brokers in the image: no resource grows with requests.
//   - held-polls-fail-over: a node that stops being the active controller
//     answers its held fetches NOT_CONTROLLER, as its waiting answers, so
//     the brokers poll the new one at once.

// heldPoll is a metadata fetch held until expires (a tick).
type heldPoll struct {
	request Request
	expires int64
}

// holdPoll takes a metadata fetch on the active controller.
func (q *Quorum) holdPoll(request Request) {
	fetch := request.FetchMetadata
	if state, ok := q.image.Broker(request.From); !ok || state.Epoch != fetch.Epoch {
		q.out = append(q.out, Answer{ID: request.ID, To: request.From, ControllerEpoch: q.activeTerm, Leader: q.config.ID,
			ErrorCode: kerr.StaleBrokerEpoch.Code})
		return
	}
	wait := min(fetch.MaxWaitTicks, q.config.MaxMetadataWaitTicks)
	kept := q.polls[:0]
	for _, held := range q.polls {
		if held.request.From == request.From {
			q.answerPoll(held.request) // one-poll-per-broker
			continue
		}
		kept = append(kept, held)
	}
	q.polls = append(kept, heldPoll{request: request, expires: q.now + max(wait, 0)})
	q.releasePolls()
}

// releasePolls answers the held fetches that have newer committed metadata
// or whose wait is up, in the order they came.
func (q *Quorum) releasePolls() {
	if !q.active {
		return
	}
	kept := q.polls[:0]
	for _, held := range q.polls {
		if held.request.FetchMetadata.AppliedOffset < q.image.Offset() || q.now >= held.expires {
			q.answerPoll(held.request)
			continue
		}
		kept = append(kept, held)
	}
	clear(q.polls[len(kept):])
	q.polls = kept
}

// answerPoll answers a fetch with the committed metadata after its offset.
func (q *Quorum) answerPoll(request Request) {
	fetch := request.FetchMetadata
	answer := Answer{ID: request.ID, To: request.From, ControllerEpoch: q.activeTerm, Leader: q.config.ID, Heartbeat: &HeartbeatAnswer{}}
	q.fillHeartbeat(request.From, &HeartbeatRequest{Epoch: fetch.Epoch, AppliedOffset: fetch.AppliedOffset, MaxEntries: fetch.MaxEntries},
		answer.Heartbeat)
	q.out = append(q.out, answer)
}

// HeldPolls is how many metadata fetches the node holds, for tests and
// status.
func (q *Quorum) HeldPolls() int { return len(q.polls) }
