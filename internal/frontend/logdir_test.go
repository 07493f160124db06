package frontend

import (
	"testing"

	"github.com/tidelog/tide/internal/record"
)

// The offset lag is the high watermark less the log end, never negative:
// 0 for a leader with records not yet committed, and for a caught-up
// follower.
func TestOffsetLag(t *testing.T) {
	for _, test := range []struct {
		highWatermark, logEndOffset record.Offset
		want                        int64
	}{
		{0, 0, 0},
		{10, 10, 0},
		{7, 10, 0}, // records above the high watermark: not a lag
		{10, 7, 3}, // a high watermark learned above this log's end
	} {
		if got := offsetLag(test.highWatermark, test.logEndOffset); got != test.want {
			t.Errorf("offsetLag(%d, %d) = %d, want %d", test.highWatermark, test.logEndOffset, got, test.want)
		}
	}
}
