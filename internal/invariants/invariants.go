// Package invariants says whether expensive whole-structure checks are on.
// Cheap assertions stay on in production; checks that walk a whole structure
// (every segment of a log, every entry of a cache) run only in builds with
// the "invariants" tag, which CI's race run and the simulator use:
//
//	go test -tags invariants ./...
package invariants
