// Package runtime reaches up into a runtime, which no runtime-free package
// may do: the answer goes back down as a value instead.
package runtime

import "github.com/tidelog/tide/internal/server"

var _ = server.Config{}
