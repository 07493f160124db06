package server

import (
	"context"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"maps"
	"net"
	"net/netip"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// recordingHandler keeps every log record's message and attributes, for
// tests that look at what the node logged.
type recordingHandler struct {
	mu    sync.Mutex
	lines []string
}

func (h *recordingHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h *recordingHandler) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *recordingHandler) WithGroup(string) slog.Handler            { return h }
func (h *recordingHandler) Handle(_ context.Context, r slog.Record) error {
	line := r.Level.String() + " " + r.Message
	r.Attrs(func(a slog.Attr) bool {
		line += " " + a.String()
		return true
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lines = append(h.lines, line)
	return nil
}

// count returns how many lines contain text.
func (h *recordingHandler) count(text string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, line := range h.lines {
		if strings.Contains(line, text) {
			n++
		}
	}
	return n
}

// waitConnections waits until the listener holds want connections.
func waitConnections(t *testing.T, node *Server, want int) {
	t.Helper()
	for began := time.Now(); time.Since(began) < 10*time.Second; time.Sleep(5 * time.Millisecond) {
		node.kafka.mu.Lock()
		held := len(node.kafka.conns)
		node.kafka.mu.Unlock()
		if held == want {
			return
		}
	}
	t.Fatalf("the listener did not reach %d connections", want)
}

// expectRefused dials with dialer and wants the broker to close the
// connection at once: EOF within a second, not a hang in the backlog.
func expectRefused(t *testing.T, dialer *net.Dialer, address string) {
	t.Helper()
	c, err := dialer.Dial("tcp", address)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetReadDeadline(time.Now().Add(time.Second))
	if n, err := c.Read(make([]byte, 1)); n != 0 || !errors.Is(err, io.EOF) {
		t.Fatalf("a connection over the limit read %d bytes, %v; want EOF at once", n, err)
	}
}

// askApiVersions sends ApiVersions on c and wants its answer within
// timeout.
func askApiVersions(t *testing.T, c net.Conn, timeout time.Duration) {
	t.Helper()
	request := kmsg.NewRequestFormatter(kmsg.FormatterClientID("test")).AppendRequest(nil, kmsg.NewPtrApiVersionsRequest(), 9)
	c.SetDeadline(time.Now().Add(timeout))
	if _, err := c.Write(request); err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
	var prefix [4]byte
	if _, err := io.ReadFull(c, prefix[:]); err != nil {
		t.Fatalf("ApiVersions: no answer: %v", err)
	}
	if _, err := io.ReadFull(c, make([]byte, binary.BigEndian.Uint32(prefix[:]))); err != nil {
		t.Fatalf("ApiVersions: %v", err)
	}
}

// Past max.connections a connection is accepted and closed at once, so
// its client sees EOF rather than hanging in the kernel's backlog; once
// a connection closes, the next one is served. The refusals are logged
// sampled, not a line each.
func TestConnectionsOverMaxConnectionsAreClosedAtOnce(t *testing.T) {
	const limit = 5
	logs := &recordingHandler{}
	node := startLimitedNode(t, func(c *Config) {
		c.KafkaMaxConnections = limit
		c.Logger = slog.New(logs)
	}, nil)
	address := node.KafkaAddr()
	var held []net.Conn
	for range limit {
		c, err := net.Dial("tcp", address)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		held = append(held, c)
	}
	waitConnections(t, node, limit)
	for range 3 * defaultLogSampleLines {
		expectRefused(t, &net.Dialer{}, address)
	}
	if lines := logs.count("kafka connection refused"); lines > defaultLogSampleLines {
		t.Fatalf("%d refusals logged %d lines; want at most %d", 3*defaultLogSampleLines, lines, defaultLogSampleLines)
	}
	held[0].Close()
	waitConnections(t, node, limit-1)
	c, err := net.Dial("tcp", address)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	askApiVersions(t, c, 5*time.Second)
}

// raiseFileLimit raises the soft RLIMIT_NOFILE to at least want, or skips
// the test when the hard limit does not allow it.
func raiseFileLimit(t *testing.T, want uint64) {
	t.Helper()
	var limit syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &limit); err != nil {
		t.Skipf("RLIMIT_NOFILE: %v", err)
	}
	if limit.Cur >= want {
		return
	}
	if limit.Max < want {
		t.Skipf("needs %d file descriptors; the hard RLIMIT_NOFILE is %d", want, limit.Max)
	}
	original := limit
	limit.Cur = want
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &limit); err != nil {
		t.Skipf("raising RLIMIT_NOFILE to %d: %v", want, err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &original) })
}

// One client holding 1,000 idle connections (from 127.0.0.2) no longer
// locks others out for the idle timeout: its next connection is closed at
// once by max.connections.per.ip, and a client from another address
// (127.0.0.1) connects and is answered.
func TestIdleConnectionsFromOneClientDoNotLockOthersOut(t *testing.T) {
	if testing.Short() {
		t.Skip("holds 1,000 connections; skipped with -short")
	}
	const idle = 1000
	raiseFileLimit(t, 2*idle+512)
	hog := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	node := startLimitedNode(t, func(c *Config) {
		c.KafkaMaxConnectionsPerIP = idle
		c.KafkaMaxConnections = idle + 100
	}, nil)
	address := node.KafkaAddr()
	probe, err := hog.Dial("tcp", address)
	if err != nil {
		t.Skipf("cannot dial from 127.0.0.2 (needs the whole of 127.0.0.0/8 on loopback, as Linux has): %v", err)
	}
	held := []net.Conn{probe}
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for len(held) < idle {
		c, err := hog.Dial("tcp", address)
		if err != nil {
			t.Fatalf("idle connection %d: %v", len(held), err)
		}
		held = append(held, c)
	}
	waitConnections(t, node, idle)
	began := time.Now()
	expectRefused(t, hog, address)
	c, err := net.Dial("tcp", address)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	askApiVersions(t, c, 5*time.Second)
	t.Logf("with %d idle connections held: a refusal and an answer in %s", idle, time.Since(began))
}

// openFiles counts this process's open file descriptors.
func openFiles(t *testing.T) int {
	t.Helper()
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("counting open files: %v", err)
	}
	return len(entries)
}

// The Kafka listener survives running out of file descriptors: with
// RLIMIT_NOFILE lowered and every descriptor taken, accepts fail with
// EMFILE for a while; once descriptors are free again the pending client
// is accepted and answered. Before, the first failed accept ended the
// listener for good.
func TestKafkaListenerSurvivesEMFILE(t *testing.T) {
	logs := &recordingHandler{}
	node := startLimitedNode(t, func(c *Config) { c.Logger = slog.New(logs) }, nil)
	address := node.KafkaAddr()
	var original syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &original); err != nil {
		t.Skipf("RLIMIT_NOFILE: %v", err)
	}
	lowered := original
	lowered.Cur = uint64(openFiles(t) + 64)
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lowered); err != nil {
		t.Skipf("lowering RLIMIT_NOFILE: %v", err)
	}
	var fillers []*os.File
	release := func() {
		for _, f := range fillers {
			f.Close()
		}
		fillers = nil
	}
	// Runs even when the test fails, before the node's cleanup, so the
	// node stops with its descriptors back.
	defer syscall.Setrlimit(syscall.RLIMIT_NOFILE, &original)
	defer release()
	for {
		f, err := os.Open(os.DevNull)
		if errors.Is(err, syscall.EMFILE) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		fillers = append(fillers, f)
	}
	// One descriptor for the client: the kernel completes its handshake,
	// and the broker has none left to accept it with. Should another
	// goroutine of the process take the one freed first, free another.
	var c net.Conn
	for attempt := 0; c == nil; attempt++ {
		fillers[len(fillers)-1].Close()
		fillers = fillers[:len(fillers)-1]
		var err error
		if c, err = net.Dial("tcp", address); err != nil && (!errors.Is(err, syscall.EMFILE) || attempt == 5) {
			t.Fatal(err)
		}
	}
	defer c.Close()
	for began := time.Now(); logs.count("too many open files") == 0; time.Sleep(10 * time.Millisecond) {
		if time.Since(began) > 5*time.Second {
			t.Fatal("no accept failed with EMFILE")
		}
	}
	time.Sleep(200 * time.Millisecond) // a few more failed accepts
	release()
	syscall.Setrlimit(syscall.RLIMIT_NOFILE, &original)
	askApiVersions(t, c, 5*time.Second)
	t.Logf("%d accept failures logged while out of descriptors", logs.count("kafka accept failed"))
}

// max.connections.per.ip.overrides replaces the per-address limit for the
// addresses it names: 127.0.0.2 may have none at all, 127.0.0.1 more than
// the others' one.
func TestConnectionOverridesReplaceThePerAddressLimit(t *testing.T) {
	node := startLimitedNode(t, func(c *Config) {
		c.KafkaMaxConnectionsPerIP = 1
		c.KafkaMaxConnectionsPerIPOverrides = map[netip.Addr]int{netip.MustParseAddr("127.0.0.2"): 0, netip.MustParseAddr("127.0.0.1"): 3}
	}, nil)
	address := node.KafkaAddr()
	refused := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}
	if probe, err := refused.Dial("tcp", address); err != nil {
		t.Skipf("cannot dial from 127.0.0.2 (needs the whole of 127.0.0.0/8 on loopback, as Linux has): %v", err)
	} else {
		probe.Close()
	}
	expectRefused(t, refused, address)
	for range 3 {
		c, err := net.Dial("tcp", address)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		askApiVersions(t, c, 5*time.Second)
	}
	expectRefused(t, &net.Dialer{}, address)
	other := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 3)}}
	c, err := other.Dial("tcp", address)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	askApiVersions(t, c, 5*time.Second)
	expectRefused(t, other, address)
}

func TestParseConnectionOverrides(t *testing.T) {
	resolve := func(host string) ([]netip.Addr, error) {
		if host == "proxy" {
			return []netip.Addr{netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("10.0.0.2")}, nil
		}
		return nil, errors.New("no such host")
	}
	got, err := ParseConnectionOverrides(" 127.0.0.1:5, proxy:100,[::1]:0,::ffff:10.0.0.2:7", resolve)
	if err != nil {
		t.Fatal(err)
	}
	want := map[netip.Addr]int{netip.MustParseAddr("127.0.0.1"): 5, netip.MustParseAddr("10.0.0.1"): 100,
		netip.MustParseAddr("10.0.0.2"): 7, netip.MustParseAddr("::1"): 0}
	if !maps.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for _, bad := range []string{"127.0.0.1", "127.0.0.1:", "127.0.0.1:x", "127.0.0.1:-1", "nowhere:3", ":4"} {
		if _, err := ParseConnectionOverrides(bad, resolve); err == nil {
			t.Errorf("%q: parsed", bad)
		}
	}
}
