package wire

import (
	"regexp"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ApiVersions: v0-v3.
//
// Every client's first request on a connection: it learns the served range
// of each API key and picks, per key, the highest version both sides know.
// The answer lists exactly the registered handlers (register, versions.go).
//
//   - A version above v3 gets a v0-format UNSUPPORTED_VERSION answer that
//     still lists the ranges (decode, handler.go), so a client retries with
//     a version it sees listed instead of losing the connection (KIP-511;
//     librdkafka and kgo both downgrade this way).
//   - The response header is always v0, even at the flexible v3 (KIP-511):
//     a client cannot know the broker's header versions before this answer.
//   - v3+ carries ClientSoftwareName and ClientSoftwareVersion, which Kafka
//     checks against [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])? and answers
//     INVALID_REQUEST when they do not match.
//   - No features (KIP-584) are advertised: tide has no transactions
//     (transaction.version) and no KIP-848 groups (group.version).
//   - v4 (Kafka 4.0) is not served yet: a client that sends it gets the
//     v0 answer and retries with v3.

const apiVersionsKey = 18

func init() { register(apiVersionsKey, 0, 3, (*Handler).handleApiVersions) }

func (h *Handler) handleApiVersions(x *exchange) error {
	request := x.request.(*kmsg.ApiVersionsRequest)
	response := request.ResponseKind().(*kmsg.ApiVersionsResponse)
	if request.Version >= 3 && (!validSoftwareField(request.ClientSoftwareName) || !validSoftwareField(request.ClientSoftwareVersion)) {
		response.ErrorCode = kerr.InvalidRequest.Code
	}
	// Kafka lists the keys even with INVALID_REQUEST, so the client can
	// still log what the broker serves.
	response.ApiKeys = servedVersions()
	x.respond(response)
	return nil
}

// unsupportedAPIVersions is the answer to an ApiVersions request above the
// served range: v0, UNSUPPORTED_VERSION, and the ranges.
func unsupportedAPIVersions() *kmsg.ApiVersionsResponse {
	response := kmsg.NewPtrApiVersionsResponse()
	response.Version = 0
	response.ErrorCode = kerr.UnsupportedVersion.Code
	response.ApiKeys = servedVersions()
	return response
}

// softwareField is Kafka's pattern for ClientSoftwareName and
// ClientSoftwareVersion (ApiVersionsRequest.isValid).
var softwareField = regexp.MustCompile(`^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$`)

// validSoftwareField reports whether a client software name or version
// matches softwareField.
func validSoftwareField(s string) bool { return softwareField.MatchString(s) }
