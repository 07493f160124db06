package wire

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// The errors Handle gives instead of a response. Each means the connection
// must be closed: Kafka cannot answer a request it cannot parse, and what a
// client sends after a request it got wrong cannot be trusted either.
var (
	// ErrRequestTooLarge is a request over Config.MaxRequestBytes.
	ErrRequestTooLarge = errors.New("wire: request too large")
	// ErrMalformedRequest is a header or body that does not decode.
	ErrMalformedRequest = errors.New("wire: malformed request")
	// ErrUnknownAPIKey is an API key this broker does not serve.
	ErrUnknownAPIKey = errors.New("wire: API key not served")
	// ErrUnsupportedVersion is a version outside the served range of an
	// API other than ApiVersions (which answers UNSUPPORTED_VERSION).
	ErrUnsupportedVersion = errors.New("wire: API version not served")
	// ErrTooManyPartitions is a request naming more topics or partitions
	// than Config allows.
	ErrTooManyPartitions = errors.New("wire: too many topics or partitions in one request")
)

// RequestError is what Handle gives for a request that gets no response:
// one of the errors above, wrapped with details, and as much of the header
// as could be read, so the server can log which client sent what before it
// closes the connection.
type RequestError struct {
	Header RequestHeader
	Err    error
}

func (e *RequestError) Error() string {
	return fmt.Sprintf("%s v%d from client %q (correlation id %d): %v", kmsg.NameForKey(e.Header.APIKey),
		e.Header.APIVersion, e.Header.ClientID, e.Header.CorrelationID, e.Err)
}

// Unwrap gives the error, so errors.Is finds the sentinel.
func (e *RequestError) Unwrap() error { return e.Err }

// minRequestHeaderBytes is the smallest request header: api key, version,
// correlation id and a client id length.
const minRequestHeaderBytes = 2 + 2 + 4 + 2

// RequestHeader is a request's header (header v1, or v2 at flexible
// versions, whose tagged fields are skipped: none is defined).
type RequestHeader struct {
	APIKey        int16
	APIVersion    int16
	CorrelationID int32
	// ClientID is the client.id; a null one reads as empty, as in Kafka.
	ClientID string
}

// Handler serves Kafka requests against a Backend. It is single-threaded:
// see the package documentation.
type Handler struct {
	config  Config
	backend Backend
}

// New returns a Handler, or the error Config.Validate finds.
func New(config Config, backend Backend) (*Handler, error) {
	if err := config.Validate(); err != nil {
		return nil, err
	}
	if backend == nil {
		return nil, errors.New("wire: a Handler needs a Backend")
	}
	return &Handler{config: config, backend: backend}, nil
}

// Handle serves one request: its header and body as they come off the
// connection, without the 4-byte size. Handle takes ownership of request:
// produce batches alias it and are stamped in place by the replica.
//
// done is called exactly once, before Handle returns or later: with the
// response (header and body, without the size), with (nil, nil) when the
// request takes no response (an acks=0 produce), or with one of the errors
// above, on which the caller closes the connection. Responses must be
// written in request order; a caller that handles the next request of a
// connection before the previous one is answered must queue them.
func (h *Handler) Handle(request []byte, done func(response []byte, err error)) {
	h.HandleSpliced(request, func(response Response, err error) {
		if err != nil || response.Bytes == nil {
			done(nil, err)
			return
		}
		flat, err := response.Flatten()
		if err != nil {
			done(nil, err)
			return
		}
		done(flat, nil)
	})
}

// HandleSpliced is Handle for a caller that writes record sets from where
// they are (sendfile): the response comes as a Response, whose splices are
// written in their places. Its Bytes is nil when there is no response.
// Only a FileFetcher's fetch responses have file ranges.
func (h *Handler) HandleSpliced(request []byte, done func(Response, error)) {
	h.HandleSplicedFrom("", request, done)
}

// HandleSplicedFrom is HandleSpliced for a request from clientHost: the
// client's address as Kafka shows it ("/127.0.0.1"), which group members
// keep (DescribeGroups), or "" when the runtime does not say.
func (h *Handler) HandleSplicedFrom(clientHost string, request []byte, done func(Response, error)) {
	x, header, err := h.decode(request, done)
	if err != nil {
		done(Response{}, &RequestError{Header: header, Err: err})
		return
	}
	if x == nil {
		return // answered during decoding (ApiVersions above the range)
	}
	x.clientHost = clientHost
	if err := apis[x.header.APIKey].serve(h, x); err != nil {
		x.fail(err)
	}
}

// decode parses the header and body and checks them against the served
// ranges; it answers an ApiVersions request above the range itself and
// then returns a nil exchange. It returns the header as far as it read it.
func (h *Handler) decode(request []byte, done func(Response, error)) (*exchange, RequestHeader, error) {
	reader := kbin.Reader{Src: request}
	header := RequestHeader{APIKey: reader.Int16(), APIVersion: reader.Int16(), CorrelationID: reader.Int32()}
	if len(request) > h.config.MaxRequestBytes {
		return nil, header, fmt.Errorf("%w: %d bytes, limit %d", ErrRequestTooLarge, len(request), h.config.MaxRequestBytes)
	}
	if !reader.Ok() {
		return nil, header, fmt.Errorf("%w: %d bytes is too short for a request header", ErrMalformedRequest, len(request))
	}
	served, ok := lookup(header.APIKey)
	if !ok {
		return nil, header, fmt.Errorf("%w: key %d (%s)", ErrUnknownAPIKey, header.APIKey, kmsg.NameForKey(header.APIKey))
	}
	if clientID := reader.NullableString(); clientID != nil {
		header.ClientID = *clientID
	}
	if !reader.Ok() {
		return nil, header, fmt.Errorf("%w: truncated client id", ErrMalformedRequest)
	}
	if header.APIVersion < served.min || header.APIVersion > served.max {
		if header.APIKey == apiVersionsKey {
			// Clients negotiate by sending their newest ApiVersions:
			// answer in v0, which every client reads, with our ranges.
			done(Response{Bytes: encodeResponse(header.CorrelationID, unsupportedAPIVersions())}, nil)
			return nil, header, nil
		}
		return nil, header, fmt.Errorf("%w: %s v%d, served v%d-v%d", ErrUnsupportedVersion,
			kmsg.NameForKey(header.APIKey), header.APIVersion, served.min, served.max)
	}
	body := kmsg.RequestForKey(header.APIKey)
	body.SetVersion(header.APIVersion)
	if body.IsFlexible() {
		kmsg.SkipTags(&reader)
		if !reader.Ok() {
			return nil, header, fmt.Errorf("%w: truncated header tagged fields", ErrMalformedRequest)
		}
	}
	if err := body.ReadFrom(reader.Src); err != nil {
		return nil, header, fmt.Errorf("%w: %s v%d: %v", ErrMalformedRequest, kmsg.NameForKey(header.APIKey), header.APIVersion, err)
	}
	return &exchange{header: header, request: body, done: done}, header, nil
}

// encodeResponse prepends the response header: the correlation id, and at
// flexible versions (header v1) an empty tagged-field section, except for
// ApiVersions, whose response header is always v0 so that a client that
// does not yet know the broker's versions can read it.
func encodeResponse(correlationID int32, response kmsg.Response) []byte {
	return encodeResponseSized(correlationID, response, 0)
}

// encodeResponseSized is encodeResponse into a buffer of sizeHint bytes:
// a fetch response is mostly record bytes of a known size, and a buffer
// that starts right is not copied again as it grows.
func encodeResponseSized(correlationID int32, response kmsg.Response, sizeHint int) []byte {
	dst := binary.BigEndian.AppendUint32(make([]byte, 0, max(sizeHint, 64)), uint32(correlationID))
	if response.IsFlexible() && response.Key() != apiVersionsKey {
		dst = append(dst, 0)
	}
	return response.AppendTo(dst)
}

// exchange is one request being served: its header, its decoded body, and
// the caller's done, to be called once.
type exchange struct {
	header RequestHeader
	// clientHost is the client's address, or "" (HandleSplicedFrom).
	clientHost string
	request    kmsg.Request
	done       func(Response, error)
	answered   bool
}

// respond encodes and hands out the response; nil means no response.
func (x *exchange) respond(response kmsg.Response) { x.respondSized(response, 0) }

// respondSized is respond with the expected size of the encoded response.
func (x *exchange) respondSized(response kmsg.Response, sizeHint int) {
	x.finish()
	if response == nil {
		x.done(Response{}, nil)
		return
	}
	x.done(Response{Bytes: encodeResponseSized(x.header.CorrelationID, response, sizeHint)}, nil)
}

// respondWith hands out a response already encoded, splices and all.
func (x *exchange) respondWith(response Response) {
	x.finish()
	x.done(response, nil)
}

// fail hands out an error that closes the connection.
func (x *exchange) fail(err error) {
	x.finish()
	x.done(Response{}, &RequestError{Header: x.header, Err: err})
}

func (x *exchange) finish() {
	if x.answered {
		panic(fmt.Sprintf("wire: %s request %d answered twice", kmsg.NameForKey(x.header.APIKey), x.header.CorrelationID))
	}
	x.answered = true
}

// checkCounts enforces the per-request limits on topics and partitions.
func (h *Handler) checkCounts(topics, partitions int) error {
	if topics > h.config.MaxTopicsPerRequest || partitions > h.config.MaxPartitionsPerRequest {
		return fmt.Errorf("%w: %d topics, %d partitions; limits %d and %d", ErrTooManyPartitions,
			topics, partitions, h.config.MaxTopicsPerRequest, h.config.MaxPartitionsPerRequest)
	}
	return nil
}

// gather assembles one response from answers that arrive later: it counts
// the answers still awaited and runs complete when the last arrives. The
// issuer holds one count while it issues the Backend calls, so that answers
// given synchronously cannot complete the response before every call is
// made; release drops that hold.
type gather struct {
	awaited  int
	complete func()
}

func newGather(complete func()) *gather { return &gather{awaited: 1, complete: complete} }

// expect returns the callback for one more answer: it runs deliver, then
// completes the response if it was the last. Calling it twice panics: a
// Backend that answers twice is broken.
func (g *gather) expect(deliver func()) func() {
	g.awaited++
	called := false
	return func() {
		if called {
			panic("wire: a Backend answered twice")
		}
		called = true
		deliver()
		g.arrive()
	}
}

// release drops the issuer's hold once every call is issued.
func (g *gather) release() { g.arrive() }

func (g *gather) arrive() {
	g.awaited--
	if g.awaited == 0 {
		g.complete()
	}
}
