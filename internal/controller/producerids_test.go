package controller

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/metadata"
)

// Blocks come one after another from the log, to whichever broker asks, and
// an image rebuilt from the same log (a restarted controller) continues
// after the last one: no producer id is ever handed out twice.
func TestAllocateProducerIDsNeverRepeats(t *testing.T) {
	img := metadata.NewImage()
	var log []metadata.Entry
	apply := func(records []metadata.Record) {
		for _, r := range records {
			entry := metadata.Entry{Offset: img.Offset() + 1, Record: r}
			if _, err := img.Apply(entry); err != nil {
				t.Fatal(err)
			}
			log = append(log, entry)
		}
	}
	apply([]metadata.Record{metadata.RegisterBroker{ID: 1, Epoch: 3, Incarnation: "a"}, metadata.RegisterBroker{ID: 2, Epoch: 4, Incarnation: "b"}})
	next := int64(0)
	for i := 0; i < 6; i++ {
		id, epoch := metadata.BrokerID(1+i%2), metadata.BrokerEpoch(3+i%2)
		records, block, code, err := AllocateProducerIDs(img, id, epoch)
		if err != nil || code != 0 || block.FirstProducerID != next || block.Length != ProducerIDBlockSize {
			t.Fatalf("allocation %d: block %+v code %d err %v, want one from %d", i, block, code, err, next)
		}
		next += block.Length
		apply(records)
		if i == 2 {
			restarted := metadata.NewImage()
			for _, entry := range log {
				if _, err := restarted.Apply(entry); err != nil {
					t.Fatal(err)
				}
			}
			img = restarted
		}
	}
	if _, _, code, _ := AllocateProducerIDs(img, 1, 2); code != kerr.StaleBrokerEpoch.Code {
		t.Fatalf("an older incarnation's allocation answered %d", code)
	}
	if _, err := img.Clone().Apply(metadata.Entry{Offset: img.Offset() + 1, Record: metadata.ProducerIDs{BrokerID: 1, BrokerEpoch: 3, NextProducerID: next}}); err == nil {
		t.Fatal("the image accepted a record that hands out ids again")
	}
}
