// Package impure breaks every rule of a pure package, so that the purity
// check can be shown to catch each one.
package impure

import (
	"os"
	"sync"
	"time"

	"github.com/example/io"
	"github.com/tidelog/tide/internal/disk"
)

var mu sync.Mutex

func Everything() {
	go func() {}()
	_ = time.Now()
	_ = os.Args
	_ = disk.ErrNotExist
	io.Write()
}
