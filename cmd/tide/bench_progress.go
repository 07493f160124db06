package main

import (
	"fmt"
	"io"
	"time"
)

// benchProgressInterval is how often the progress line is rewritten.
const benchProgressInterval = time.Second

// benchProgress rewrites one line on a terminal once a second while a
// phase runs: the phase, its seconds and records so far, and their rate.
// A nil *benchProgress shows nothing, which is what a run not on a
// terminal gets. One phase shows at a time.
type benchProgress struct {
	out     io.Writer
	stopped chan struct{}
	done    chan struct{}
}

// begin shows the phase label, counting what count answers (it is called
// from the progress goroutine, so it must be safe for concurrent use).
func (p *benchProgress) begin(label string, count func() int64) {
	if p == nil {
		return
	}
	p.stopped, p.done = make(chan struct{}), make(chan struct{})
	started := time.Now()
	go func() {
		defer close(p.done)
		ticker := time.NewTicker(benchProgressInterval)
		defer ticker.Stop()
		for {
			select {
			case <-p.stopped:
				fmt.Fprint(p.out, "\r\x1b[K") // clear the line for the figures
				return
			case <-ticker.C:
				elapsed := time.Since(started)
				records := count()
				fmt.Fprintf(p.out, "\r\x1b[K%s: %.0fs, %d records, %.0f records/s", label, elapsed.Seconds(), records,
					float64(records)/elapsed.Seconds())
			}
		}
	}()
}

// end stops the line of the phase begin started, and clears it.
func (p *benchProgress) end() {
	if p == nil || p.stopped == nil {
		return
	}
	close(p.stopped)
	<-p.done
	p.stopped = nil
}
