package group

import "testing"

// TestPartitionForMatchesJava checks PartitionFor against values printed
// by a JVM (String.hashCode, then Utils.abs and % 50 and % 7), including
// non-ASCII ids, one outside the BMP (a surrogate pair) and one whose hash
// is Integer.MIN_VALUE, which Utils.abs maps to 0.
func TestPartitionForMatchesJava(t *testing.T) {
	for _, test := range []struct {
		group     string
		of50, of7 int32
	}{
		{"", 0, 0},
		{"a", 47, 6},
		{"my-group", 12, 1},
		{"console-consumer-12345", 6, 6},
		{"groupé", 6, 0},
		{"グループ", 20, 6},
		{"g😀", 32, 5},
		{"polygenelubricants", 0, 0},
		{"Aa", 12, 5},
		{"BB", 12, 5},
		{"zzzzzzzzzzzz", 42, 3},
	} {
		if got := PartitionFor(test.group, 50); got != test.of50 {
			t.Errorf("PartitionFor(%q, 50) = %d, Java says %d", test.group, got, test.of50)
		}
		if got := PartitionFor(test.group, 7); got != test.of7 {
			t.Errorf("PartitionFor(%q, 7) = %d, Java says %d", test.group, got, test.of7)
		}
	}
	if got := PartitionFor("x", 0); got != 0 {
		t.Errorf("PartitionFor with no partitions = %d", got)
	}
}
