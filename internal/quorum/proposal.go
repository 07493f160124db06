package quorum

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/tidelog/tide/internal/metadata"
)

// proposal is the data of a raft entry: a batch of metadata records, and
// who proposed it, so the proposer can tell when its own proposals are
// applied (raft's Propose returns no index).
type proposal struct {
	controller metadata.BrokerID
	term       uint64
	sequence   uint64
	records    []metadata.Record
}

// proposalVersion is the first byte of an entry's data.
const proposalVersion = 1

func encodeProposal(p proposal) []byte {
	b := []byte{proposalVersion}
	b = binary.AppendVarint(b, int64(p.controller))
	b = binary.AppendUvarint(b, p.term)
	b = binary.AppendUvarint(b, p.sequence)
	return metadata.EncodeRecords(b, p.records)
}

var errBadProposal = errors.New("quorum: bad entry data")

func decodeProposal(b []byte) (proposal, error) {
	if len(b) < 1 || b[0] != proposalVersion {
		return proposal{}, errBadProposal
	}
	b = b[1:]
	controller, n := binary.Varint(b)
	if n <= 0 {
		return proposal{}, errBadProposal
	}
	b = b[n:]
	term, n := binary.Uvarint(b)
	if n <= 0 {
		return proposal{}, errBadProposal
	}
	b = b[n:]
	sequence, n := binary.Uvarint(b)
	if n <= 0 {
		return proposal{}, errBadProposal
	}
	records, err := metadata.DecodeRecords(b[n:])
	if err != nil {
		return proposal{}, fmt.Errorf("%w: %v", errBadProposal, err)
	}
	return proposal{controller: metadata.BrokerID(controller), term: term, sequence: sequence, records: records}, nil
}
