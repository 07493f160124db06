package wire

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestInitProducerID(t *testing.T) {
	for _, version := range testVersions(t, 22) {
		h := newTestHandler(t, newFakeBackend())
		request := kmsg.NewPtrInitProducerIDRequest()
		request.Version = version
		response := roundTrip(t, h, request).(*kmsg.InitProducerIDResponse)
		if response.ErrorCode != 0 || response.ProducerID != 1001 || response.ProducerEpoch != 0 {
			t.Fatalf("v%d: %+v", version, response)
		}
		if version >= 3 {
			request.ProducerID, request.ProducerEpoch = 1001, 0
			bumped := roundTrip(t, h, request).(*kmsg.InitProducerIDResponse)
			if bumped.ErrorCode != 0 || bumped.ProducerID != 1001 || bumped.ProducerEpoch != 1 {
				t.Fatalf("v%d: bump answered %+v", version, bumped)
			}
		}
	}
}

func TestInitProducerIDRefusals(t *testing.T) {
	h := newTestHandler(t, newFakeBackend())
	for _, c := range []struct {
		version       int16
		transactional *string
		id            int64
		epoch         int16
		want          int16
	}{
		{0, kmsg.StringPtr("txn"), -1, -1, kerr.TransactionalIDAuthorizationFailed.Code},
		{4, kmsg.StringPtr("txn"), -1, -1, kerr.TransactionalIDAuthorizationFailed.Code},
		{2, kmsg.StringPtr(""), -1, -1, kerr.InvalidRequest.Code},
		{3, nil, 1001, -1, kerr.InvalidRequest.Code},
		{4, nil, -1, 3, kerr.InvalidRequest.Code},
	} {
		request := kmsg.NewPtrInitProducerIDRequest()
		request.Version, request.TransactionalID, request.ProducerID, request.ProducerEpoch = c.version, c.transactional, c.id, c.epoch
		response := roundTrip(t, h, request).(*kmsg.InitProducerIDResponse)
		if response.ErrorCode != c.want || response.ProducerID != -1 || response.ProducerEpoch != -1 {
			t.Fatalf("%+v: answered %+v", c, response)
		}
	}
}
