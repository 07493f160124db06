package server

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Defaults for sampled logs: a line per event for the first few, then
// silence with a count, so a client that sends garbage or reconnects in a
// loop cannot flood the log (and the disk under it) with one line per try.
const (
	defaultLogSampleLines    = 10
	defaultLogSampleInterval = time.Minute
)

// sampledLog writes one kind of event (a refused request, a refused
// connection, a failed accept) at most lines times per interval; the
// events it holds back are counted, and the count ("suppressed") goes out
// with the next line it writes.
type sampledLog struct {
	log      *slog.Logger
	level    slog.Level
	message  string
	lines    int
	interval time.Duration
	// now is the clock, time.Now outside tests.
	now func() time.Time

	mu          sync.Mutex
	windowStart time.Time
	written     int
	suppressed  int
}

func newSampledLog(log *slog.Logger, level slog.Level, message string) *sampledLog {
	return &sampledLog{log: log, level: level, message: message, lines: defaultLogSampleLines,
		interval: defaultLogSampleInterval, now: time.Now}
}

// Log writes the event, or counts it when this interval's lines are spent.
func (l *sampledLog) Log(args ...any) {
	l.mu.Lock()
	now := l.now()
	if now.Sub(l.windowStart) >= l.interval {
		l.windowStart, l.written = now, 0
	}
	if l.written >= l.lines {
		l.suppressed++
		l.mu.Unlock()
		return
	}
	l.written++
	suppressed := l.suppressed
	l.suppressed = 0
	l.mu.Unlock()
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	l.log.Log(context.Background(), l.level, l.message, args...)
}

// raftLogger sends raft's log to slog: its info lines (elections, terms)
// at debug, its warnings and errors as they are.
type raftLogger struct{ log *slog.Logger }

func (l raftLogger) Debug(v ...any)              { l.log.Debug(fmt.Sprint(v...), "from", "raft") }
func (l raftLogger) Debugf(f string, v ...any)   { l.log.Debug(fmt.Sprintf(f, v...), "from", "raft") }
func (l raftLogger) Info(v ...any)               { l.log.Debug(fmt.Sprint(v...), "from", "raft") }
func (l raftLogger) Infof(f string, v ...any)    { l.log.Debug(fmt.Sprintf(f, v...), "from", "raft") }
func (l raftLogger) Warning(v ...any)            { l.log.Warn(fmt.Sprint(v...), "from", "raft") }
func (l raftLogger) Warningf(f string, v ...any) { l.log.Warn(fmt.Sprintf(f, v...), "from", "raft") }
func (l raftLogger) Error(v ...any)              { l.log.Error(fmt.Sprint(v...), "from", "raft") }
func (l raftLogger) Errorf(f string, v ...any)   { l.log.Error(fmt.Sprintf(f, v...), "from", "raft") }
func (l raftLogger) Fatal(v ...any)              { panic(fmt.Sprint(v...)) }
func (l raftLogger) Fatalf(f string, v ...any)   { panic(fmt.Sprintf(f, v...)) }
func (l raftLogger) Panic(v ...any)              { panic(fmt.Sprint(v...)) }
func (l raftLogger) Panicf(f string, v ...any)   { panic(fmt.Sprintf(f, v...)) }
