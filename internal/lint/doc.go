// Package lint holds tests that enforce tide's architecture: which packages
// are pure, and who may switch a protocol rule off. It has no code of its
// own.
package lint
