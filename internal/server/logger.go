package server

import (
	"fmt"
	"log/slog"
)

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
