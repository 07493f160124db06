package main

import (
	"testing"
	"time"
)

// TestPlanResetKeepsTargetsInRange checks each reset kind against the
// partition's bounds, and that an out-of-range target is clamped as Kafka's
// tool clamps it rather than committed as given.
func TestPlanResetKeepsTargetsInRange(t *testing.T) {
	bounds := partitionBounds{committed: 40, logStart: 10, highWatermark: 100, atTime: 55}
	for _, test := range []struct {
		to      resetTo
		want    int64
		clamped bool
	}{
		{resetTo{kind: "earliest"}, 10, false},
		{resetTo{kind: "latest"}, 100, false},
		{resetTo{kind: "datetime"}, 55, false},
		{resetTo{kind: "offset", offset: 70}, 70, false},
		{resetTo{kind: "offset", offset: 5}, 10, true},
		{resetTo{kind: "offset", offset: 500}, 100, true},
		{resetTo{kind: "shift", offset: -10}, 30, false},
		{resetTo{kind: "shift", offset: -35}, 10, true},
		{resetTo{kind: "shift", offset: 90}, 100, true},
	} {
		got, note, err := planReset(test.to, bounds)
		if err != nil || got != test.want || (note != "") != test.clamped {
			t.Errorf("%+v: got %d, note %q, error %v; want %d, clamped %v", test.to, got, note, err, test.want, test.clamped)
		}
	}
	if _, _, err := planReset(resetTo{kind: "shift", offset: 1}, partitionBounds{committed: -1, highWatermark: 9}); err == nil {
		t.Error("a shift without a committed offset was planned; want an error")
	}
}

func TestParseTopicSelection(t *testing.T) {
	selection, err := parseTopicSelection([]string{"orders", "events:2,0"})
	if err != nil {
		t.Fatal(err)
	}
	if partitions, ok := selection["orders"]; !ok || partitions != nil {
		t.Errorf("orders: got %v, %v; want every partition (nil)", partitions, ok)
	}
	if got := selection["events"]; len(got) != 2 || got[0] != 2 || got[1] != 0 {
		t.Errorf("events: got %v, want [2 0]", got)
	}
	for _, bad := range []string{":1", "orders:x", "orders:-1", "orders:"} {
		if _, err := parseTopicSelection([]string{bad}); err == nil {
			t.Errorf("--topic %q was accepted", bad)
		}
	}
}

func TestParseDatetime(t *testing.T) {
	want := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC).UnixMilli()
	for _, text := range []string{"2026-12-03T09:00:00Z", "2026-12-03T10:00:00+01:00", "2026-12-03T09:00:00", "1796288400000"} {
		got, err := parseDatetime(text)
		if err != nil || got != want {
			t.Errorf("%q: got %d, %v; want %d", text, got, err, want)
		}
	}
	if _, err := parseDatetime("yesterday"); err == nil {
		t.Error(`"yesterday" was accepted`)
	}
}

// TestGroupOffsetsResetNeedsOneTarget runs the command: no target, two
// targets, or neither --topic nor --all-topics are usage errors (exit 2)
// before anything is asked of a cluster.
func TestGroupOffsetsResetNeedsOneTarget(t *testing.T) {
	for _, args := range [][]string{
		{"group", "offsets", "reset", "g", "--topic", "t"},
		{"group", "offsets", "reset", "g", "--topic", "t", "--to-earliest", "--to-latest"},
		{"group", "offsets", "reset", "g", "--to-earliest"},
		{"group", "offsets", "reset", "g", "--all-topics", "--topic", "t", "--to-earliest"},
		{"group", "offsets", "reset", "g", "--all-topics", "--to-datetime", "soon"},
	} {
		root := newRootCommand()
		root.SetArgs(append(args, "--bootstrap", "127.0.0.1:1", "--timeout", "100ms"))
		err := root.Execute()
		if _, usage := err.(usageError); !usage {
			t.Errorf("%v: got %v, want a usage error", args, err)
		}
	}
}
