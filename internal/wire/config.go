package wire

import (
	"fmt"
	"io"
	"time"
)

// Defaults for Config, Kafka's where Kafka has one.
const (
	// DefaultMaxRequestBytes is Kafka's socket.request.max.bytes default
	// (100 MiB): a larger request is refused before it is decoded.
	DefaultMaxRequestBytes = 100 << 20
	// DefaultMaxTopicsPerRequest bounds the topics one request may name.
	DefaultMaxTopicsPerRequest = 10_000
	// DefaultMaxPartitionsPerRequest bounds the partitions one request may
	// name, summed over its topics; it matches the controller's
	// MaxPartitionsPerRequest, so an ElectLeaders the wire accepts is one
	// the controller accepts too.
	DefaultMaxPartitionsPerRequest = 10_000
	// DefaultMaxFetchBytes is Kafka's fetch.max.bytes default (55 MiB): a
	// fetch's MaxBytes, and each partition's, are cut to it.
	DefaultMaxFetchBytes = 55 << 20
	// DefaultTick is the servers' default tick.
	DefaultTick = 10 * time.Millisecond
)

// Config holds the Handler's limits. Every resource a request can make the
// Handler use has a bound here; Validate rejects bad values at start.
type Config struct {
	// MaxRequestBytes bounds one request (header and body, without the
	// 4-byte size), like Kafka's socket.request.max.bytes. The server should
	// refuse a larger size prefix before reading the body; Handle checks
	// again.
	MaxRequestBytes int
	// MaxTopicsPerRequest and MaxPartitionsPerRequest bound how many topics
	// and partitions one request may name, and so how many Backend calls
	// and pending answers one request can create. kmsg already bounds every
	// array by the bytes left in the request; these bound the work.
	MaxTopicsPerRequest     int
	MaxPartitionsPerRequest int
	// MaxFetchBytes bounds the records one fetch response carries (Kafka's
	// fetch.max.bytes): a client asking for more gets at most this, still
	// with the first batch whole (KIP-74), so a response is written within
	// the connection's write timeout and holds bounded memory.
	MaxFetchBytes int32
	// Tick is the length of one tick of the Backend's clock: Kafka's
	// millisecond timeouts (produce timeout, fetch max wait, create topics
	// timeout) are handed to the Backend in ticks, rounded up.
	Tick time.Duration
	// Random is where the Handler draws the markers that splice record
	// sets into fetch responses (splice.go): crypto/rand's Reader in the
	// server; a seeded source where a run must stay a function of its seed
	// (the simulator, once it runs wire). The Handler reads it from its one
	// goroutine.
	Random io.Reader
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{
		MaxRequestBytes:         DefaultMaxRequestBytes,
		MaxTopicsPerRequest:     DefaultMaxTopicsPerRequest,
		MaxPartitionsPerRequest: DefaultMaxPartitionsPerRequest,
		MaxFetchBytes:           DefaultMaxFetchBytes,
		Tick:                    DefaultTick,
	}
}

// Validate reports a setting that cannot work.
func (c Config) Validate() error {
	switch {
	case c.MaxRequestBytes < minRequestHeaderBytes || c.MaxRequestBytes > 1<<30:
		return fmt.Errorf("wire: max request bytes %d must be in [%d, 1 GiB]", c.MaxRequestBytes, minRequestHeaderBytes)
	case c.MaxTopicsPerRequest < 1:
		return fmt.Errorf("wire: max topics per request %d must be at least 1", c.MaxTopicsPerRequest)
	case c.MaxPartitionsPerRequest < c.MaxTopicsPerRequest:
		return fmt.Errorf("wire: max partitions per request %d must be at least the max topics per request %d",
			c.MaxPartitionsPerRequest, c.MaxTopicsPerRequest)
	case c.MaxFetchBytes < 1:
		return fmt.Errorf("wire: max fetch bytes %d must be positive", c.MaxFetchBytes)
	case c.Tick <= 0:
		return fmt.Errorf("wire: tick %s must be positive", c.Tick)
	case c.Random == nil:
		return fmt.Errorf("wire: a Handler needs a source of randomness for its response markers")
	}
	return nil
}

// ticks converts Kafka's milliseconds to the Backend's ticks, rounding up so
// that a positive timeout never becomes zero; a negative one is zero.
func (c Config) ticks(milliseconds int32) int64 {
	if milliseconds <= 0 {
		return 0
	}
	duration := time.Duration(milliseconds) * time.Millisecond
	return int64((duration + c.Tick - 1) / c.Tick)
}
