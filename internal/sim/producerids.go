package sim

import (
	"fmt"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
)

// allocateProducerIDsRequest is a broker's AllocateProducerIds (KIP-730).
type allocateProducerIDsRequest struct {
	epoch metadata.BrokerEpoch
}

// producerIDsAnswer is the controller's answer: a block committed to the
// metadata log for that broker.
type producerIDsAnswer struct {
	block     controller.ProducerIDBlock
	errorCode int16
}

// handleAllocateProducerIDs runs the controller's decision and answers once
// the ProducerIDs record is in the log: the block comes from the log, so it
// is never handed out again.
func (c *logicalController) handleAllocateProducerIDs(id metadata.BrokerID, request *allocateProducerIDsRequest) {
	records, block, code, err := controller.AllocateProducerIDs(c.image, id, request.epoch)
	if err != nil {
		panic(fmt.Sprintf("allocate producer ids for broker %d: %v", id, err))
	}
	c.append(records)
	c.w.network.send(&message{from: controllerAddress, to: brokerAddress(id), producerIDs: &producerIDsAnswer{block: block, errorCode: code}})
}
