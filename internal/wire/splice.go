package wire

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kbin"

	"github.com/tidelog/tide/internal/replica"
)

// FileRange is a run of whole record batches in a file, the bytes
// [Position, Position+Size): records a Backend leaves where they are, for
// the connection to send from the file rather than copy through user
// space. In tide they are the partition log's chunks (commitlog.Chunk) of
// a fetch whose records all lie below the high watermark, which the broker
// hands out with broker.Config.ZeroCopyReads.
type FileRange struct {
	File     RecordFile
	Position int64
	Size     int64
}

// RecordFile is a file a FileRange lies in: any file of the broker's
// filesystem (a disk.File: a segment of the real disk, or of a MemFS in
// tests). wire itself only ever reads one with ReadAt (Flatten). The
// runtime that writes the response decides how to send it: the server
// sends a real file's bytes with sendfile(2) when the file behind it is an
// OS file (disk.OSFile) and the connection is TCP, and reads any other with
// ReadAt.
type RecordFile interface {
	io.ReaderAt
	Name() string
}

// FileFetcher is a Backend that can answer fetches with records left in
// files. A Handler whose Backend implements it calls FetchFiles instead of
// Fetch; files[i], when not empty, holds partition i's records, whose
// Records field is then empty, and the Handler splices them into the
// response (Response.Splices) in place of the partition's record set. An
// answer with an error or a diverging epoch carries no records, so its
// ranges are ignored. The files must keep those bytes unchanged until the
// response is written (records below the high watermark never change); a
// range the file no longer holds fails the write, and the connection is
// closed.
type FileFetcher interface {
	FetchFiles(request FetchRequest, done func(answers []replica.FetchResponse, files [][]FileRange))
}

// Response is an encoded response (header and body, without the size
// prefix) whose record sets are spliced in when it is written: Bytes holds
// everything else, and each Splice goes at its offset in Bytes, in order.
// Most responses have no splices.
type Response struct {
	Bytes   []byte
	Splices []Splice
}

// Splice is one partition's record set: bytes kept out of the encoded
// response so they are written from where they are, or file ranges.
type Splice struct {
	At     int
	Bytes  []byte
	Ranges []FileRange
}

// Size is the whole response's size.
func (r Response) Size() int64 {
	size := int64(len(r.Bytes))
	for _, splice := range r.Splices {
		size += splice.size()
	}
	return size
}

func (s Splice) size() int64 {
	size := int64(len(s.Bytes))
	for _, file := range s.Ranges {
		size += file.Size
	}
	return size
}

// Flatten is the response as one buffer, reading the file ranges: for
// callers without sendfile, and tests.
func (r Response) Flatten() ([]byte, error) {
	if len(r.Splices) == 0 {
		return r.Bytes, nil
	}
	out := make([]byte, 0, r.Size())
	next := 0
	for _, splice := range r.Splices {
		out = append(out, r.Bytes[next:splice.At]...)
		next = splice.At
		out = append(out, splice.Bytes...)
		for _, file := range splice.Ranges {
			start := len(out)
			out = append(out, make([]byte, file.Size)...)
			if n, err := file.File.ReadAt(out[start:], file.Position); int64(n) < file.Size {
				if err == nil || err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				return nil, fmt.Errorf("wire: read %s at %d: %w", file.File.Name(), file.Position, err)
			}
		}
	}
	return append(out, r.Bytes[next:]...), nil
}

// Record sets are spliced into kmsg's encoding through markers: each spliced
// partition's RecordBatches is encoded as a 16-byte marker, 12 random bytes
// shared by the response and the splice's index, and the marker and its
// length prefix are then cut out and the real length put in their place. No
// record bytes are in the encoded part (every record set of a spliced
// response is a splice), only topic names, which cannot hold the marker's
// bytes, and numbers, which match 12 random bytes by chance only; and every
// marker must be found, in order, or the response is encoded again without
// splices.
const markerBytes = 16

type markers struct {
	prefix [12]byte
}

// newMarkers draws a response's marker prefix from random (Config.Random:
// crypto/rand in the server; a seeded source in a run that must be a
// function of its seed, as the simulator's will be once it speaks wire).
// A source that fails leaves zeros, which at worst makes the markers not
// found and the response encoded whole.
func newMarkers(random io.Reader) markers {
	var m markers
	io.ReadFull(random, m.prefix[:])
	return m
}

func (m markers) marker(index int) []byte {
	return binary.BigEndian.AppendUint32(append([]byte(nil), m.prefix[:]...), uint32(index))
}

// splice cuts the markers out of an encoded response and returns it with
// the splices in their place, or false when the markers are not where they
// must be. Each marker follows its length prefix, an int32 or, at flexible
// versions, a uvarint of length+1 (one byte for 16).
func (m markers) splice(encoded []byte, sets []Splice, flexible bool) (Response, bool) {
	prefixBytes := 4
	if flexible {
		prefixBytes = 1
	}
	response := Response{Bytes: make([]byte, 0, len(encoded))}
	next := 0
	for i := range sets {
		at := bytes.Index(encoded[next:], m.marker(i))
		if at < prefixBytes {
			return Response{}, false
		}
		at += next
		response.Bytes = append(response.Bytes, encoded[next:at-prefixBytes]...)
		size := sets[i].size()
		if flexible {
			response.Bytes = kbin.AppendUvarint(response.Bytes, uint32(size+1))
		} else {
			response.Bytes = kbin.AppendInt32(response.Bytes, int32(size))
		}
		response.Splices = append(response.Splices, Splice{At: len(response.Bytes), Bytes: sets[i].Bytes, Ranges: sets[i].Ranges})
		next = at + markerBytes
	}
	response.Bytes = append(response.Bytes, encoded[next:]...)
	return response, true
}
