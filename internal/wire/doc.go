// Package wire is the Kafka protocol as bytes in, bytes out: it takes one
// request as it comes off a connection (the request header and body, after
// the 4-byte size) and produces the response (without the size). It owns no
// connection, starts no goroutine, and reads no clock or randomness of its
// own (internal/lint holds it to that), so any runtime can run it.
//
// Who drives it: the front end (internal/frontend), which owns the Handler,
// is its Backend, and hands it every Kafka request a runtime reads off a
// connection (frontend.FrontEnd.HandleKafka, which calls HandleSpliced).
// internal/server's node loop and the simulator (internal/sim) drive the
// front end, with the same bytes.
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
// What it decides: how Kafka's bytes map to tide's types and back, the
// served versions, the per-request limits, and which requests are refused
// whole (transactional produces, fetch sessions). What it never decides:
// what a partition request gets. That work is done by a Backend (the front
// end, or a test's fake), in tide's own types; records stay RecordBatch v2
// bytes end to end. Answers may come later (acks=all produce, long-poll
// fetch): a response is assembled from per-partition answers as they
// arrive and handed to the done callback of Handle or HandleSpliced.
//
// Concurrency: a Handler is single-threaded. Handle, and every done callback
// the Backend invokes, must be called from one goroutine (the loop of the
// runtime that drives the front end: the server's node loop); the Handler
// takes no locks.
package wire
