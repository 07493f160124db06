package server

import (
	"testing"

	"github.com/tidelog/tide/internal/replica"
)

// A fetch response stays within the fetch's MaxBytes, except that the
// first partition with records keeps them whatever their size (KIP-74).
func TestLimitFetchBytes(t *testing.T) {
	answers := func(sizes ...int) []replica.FetchResponse {
		list := make([]replica.FetchResponse, len(sizes))
		for i, size := range sizes {
			if size > 0 {
				list[i].Records = make([]byte, size)
			}
		}
		return list
	}
	for _, test := range []struct {
		sizes    []int
		maxBytes int32
		want     []int
	}{
		{[]int{10, 10, 10}, 25, []int{10, 10, 0}},
		{[]int{0, 50, 10}, 25, []int{0, 50, 0}},
		{[]int{5, 30, 5}, 25, []int{5, 0, 5}},
		{[]int{10, 10}, 0, []int{10, 0}},
	} {
		got := answers(test.sizes...)
		limitFetchBytes(got, test.maxBytes)
		for i, answer := range got {
			if len(answer.Records) != test.want[i] {
				t.Errorf("sizes %v, max %d: partition %d keeps %d bytes, want %d", test.sizes, test.maxBytes, i, len(answer.Records), test.want[i])
			}
		}
	}
}
