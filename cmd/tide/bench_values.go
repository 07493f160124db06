package main

import (
	"encoding/binary"
	"math/rand/v2"

	"github.com/twmb/franz-go/pkg/kgo"
)

// valuePoolBytes is the size of the random pool values are cut from:
// far larger than a batch, so records of one batch rarely overlap.
const valuePoolBytes = 16 << 20

// valueSource makes the benchmark's records. Each value is a fresh buffer
// (kgo owns a value until the record is acknowledged) copied from a random
// offset of a pool of random bytes, with its first 8 bytes then drawn anew,
// so values are incompressible and, but with odds of 2^-64 a pair, distinct.
// Copying rather than generating each value keeps the client's cost per
// record small: it shares the machine's CPUs with the broker it measures.
// It is used from one goroutine.
type valueSource struct {
	random   *rand.Rand
	pool     []byte
	size     int
	keys     bool
	sequence uint64
}

func newValueSource(seed uint64, size int, keys bool) *valueSource {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	stream := rand.NewChaCha8(key)
	pool := make([]byte, valuePoolBytes+size)
	_, _ = stream.Read(pool) // ChaCha8's Read always fills p
	return &valueSource{random: rand.New(stream), pool: pool, size: size, keys: keys}
}

// next is a new record for the client's default produce topic.
func (s *valueSource) next() *kgo.Record {
	value := make([]byte, s.size)
	copy(value, s.pool[s.random.IntN(valuePoolBytes):])
	var head [8]byte
	binary.LittleEndian.PutUint64(head[:], s.random.Uint64())
	copy(value, head[:])
	record := &kgo.Record{Value: value}
	if s.keys {
		record.Key = binary.BigEndian.AppendUint64(nil, s.sequence)
	}
	s.sequence++
	return record
}
