package wire

import (
	"errors"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

func TestApiVersionsListsServedRanges(t *testing.T) {
	h := newTestHandler(t, newFakeBackend())
	for _, version := range testVersions(t, apiVersionsKey) {
		request := kmsg.NewPtrApiVersionsRequest()
		request.Version = version
		request.ClientSoftwareName, request.ClientSoftwareVersion = "kgo", "1.0.0"
		response := roundTrip(t, h, request).(*kmsg.ApiVersionsResponse)
		if response.ErrorCode != 0 {
			t.Fatalf("v%d: error %d", version, response.ErrorCode)
		}
		checkServedList(t, response.ApiKeys)
	}
}

func checkServedList(t *testing.T, keys []kmsg.ApiVersionsResponseApiKey) {
	t.Helper()
	served := ServedVersions()
	if len(keys) != len(served) {
		t.Fatalf("%d keys listed, %d served", len(keys), len(served))
	}
	for i, key := range keys {
		if i > 0 && keys[i-1].ApiKey >= key.ApiKey {
			t.Fatalf("keys not in ascending order: %d after %d", key.ApiKey, keys[i-1].ApiKey)
		}
		if want := served[key.ApiKey]; want != [2]int16{key.MinVersion, key.MaxVersion} {
			t.Fatalf("key %d listed v%d-v%d, served %v", key.ApiKey, key.MinVersion, key.MaxVersion, want)
		}
	}
}

// TestApiVersionsAboveRangeAnswersV0 is the negotiation: a client sends its
// newest ApiVersions and must get a v0 answer it can read, with
// UNSUPPORTED_VERSION and the served ranges, never a closed connection.
func TestApiVersionsAboveRangeAnswersV0(t *testing.T) {
	h := newTestHandler(t, newFakeBackend())
	served, _ := lookup(apiVersionsKey)
	for _, version := range []int16{served.max + 1, kmsg.NewPtrApiVersionsRequest().MaxVersion(), 1000, -1} {
		request := kmsg.NewPtrApiVersionsRequest()
		request.Version = min(version, request.MaxVersion())
		raw := encodeRequest(request, testCorrelationID)
		raw[2], raw[3] = byte(uint16(version)>>8), byte(version) // any version, even one kmsg cannot encode
		response, err := call(t, h, raw)
		if err != nil {
			t.Fatalf("v%d: %v", version, err)
		}
		v0 := kmsg.NewPtrApiVersionsResponse()
		v0.Version = 0
		decodeResponse(t, response, testCorrelationID, v0)
		if v0.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Fatalf("v%d: error %d, want UNSUPPORTED_VERSION", version, v0.ErrorCode)
		}
		checkServedList(t, v0.ApiKeys)
	}
}

func TestApiVersionsRejectsBadSoftwareName(t *testing.T) {
	h := newTestHandler(t, newFakeBackend())
	for _, name := range []string{"", "-kgo", "kgo.", "k g o"} {
		request := kmsg.NewPtrApiVersionsRequest()
		request.Version = 3
		request.ClientSoftwareName, request.ClientSoftwareVersion = name, "1.0"
		response := roundTrip(t, h, request).(*kmsg.ApiVersionsResponse)
		if response.ErrorCode != kerr.InvalidRequest.Code {
			t.Fatalf("name %q: error %d, want INVALID_REQUEST", name, response.ErrorCode)
		}
	}
}

func TestRequestsThatCloseTheConnection(t *testing.T) {
	h := newTestHandler(t, newFakeBackend())
	metadataV1 := kmsg.NewPtrMetadataRequest()
	metadataV1.Version = 1
	valid := encodeRequest(metadataV1, 1)
	unserved := append([]byte{0, 93}, valid[2:]...)     // a key kmsg knows that tide does not serve
	unknownKey := append([]byte{0x7f, 0}, valid[2:]...) // a key nobody knows
	wrongVersion := append([]byte{0, 3, 0x7f, 0}, valid[4:]...)
	tooLarge := make([]byte, DefaultMaxRequestBytes+1)
	copy(tooLarge, valid)
	for name, c := range map[string]struct {
		request []byte
		want    error
	}{
		"short header":    {valid[:5], ErrMalformedRequest},
		"unknown key":     {unknownKey, ErrUnknownAPIKey},
		"unserved key":    {unserved, ErrUnknownAPIKey},
		"version":         {wrongVersion, ErrUnsupportedVersion},
		"truncated body":  {valid[:len(valid)-1], ErrMalformedRequest},
		"too large":       {tooLarge, ErrRequestTooLarge},
		"client id short": {valid[:9], ErrMalformedRequest},
	} {
		_, err := call(t, h, c.request)
		var requestError *RequestError
		if !errors.Is(err, c.want) || !errors.As(err, &requestError) {
			t.Errorf("%s: %v, want a *RequestError wrapping %v", name, err, c.want)
			continue
		}
		if len(c.request) >= 8 && requestError.Header.CorrelationID != 1 {
			t.Errorf("%s: header %+v, want correlation id 1", name, requestError.Header)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	if err := testConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	for _, change := range []func(*Config){
		func(c *Config) { c.MaxRequestBytes = 4 },
		func(c *Config) { c.MaxTopicsPerRequest = 0 },
		func(c *Config) { c.MaxPartitionsPerRequest = c.MaxTopicsPerRequest - 1 },
		func(c *Config) { c.Tick = 0 },
	} {
		config := testConfig()
		change(&config)
		if _, err := New(config, newFakeBackend()); err == nil {
			t.Errorf("%+v accepted", config)
		}
	}
}
