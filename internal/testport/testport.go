// Package testport hands tests addresses for servers they start in other
// processes or through configuration, which cannot be given a listener.
//
// Asking the system for a free port (listening on port 0 and closing) gives
// one from the ephemeral range, which the system also hands to every
// outgoing connection: between the check and the server's own bind, a
// client dialing anywhere may take it, and the server fails to start. The
// ports here come from below the ephemeral range, where only another
// listener can take them.
package testport

import (
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"testing"
)

// Below Linux's default ephemeral range (32768-60999), and above the ports
// services usually take.
const (
	first = 20000
	last  = 32767
)

// handedOut are the ports Free already gave in this process: a port is
// free until the server it was picked for binds it, so without this two
// picks before either server starts (one cluster's listeners, or tests
// running in parallel) could get the same one.
var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

// Free returns a 127.0.0.1 address whose port was free a moment ago and
// that no other call in this process has returned.
func Free(t testing.TB) string {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	for range 200 {
		port := first + rand.IntN(last-first+1)
		if handedOut.ports[port] {
			continue
		}
		address := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		l, err := net.Listen("tcp", address)
		if err != nil {
			continue
		}
		l.Close()
		handedOut.ports[port] = true
		return address
	}
	t.Fatal("testport: no free port below the ephemeral range")
	return ""
}
