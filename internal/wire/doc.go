// Package wire is the Kafka protocol as bytes in, bytes out: it takes one
// request as it comes off a connection (the request header and body, after
// the 4-byte size) and produces the response (without the size). It owns no
// connection and starts no goroutine, so the server (real sockets) and the
// simulator (virtual network) drive the same code.
//
// One file per API key, numbered by key (00_produce.go, 01_fetch.go, ...),
// each opening with the versions it serves and the KIPs behind them, and
// registering its version range so ApiVersions is built from the
// registrations and never advertises a version nothing serves.
//
// Requests are decoded and responses encoded with franz-go's kmsg; error
// codes come from kerr. A Kafka failure (an unknown topic, a fenced leader
// epoch) is an error code inside a response; a request that cannot be
// understood (a body that does not decode, an API key or version that is not
// served, a limit exceeded) is a Go error, on which the server closes the
// connection, as Kafka does. ApiVersions is the exception: a version above
// the served range gets a v0 UNSUPPORTED_VERSION answer listing the served
// ranges, because that is how clients negotiate.
//
// The work behind a request is done by a Backend (the broker), in tide's
// own types; records stay RecordBatch v2 bytes end to end. Answers may come
// later (acks=all produce, long-poll fetch): a response is assembled from
// per-partition answers as they arrive and handed to the done callback of
// Handle.
//
// Concurrency: a Handler is single-threaded. Handle, and every done callback
// the Backend invokes, must be called from one goroutine (the server's node
// loop, or the simulator's only goroutine); the Handler takes no locks.
package wire
