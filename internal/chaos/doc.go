// Package chaos runs real `tide serve` processes under faults and checks
// what clients saw, as Jepsen does: `tide chaos`.
//
// It owns a run from start to verdict: the processes (started from the
// tide binary, each a broker and a voter, on loopback ports, with data
// under a directory of its own), the workload (idempotent acks=all
// franz-go producers writing unique values, a consumer reading them back,
// a poller asking every broker for each partition's high watermark), the
// faults (kill -9, SIGSTOP past the session timeout, packets dropped with
// iptables), drawn from a seed with quiet periods between them, and the
// healing and settling at the end.
//
// Everything it observes goes into a History; Check, a pure function of
// that history, decides the verdict. Check touches no clock, process or
// file, so it is tested on doctored histories. The rest of the package is
// runtime code: it uses processes, signals, sockets, the clock and
// goroutines, and decides nothing about Kafka behaviour.
//
// It must never leave anything behind: every iptables rule it adds
// carries a comment naming this process and is removed when the run ends,
// also on an interrupt or a panic, and rules left by a chaos run that died
// are swept when the next one starts; the nodes die with it (Pdeathsig).
package chaos
