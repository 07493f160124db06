package wire

import (
	"fmt"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// AlterConfigs: v0-v2.
//
// Replaces a resource's whole set of configs (a config not named goes
// back to its default, as in Kafka); IncrementalAlterConfigs (API 44)
// changes single configs. Both are decided by the controller
// (controller.AlterConfigs: all or nothing per resource) and answered
// once this broker's metadata shows the change.
//
//   - Resource types: TOPIC (2), and BROKER (4) with an empty name for
//     the cluster-wide defaults. A broker named by id, or any other type,
//     is INVALID_REQUEST with a message saying so.
//   - An unknown topic is UNKNOWN_TOPIC_OR_PARTITION; an unknown or
//     invalid config is INVALID_CONFIG, with a message naming it.
//   - A null value is INVALID_REQUEST (Kafka refuses it too): leaving the
//     config out is how AlterConfigs removes one.
//   - A resource named twice in one request is INVALID_REQUEST for each,
//     as in Kafka: which of the two should win is not defined.
//   - ValidateOnly decides against this broker's image and changes
//     nothing. v2 is flexible.
//   - Rule alter-configs-bounded: a request names at most
//     MaxTopicsPerRequest resources and MaxPartitionsPerRequest configs,
//     else the connection is closed, as for the other admin requests.

func init() { register(33, 0, 2, (*Handler).handleAlterConfigs) }

func (h *Handler) handleAlterConfigs(x *exchange) error {
	request := x.request.(*kmsg.AlterConfigsRequest)
	alters := make([]alterResource, len(request.Resources))
	configs := 0
	for i, resource := range request.Resources {
		configs += len(resource.Configs)
		alter := &alters[i]
		alter.request = controller.AlterConfigsRequest{Resource: metadata.ConfigResource{
			Type: metadata.ConfigResourceType(resource.ResourceType), Name: resource.ResourceName}}
		for _, config := range resource.Configs {
			if config.Value == nil {
				alter.code, alter.message = kerr.InvalidRequest.Code, "config "+config.Name+" has a null value: leave it out to remove it"
				break
			}
			alter.request.Changes = append(alter.request.Changes, controller.ConfigChange{Key: config.Name, Op: controller.ConfigSet, Value: *config.Value})
		}
	}
	if err := h.checkCounts(len(alters), configs); err != nil {
		return err
	}
	response := request.ResponseKind().(*kmsg.AlterConfigsResponse)
	h.alterConfigs(alters, request.ValidateOnly, func() {
		for _, alter := range alters {
			entry := kmsg.NewAlterConfigsResponseResource()
			entry.ResourceType = kmsg.ConfigResourceType(alter.request.Resource.Type)
			entry.ResourceName = alter.request.Resource.Name
			entry.ErrorCode, entry.ErrorMessage = alter.code, alter.errorMessage()
			response.Resources = append(response.Resources, entry)
		}
		x.respond(response)
	})
	return nil
}

// alterResource is one resource of an AlterConfigs or
// IncrementalAlterConfigs: the change, and its answer.
type alterResource struct {
	request controller.AlterConfigsRequest
	code    int16
	message string
}

func (a alterResource) errorMessage() *string {
	if a.code == 0 {
		return nil
	}
	message := a.message
	if message == "" {
		message = controller.CodeName(a.code)
	}
	return &message
}

// alterConfigs refuses the resources named twice, hands every other one
// not yet refused to the Backend, and runs done once all are answered.
func (h *Handler) alterConfigs(alters []alterResource, validateOnly bool, done func()) {
	named := make(map[metadata.ConfigResource]int, len(alters))
	for _, alter := range alters {
		named[alter.request.Resource]++
	}
	awaited := 1 // held while the calls are issued, so a synchronous answer cannot finish early
	finish := func() {
		if awaited--; awaited == 0 {
			done()
		}
	}
	for i := range alters {
		alter := &alters[i]
		if named[alter.request.Resource] > 1 {
			alter.code, alter.message = kerr.InvalidRequest.Code, fmt.Sprintf("%s is named more than once", alter.request.Resource)
		}
		if alter.code != 0 {
			continue
		}
		awaited++
		h.backend.AlterConfigs(alter.request, validateOnly, func(code int16, message string) {
			alter.code, alter.message = code, message
			finish()
		})
	}
	finish()
}
