// Package lint holds tests that enforce tide's architecture: which packages
// are pure (no I/O, clock, goroutines or randomness of their own), which
// are runtime-free (the same, with storage allowed through internal/disk
// and internal/commitlog), that neither imports a runtime, and who may
// switch a protocol rule off; each check is itself tested on planted
// violations. It has no code of its own. docs/architecture.md lists the
// tiers.
package lint
