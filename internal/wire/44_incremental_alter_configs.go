package wire

import (
	"fmt"

	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// IncrementalAlterConfigs: v0-v1.
//
// Changes single configs of a resource (KIP-339): SET (0), DELETE (1,
// back to the default), APPEND (2) and SUBTRACT (3) on list configs such
// as cleanup.policy. The rules of AlterConfigs (33_alter_configs.go)
// apply: the resource types, the codes, a resource named twice,
// ValidateOnly and the bounds. In addition:
//
//   - SET, APPEND or SUBTRACT with a null value is INVALID_REQUEST;
//     DELETE ignores the value.
//   - A config changed twice in one resource, or an unknown operation, is
//     INVALID_REQUEST (controller.AlterConfigs).
//   - v1 is flexible.

func init() { register(44, 0, 1, (*Handler).handleIncrementalAlterConfigs) }

func (h *Handler) handleIncrementalAlterConfigs(x *exchange) error {
	request := x.request.(*kmsg.IncrementalAlterConfigsRequest)
	alters := make([]alterResource, len(request.Resources))
	configs := 0
	for i, resource := range request.Resources {
		configs += len(resource.Configs)
		alter := &alters[i]
		alter.request = controller.AlterConfigsRequest{Incremental: true, Resource: metadata.ConfigResource{
			Type: metadata.ConfigResourceType(resource.ResourceType), Name: resource.ResourceName}}
		for _, config := range resource.Configs {
			op := controller.ConfigOp(config.Op)
			change := controller.ConfigChange{Key: config.Name, Op: op}
			switch {
			case config.Value != nil:
				change.Value = *config.Value
			case op != controller.ConfigDelete:
				alter.code, alter.message = kerr.InvalidRequest.Code, fmt.Sprintf("config %s has a null value for operation %d", config.Name, op)
			}
			alter.request.Changes = append(alter.request.Changes, change)
		}
	}
	if err := h.checkCounts(len(alters), configs); err != nil {
		return err
	}
	response := request.ResponseKind().(*kmsg.IncrementalAlterConfigsResponse)
	h.alterConfigs(alters, request.ValidateOnly, func() {
		for _, alter := range alters {
			entry := kmsg.NewIncrementalAlterConfigsResponseResource()
			entry.ResourceType = kmsg.ConfigResourceType(alter.request.Resource.Type)
			entry.ResourceName = alter.request.Resource.Name
			entry.ErrorCode, entry.ErrorMessage = alter.code, alter.errorMessage()
			response.Resources = append(response.Resources, entry)
		}
		x.respond(response)
	})
	return nil
}
