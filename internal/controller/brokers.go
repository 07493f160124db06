package controller

import (
	"fmt"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
)

// RegisterBroker decides a broker's (re)registration (KRaft's
// ClusterControlManager.registerBroker) and returns the records, the broker
// epoch to answer with, and a code.
//
//   - The same incarnation registering again (a retry after a lost
//     response) gets its existing epoch back and no records, so retries are
//     harmless. (Kafka writes a new registration record; tide does not need
//     one, as nothing but the epoch would change.)
//   - A different incarnation is refused with DUPLICATE_BROKER_REGISTRATION
//     while the old one is unfenced: two live processes with one node id
//     would otherwise take turns at its leaderships. The old incarnation
//     must be fenced first (its session expires, or its controlled shutdown
//     completes).
//   - Otherwise the broker gets epoch = offset, the metadata log offset at
//     which the RegisterBroker record will land (the first record returned),
//     as in KRaft: epochs then grow cluster-wide, and requests from an older
//     incarnation carry a smaller epoch and are rejected (KIP-380, KIP-903).
//     It starts fenced.
//
// endpoint is where clients reach the broker's Kafka listener, carried in
// the record (Kafka's BrokerRegistration listeners), or empty.
//
// previousBrokerEpoch is the epoch of the incarnation whose log the broker
// vouches for, having shut down cleanly (KIP-966's PreviousBrokerEpoch), or
// NoBrokerEpoch. It may name any registration from the last one that served
// (was unfenced) to the current one: registrations after the last that
// served never served, so the log is still that one's (and a broker that
// crashed before it heard its newest epoch can only name an older one).
// Otherwise the restart counts as unclean: the log may have lost records that were committed, so the broker
// leaves every ISR and ELR it was still in and can no longer be elected
// through them (Kafka's handleBrokerUncleanShutdown).
func RegisterBroker(img *metadata.Image, id metadata.BrokerID, incarnation, endpoint string,
	previousBrokerEpoch metadata.BrokerEpoch, offset int64) ([]metadata.Record, metadata.BrokerEpoch, int16, error) {
	if offset <= img.Offset() {
		return nil, metadata.NoBrokerEpoch, 0,
			fmt.Errorf("controller: registration at offset %d, but the image is at %d", offset, img.Offset())
	}
	if id < 0 || incarnation == "" {
		return nil, metadata.NoBrokerEpoch, kerr.InvalidRequest.Code, nil
	}
	existing, registered := img.Broker(id)
	if registered {
		if current, _ := img.Incarnation(id); current == incarnation {
			return nil, existing.Epoch, 0, nil
		}
		if !existing.Fenced {
			return nil, metadata.NoBrokerEpoch, kerr.DuplicateBrokerRegistration.Code, nil
		}
	}
	epoch := metadata.BrokerEpoch(offset)
	d := newDecision(img)
	if err := d.append(metadata.RegisterBroker{ID: id, Epoch: epoch, Incarnation: incarnation, Endpoint: endpoint}); err != nil {
		return nil, metadata.NoBrokerEpoch, 0, err
	}
	if !registered || previousBrokerEpoch > existing.Epoch || previousBrokerEpoch < existing.ServedEpoch || previousBrokerEpoch < 0 {
		if err := d.moveAway(nil, []metadata.BrokerID{id}); err != nil {
			return nil, metadata.NoBrokerEpoch, 0, err
		}
	}
	return d.records, epoch, 0, nil
}

// Heartbeat decides what a broker's heartbeat changes (Kafka's
// BrokerHeartbeatManager.calculateNextBrokerState). The caller keeps the
// last heartbeat tick per broker for FenceExpired.
//
//   - A wrong epoch, or an unregistered broker, gets STALE_BROKER_EPOCH: the
//     heartbeat is from another incarnation, which must register again.
//   - A fenced broker that has caught up with the metadata log (caughtUp,
//     computed by the caller from the offset the broker reports) is
//     unfenced, and the leaderless partitions it replicates hold elections.
//     A fenced broker asking to shut down needs nothing: it leads nothing.
//   - A broker asking to shut down begins a controlled shutdown
//     (ControlledShutdown). Once in controlled shutdown, its next heartbeat
//     asking to shut down completes it: the broker is fenced, which lets a
//     restarted incarnation register at once. (Kafka also waits until the
//     other brokers have caught up with the metadata that moved its
//     leaderships; tide leaves that wait to the broker runtime.) A broker
//     that has shut down is never unfenced again: that incarnation is over,
//     and the restarted process registers as a new one.
func Heartbeat(img *metadata.Image, id metadata.BrokerID, epoch metadata.BrokerEpoch,
	wantShutdown bool, caughtUp bool) ([]metadata.Record, int16, error) {
	broker, ok := img.Broker(id)
	if !ok || broker.Epoch != epoch {
		return nil, kerr.StaleBrokerEpoch.Code, nil
	}
	switch {
	case broker.Fenced:
		if wantShutdown || !caughtUp || broker.ShuttingDown {
			return nil, 0, nil
		}
		d := newDecision(img)
		if err := d.append(metadata.UnfenceBroker{ID: id, Epoch: epoch}); err != nil {
			return nil, 0, err
		}
		if err := d.electLeaderless(id); err != nil {
			return nil, 0, err
		}
		return d.records, 0, nil
	case broker.ShuttingDown:
		if !wantShutdown {
			return nil, 0, nil
		}
		records, err := fence(img, []metadata.BrokerState{broker})
		return records, 0, err
	case wantShutdown:
		return ControlledShutdown(img, id, epoch)
	}
	return nil, 0, nil
}

// FenceExpired fences every unfenced broker whose session expired: its last
// heartbeat is more than sessionTimeoutTicks before nowTick, or it has none
// in lastHeartbeatTick (a controller taking over must seed the map with its
// first tick for every registered broker, as Kafka's does on activation).
// A broker that stopped heartbeating may be dead or partitioned away; while
// it stays leader, its partitions are unavailable, and while it stays in
// ISRs, the high watermark waits for it. So its leaderships move to other
// ISR (or ELR) members and it leaves every ISR, all before the FenceBroker
// records, which come in broker ID order.
func FenceExpired(img *metadata.Image, lastHeartbeatTick map[metadata.BrokerID]int64, nowTick int64,
	sessionTimeoutTicks int64) ([]metadata.Record, error) {
	if sessionTimeoutTicks <= 0 {
		return nil, fmt.Errorf("controller: session timeout of %d ticks", sessionTimeoutTicks)
	}
	var expired []metadata.BrokerState
	for _, broker := range img.Brokers() {
		last, seen := lastHeartbeatTick[broker.ID]
		if !broker.Fenced && (!seen || nowTick-last > sessionTimeoutTicks) {
			expired = append(expired, broker)
		}
	}
	if len(expired) == 0 {
		return nil, nil
	}
	return fence(img, expired)
}

// fence moves every leadership and ISR membership away from the brokers
// (all at once, so that a partition led by one of them is not handed to
// another about to be fenced), then fences them.
func fence(img *metadata.Image, brokers []metadata.BrokerState) ([]metadata.Record, error) {
	d := newDecision(img)
	ids := make([]metadata.BrokerID, len(brokers))
	for i, broker := range brokers {
		ids[i] = broker.ID
	}
	if err := d.moveAway(ids, nil); err != nil {
		return nil, err
	}
	for _, broker := range brokers {
		if err := d.append(metadata.FenceBroker{ID: broker.ID, Epoch: broker.Epoch}); err != nil {
			return nil, err
		}
	}
	return d.records, nil
}

// ControlledShutdown decides a broker's request to shut down (KAFKA-3670,
// KIP-841). Before the BeginControlledShutdown record, every partition the
// broker leads gets a new leader, the first other eligible ISR member in
// assignment order (so the preferred replica when it can), and the broker
// leaves every ISR (into the ELR where the ISR falls below
// min.insync.replicas). Clients are thus redirected before the broker goes,
// instead of timing out against it, and it can no longer be elected or
// counted toward the high watermark. A partition with no other eligible
// member is left leaderless (or, if the topic allows, elects uncleanly).
// A wrong epoch gets STALE_BROKER_EPOCH; a repeated request changes nothing.
func ControlledShutdown(img *metadata.Image, id metadata.BrokerID, epoch metadata.BrokerEpoch) ([]metadata.Record, int16, error) {
	broker, ok := img.Broker(id)
	if !ok || broker.Epoch != epoch {
		return nil, kerr.StaleBrokerEpoch.Code, nil
	}
	if broker.ShuttingDown {
		return nil, 0, nil
	}
	d := newDecision(img)
	if err := d.moveAway([]metadata.BrokerID{id}, nil); err != nil {
		return nil, 0, err
	}
	if err := d.append(metadata.BeginControlledShutdown{ID: id, Epoch: epoch}); err != nil {
		return nil, 0, err
	}
	return d.records, 0, nil
}

// UnregisterBroker removes a broker from the cluster for good (Kafka's
// UnregisterBroker admin request): it leaves every leadership, ISR and ELR,
// then its registration goes. BROKER_ID_NOT_REGISTERED for an unknown id.
func UnregisterBroker(img *metadata.Image, id metadata.BrokerID) ([]metadata.Record, int16, error) {
	broker, ok := img.Broker(id)
	if !ok {
		return nil, kerr.BrokerIDNotRegistered.Code, nil
	}
	d := newDecision(img)
	gone := []metadata.BrokerID{id}
	if err := d.moveAway(gone, gone); err != nil {
		return nil, 0, err
	}
	if err := d.append(metadata.UnregisterBroker{ID: id, Epoch: broker.Epoch}); err != nil {
		return nil, 0, err
	}
	return d.records, 0, nil
}
