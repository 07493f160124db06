// Package server is tide's runtime on real sockets, files and time. It runs
// one node of a cluster (a broker, and a controller when the node is a
// voter): the metadata quorum (internal/quorum) over its raft log on disk
// (internal/raftlog), and the broker through its front end
// (internal/frontend), which owns the broker's lifecycle, the Kafka
// protocol handler (internal/wire) and the replica fetchers
// (internal/fetcher).
//
// What it owns: the listeners (controller and Kafka), every connection and
// its goroutines (a reader and a writer each, talking to the loop by
// channels), the links to the other voters, the fetchers' dial loops, the
// real clock (a ticker turned into Tick calls), the real disk (disk.OS),
// and sendfile. One goroutine, the node loop, owns the cores: each pass
// takes a tick, or an event and the events already queued behind it (up to
// maxEventsPerPass), then ends by handing the broker's sync jobs to the
// I/O workers (syncer.go) and carrying out the front end's Flush
// (server.go, flush); a completed sync comes back as an event. The sync
// workers run fsyncs only, on files the broker's logs name.
//
// What it never decides: Kafka behaviour or replication. What a request
// gets, when a parked fetch wakes, what a follower asks its leader: all of
// that is the front end's, the fetcher's and the broker's, which the
// simulator is meant to run alike (docs/architecture.md); code here only
// moves bytes, keeps connections and carries out I/O.
package server

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// Frames on the controller listener: a 4-byte big-endian length (of what
// follows), a type byte, and the payload.
const (
	// frameHello opens every connection: the sender's node id, as a
	// 4-byte big-endian int32 (-1 for an admin client).
	frameHello byte = iota + 1
	// frameRaft is a raft message, raftpb's protobuf bytes.
	frameRaft
	// frameRequest and frameAnswer carry the controller protocol
	// (quorum.EncodeRequest, quorum.EncodeAnswer).
	frameRequest
	frameAnswer
	// frameStatus asks a node for its view, answered by a frameStatus
	// carrying JSON (Status).
	frameStatus
)

// errFrameTooLarge is a frame over the limit: the connection is closed,
// since what follows cannot be found.
var errFrameTooLarge = errors.New("server: frame too large")

// writeFrame writes one frame.
func writeFrame(w io.Writer, kind byte, payload []byte) error {
	header := make([]byte, 5, 5+len(payload))
	binary.BigEndian.PutUint32(header, uint32(1+len(payload)))
	header[4] = kind
	_, err := w.Write(append(header, payload...))
	return err
}

// readFrame reads one frame of at most maxBytes.
func readFrame(r io.Reader, maxBytes int) (byte, []byte, error) {
	var header [5]byte
	if _, err := io.ReadFull(r, header[:]); err != nil {
		return 0, nil, err
	}
	length := binary.BigEndian.Uint32(header[:4])
	if length < 1 || length > uint32(maxBytes) {
		return 0, nil, fmt.Errorf("%w: %d bytes, limit %d", errFrameTooLarge, length, maxBytes)
	}
	payload := make([]byte, length-1)
	if _, err := io.ReadFull(r, payload); err != nil {
		return 0, nil, err
	}
	return header[4], payload, nil
}

func helloPayload(id int32) []byte {
	return binary.BigEndian.AppendUint32(nil, uint32(id))
}

func parseHello(kind byte, payload []byte) (int32, error) {
	if kind != frameHello || len(payload) != 4 {
		return 0, errors.New("server: a connection must open with a hello")
	}
	return int32(binary.BigEndian.Uint32(payload)), nil
}
