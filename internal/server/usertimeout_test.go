package server

import (
	"errors"
	"net"
	"os"
	"strconv"
	"testing"
	"time"
)

// A connection between brokers whose peer is blackholed (packets dropped,
// the connection left open) is aborted once its data stays unacknowledged
// for the unacked timeout, so its dial loop can redial; a connection
// dialed without the option still waits after three times as long, which
// is what left an isolated broker fenced for most of a minute after the
// network healed.
func TestPeerConnectionGivesUpUnacknowledgedData(t *testing.T) {
	holes := newBlackholes(t)
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	go func() {
		for {
			c, err := listener.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	const unacked = time.Second
	peer := peerDialer(unacked)
	withRule, err := peer.Dial("tcp", listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer withRule.Close()
	if got, err := unackedTimeoutOf(withRule); err != nil || got != unacked {
		t.Fatalf("TCP_USER_TIMEOUT of a peer connection: %s, %v; want %s", got, err, unacked)
	}
	without, err := net.Dial("tcp", listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer without.Close()

	port := strconv.Itoa(listener.Addr().(*net.TCPAddr).Port)
	holes.add(iptablesRule{table: "filter", chain: "INPUT", match: []string{"-i", "lo", "-p", "tcp", "--dport", port},
		target: []string{"-j", "DROP"}, isolationOfNode: 1})
	defer holes.healAll()
	began := time.Now()
	read := func(c net.Conn, result chan<- error) {
		c.Write(make([]byte, 1024))
		c.SetReadDeadline(began.Add(3 * unacked))
		_, err := c.Read(make([]byte, 1))
		result <- err
	}
	ruleDone, withoutDone := make(chan error, 1), make(chan error, 1)
	go read(withRule, ruleDone)
	go read(without, withoutDone)
	errRule, errWithout := <-ruleDone, <-withoutDone
	if errRule == nil || errors.Is(errRule, os.ErrDeadlineExceeded) {
		t.Fatalf("the peer connection was not aborted within %s of its data going unacknowledged: %v", 3*unacked, errRule)
	}
	if !errors.Is(errWithout, os.ErrDeadlineExceeded) {
		t.Fatalf("a connection without the option ended by itself (%v): the test shows nothing", errWithout)
	}
	t.Logf("the peer connection was aborted: %v", errRule)
}
