// FaultyFS: an FS wrapper that injects seeded faults, for tests and the
// simulator.
//
// Fault model. FaultyFS adds, on top of whatever the inner FS does:
//
//   - Write fails with EIO, with WriteErrorProbability. With
//     PartialWriteProbability the failing write first appends a random strict
//     prefix of its bytes, as a real write(2) can before the device errors.
//   - Write fails with ENOSPC once SpaceLimitBytes is used up, after appending
//     the bytes that still fit. Space is counted approximately: bytes written
//     through this FS, less what Truncate, Remove, Create and Rename-over
//     visibly free.
//   - Sync fails with EIO, with SyncErrorProbability, without syncing the inner
//     file, so its unsynced bytes stay crashable. After a failed Sync the file
//     handle is poisoned: every later Write, Truncate and Sync on it returns
//     the same error. That is the fsyncgate lesson made loud: Linux may report
//     a writeback error once and then let the next fsync succeed with the data
//     already dropped, so a caller that retries would be told its data is
//     safe. Poisoning turns such a retry into a visible failure instead of a
//     silent loss. Reads keep working.
//   - SyncDir fails with EIO, with SyncDirErrorProbability.
//   - Write and Sync (and SyncDir) take extra time, drawn from WriteLatency and
//     SyncLatency and spent through the Sleep hook (nil: no latency).
//   - Any operation fails once it is triggered by InjectOnce, FailAfter or
//     FailSyncAfter.
//
// Every injected error wraps ErrInjected and the errno (or error) it
// injects. All random draws come from one PCG source seeded from
// FaultConfig.Seed behind a mutex, so a run whose callers are deterministic
// (the simulator) sees the same faults for the same seed.

package disk

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"syscall"
	"time"
)

// ErrInjected is wrapped by every error FaultyFS injects, so that a test can
// tell an injected fault from a real one.
var ErrInjected = errors.New("disk: injected fault")

// Op names an operation of FS or File, for deterministic triggers.
type Op int

// The operations a trigger can target.
const (
	OpCreate Op = iota
	OpOpen
	OpRemove
	OpRename
	OpMkdirAll
	OpList
	OpSyncDir
	OpStat
	OpRead
	OpWrite
	OpTruncate
	OpSync
	opCount
)

var opNames = [opCount]string{
	"create", "open", "remove", "rename", "mkdirall", "list",
	"syncdir", "stat", "read", "write", "truncate", "sync",
}

// String returns the lower-case name of the operation.
func (op Op) String() string {
	if op < 0 || op >= opCount {
		return fmt.Sprintf("Op(%d)", int(op))
	}
	return opNames[op]
}

// Latency is a distribution of added delay: uniform in [Minimum, Maximum],
// except that with SpikeProbability a call takes Spike instead (a stalled
// device).
type Latency struct {
	Minimum          time.Duration
	Maximum          time.Duration
	SpikeProbability float64
	Spike            time.Duration
}

// FaultConfig configures NewFaulty. The zero value injects nothing.
type FaultConfig struct {
	// Seed seeds every random draw.
	Seed int64
	// WriteErrorProbability is the chance that a Write fails with EIO.
	WriteErrorProbability float64
	// PartialWriteProbability is the chance that a failing Write first
	// appends a random strict prefix of its bytes.
	PartialWriteProbability float64
	// SyncErrorProbability is the chance that a File.Sync fails with EIO.
	SyncErrorProbability float64
	// SyncDirErrorProbability is the chance that a SyncDir fails with EIO.
	SyncDirErrorProbability float64
	// SpaceLimitBytes is the space available to writes; zero means no limit.
	SpaceLimitBytes int64
	// Sleep spends injected latency; nil means no latency. The simulator
	// passes a sleep on its virtual clock. It is called without any FaultyFS
	// lock held.
	Sleep func(time.Duration)
	// WriteLatency is added to every Write.
	WriteLatency Latency
	// SyncLatency is added to every Sync and SyncDir.
	SyncLatency Latency
}

// Validate rejects probabilities outside [0, 1], negative sizes and
// durations, and latency ranges with Minimum above Maximum.
func (c FaultConfig) Validate() error {
	probabilities := []struct {
		name  string
		value float64
	}{
		{"WriteErrorProbability", c.WriteErrorProbability},
		{"PartialWriteProbability", c.PartialWriteProbability},
		{"SyncErrorProbability", c.SyncErrorProbability},
		{"SyncDirErrorProbability", c.SyncDirErrorProbability},
		{"WriteLatency.SpikeProbability", c.WriteLatency.SpikeProbability},
		{"SyncLatency.SpikeProbability", c.SyncLatency.SpikeProbability},
	}
	for _, p := range probabilities {
		if !(p.value >= 0 && p.value <= 1) {
			return fmt.Errorf("disk: fault config: %s %v outside [0, 1]", p.name, p.value)
		}
	}
	if c.SpaceLimitBytes < 0 {
		return fmt.Errorf("disk: fault config: negative SpaceLimitBytes %d", c.SpaceLimitBytes)
	}
	if err := c.WriteLatency.validate("WriteLatency"); err != nil {
		return err
	}
	return c.SyncLatency.validate("SyncLatency")
}

func (l Latency) validate(name string) error {
	if l.Minimum < 0 || l.Maximum < l.Minimum || l.Spike < 0 {
		return fmt.Errorf("disk: fault config: bad %s %+v", name, l)
	}
	return nil
}

// injectedError is an injected fault on one operation and path.
type injectedError struct {
	op   Op
	name string
	err  error
}

func (e *injectedError) Error() string {
	return fmt.Sprintf("disk: injected fault: %s %s: %v", e.op, e.name, e.err)
}

func (e *injectedError) Unwrap() []error { return []error{ErrInjected, e.err} }

// trigger fails the call of its operation that comes after remaining
// successful ones.
type trigger struct {
	remaining int
	err       error
}

// FaultyFS wraps an FS and injects faults (see the file comment). It is safe
// for concurrent use.
type FaultyFS struct {
	inner FS
	sleep func(time.Duration)

	mu     sync.Mutex
	config FaultConfig
	random *rand.Rand
	// enabled switches every fault and latency; poisoned files stay
	// poisoned, because their data is already in doubt.
	enabled  bool
	triggers [opCount]*trigger
	// usedBytes approximates the space taken by files written through this
	// FS; see the file comment.
	usedBytes int64
	// injected counts the faults injected so far.
	injected int
}

// NewFaulty wraps inner with fault injection, enabled. It panics if the
// config is invalid (see FaultConfig.Validate), which is a programming error.
func NewFaulty(inner FS, config FaultConfig) *FaultyFS {
	if err := config.Validate(); err != nil {
		panic(err)
	}
	return &FaultyFS{
		inner:   inner,
		sleep:   config.Sleep,
		config:  config,
		random:  rand.New(rand.NewPCG(uint64(config.Seed), pcgStream)),
		enabled: true,
	}
}

// Inner returns the wrapped FS.
func (f *FaultyFS) Inner() FS { return f.inner }

// SetEnabled switches fault injection (random faults, triggers, the space
// limit and latency) on or off. The simulator turns it off to heal the
// disk in its liveness phase.
func (f *FaultyFS) SetEnabled(enabled bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.enabled = enabled
}

// SetSpaceLimit changes SpaceLimitBytes; zero removes the limit.
func (f *FaultyFS) SetSpaceLimit(limitBytes int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.config.SpaceLimitBytes = limitBytes
}

// UsedBytes returns the space counted against SpaceLimitBytes.
func (f *FaultyFS) UsedBytes() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.usedBytes
}

// Injected returns how many faults have been injected so far.
func (f *FaultyFS) Injected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.injected
}

// FailAfter makes the call of op that follows n successful ones fail with
// err (EIO if err is nil), once. It replaces any earlier trigger on op.
// Calls made while injection is disabled do not count.
func (f *FaultyFS) FailAfter(op Op, n int, err error) {
	if op < 0 || op >= opCount || n < 0 {
		panic(fmt.Sprintf("disk: FailAfter(%v, %d)", op, n))
	}
	if err == nil {
		err = syscall.EIO
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.triggers[op] = &trigger{remaining: n, err: err}
}

// InjectOnce makes the next call of op fail with err (EIO if nil).
func (f *FaultyFS) InjectOnce(op Op, err error) { f.FailAfter(op, 0, err) }

// FailSyncAfter makes the File.Sync that follows n successful ones fail
// with EIO, poisoning that file.
func (f *FaultyFS) FailSyncAfter(n int) { f.FailAfter(OpSync, n, syscall.EIO) }

// chance draws a Bernoulli trial. The caller holds f.mu.
func (f *FaultyFS) chance(probability float64) bool {
	return probability > 0 && f.random.Float64() < probability
}

// fault decides whether a call of op on name fails: by trigger first, then
// with the given probability. The caller holds f.mu.
func (f *FaultyFS) fault(op Op, name string, probability float64) error {
	if !f.enabled {
		return nil
	}
	if t := f.triggers[op]; t != nil {
		if t.remaining == 0 {
			f.triggers[op] = nil
			f.injected++
			return &injectedError{op: op, name: name, err: t.err}
		}
		t.remaining--
	}
	if f.chance(probability) {
		f.injected++
		return &injectedError{op: op, name: name, err: syscall.EIO}
	}
	return nil
}

// check runs the triggers of a call with no random fault and no latency.
func (f *FaultyFS) check(op Op, name string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fault(op, name, 0)
}

// delay draws a latency from l. The caller holds f.mu.
func (f *FaultyFS) delay(l Latency) time.Duration {
	if !f.enabled || f.sleep == nil {
		return 0
	}
	if f.chance(l.SpikeProbability) {
		return l.Spike
	}
	if l.Maximum <= l.Minimum {
		return l.Minimum
	}
	return l.Minimum + time.Duration(f.random.Int64N(int64(l.Maximum-l.Minimum)+1))
}

// wait spends a drawn latency, outside f.mu: a virtual sleep may block
// until other goroutines move the clock.
func (f *FaultyFS) wait(latency time.Duration) {
	if latency > 0 {
		f.sleep(latency)
	}
}

// release gives back space freed by shrinking or removing a file.
func (f *FaultyFS) release(freedBytes int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.usedBytes = max(0, f.usedBytes-freedBytes)
}

// sizeOrZero returns the size of name, or zero if it cannot be stat'ed.
func (f *FaultyFS) sizeOrZero(name string) int64 {
	size, err := f.inner.Stat(name)
	if err != nil {
		return 0
	}
	return size
}
