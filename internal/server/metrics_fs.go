package server

import (
	"os"
	"time"

	"github.com/tidelog/tide/internal/disk"
)

// timedSyncFS is a disk.FS whose files time each Sync, for the fsync
// latency histogram. Everything else passes through; a real file stays a
// disk.OSFile, so sendfile still finds its descriptor.
type timedSyncFS struct {
	disk.FS
	observe func(seconds float64)
}

func (t timedSyncFS) Create(name string) (disk.File, error) { return t.wrap(t.FS.Create(name)) }
func (t timedSyncFS) Open(name string) (disk.File, error)   { return t.wrap(t.FS.Open(name)) }

func (t timedSyncFS) wrap(file disk.File, err error) (disk.File, error) {
	if err != nil {
		return nil, err
	}
	timed := timedSyncFile{File: file, observe: t.observe}
	if real, ok := file.(disk.OSFile); ok {
		return timedSyncOSFile{timedSyncFile: timed, real: real}, nil
	}
	return timed, nil
}

type timedSyncFile struct {
	disk.File
	observe func(seconds float64)
}

func (f timedSyncFile) Sync() error {
	started := time.Now()
	err := f.File.Sync()
	f.observe(time.Since(started).Seconds())
	return err
}

type timedSyncOSFile struct {
	timedSyncFile
	real disk.OSFile
}

func (f timedSyncOSFile) OSFile() *os.File { return f.real.OSFile() }
