package sim

import (
	"crypto/rand"
	"io"
	mrand "math/rand/v2"
	"sync"
)

// etcd/raft draws its election jitter from crypto/rand.Reader, a package
// variable it reads at every draw. To keep a run a pure function of its
// seed, the simulator installs one Reader for the process that serves
// whichever world is inside a raft call, from that world's seeded source;
// raft calls of concurrent worlds (tide sim runs seeds on every core) take
// turns. Outside raft calls the Reader is the real one.
var raftRandom struct {
	sync.Mutex
	install sync.Once
	real    io.Reader
	current io.Reader
}

type dispatchReader struct{}

// Read serves the world inside a raft call, or the real source. In a
// simulator process only raft reads crypto/rand, and only inside withRaft,
// so current is read by the goroutine holding the lock.
func (dispatchReader) Read(b []byte) (int, error) {
	if raftRandom.current != nil {
		return raftRandom.current.Read(b)
	}
	return raftRandom.real.Read(b)
}

// withRaft runs f, a call into this world's raft nodes, with raft's
// randomness drawn from the world's source.
func (w *world) withRaft(f func()) {
	raftRandom.install.Do(func() {
		raftRandom.real = rand.Reader
		rand.Reader = dispatchReader{}
	})
	raftRandom.Lock()
	defer raftRandom.Unlock()
	raftRandom.current = w.raftSource
	defer func() { raftRandom.current = nil }()
	f()
}

func newRaftSource(seed uint64) *mrand.ChaCha8 {
	var key [32]byte
	for i := range 8 {
		key[i] = byte(seed >> (8 * i))
	}
	key[8] = 'r'
	return mrand.NewChaCha8(key)
}

// newTopicIDSource is the seeded source the world's controllers draw topic
// ids from (quorum.Config.Random).
func newTopicIDSource(seed uint64) *mrand.ChaCha8 {
	var key [32]byte
	for i := range 8 {
		key[i] = byte(seed >> (8 * i))
	}
	key[8] = 't'
	return mrand.NewChaCha8(key)
}

// newWireSource is the seeded source of a world's wire handlers' response
// markers (wire.Config.Random).
func newWireSource(seed uint64) *mrand.ChaCha8 {
	var key [32]byte
	for i := range 8 {
		key[i] = byte(seed >> (8 * i))
	}
	key[8] = 'w'
	return mrand.NewChaCha8(key)
}

// newDiskSource is the seeded source of the simulated disks' sync
// latencies (disksync.go), apart from the world's own so that drawing them
// leaves every other draw of a seed where it was.
func newDiskSource(seed uint64) *mrand.ChaCha8 {
	var key [32]byte
	for i := range 8 {
		key[i] = byte(seed >> (8 * i))
	}
	key[8] = 'd'
	return mrand.NewChaCha8(key)
}
