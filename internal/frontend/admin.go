package frontend

import (
	"maps"
	"slices"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/broker"
	"github.com/tidelog/tide/internal/controller"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
	"github.com/tidelog/tide/internal/rules"
	"github.com/tidelog/tide/internal/wire"
)

// Controller requests from Kafka clients (CreateTopics, CreatePartitions,
// DeleteTopics, ElectLeaders, AlterPartitionReassignments) are forwarded to the active controller, as a KRaft broker
// forwards them (KIP-590): locally when this node is it, else over the link
// to it. Their request ids have the top bit set, apart from the
// lifecycle's, so the answers find their way back here.
const kafkaCallBit = uint64(1) << 63

// Timings of forwarded requests, in ticks.
const (
	// controllerRetryTicks is how long a request that met NOT_CONTROLLER,
	// or found no link to the controller, waits before it is sent again.
	controllerRetryTicks = 10
	// defaultCallTimeoutTicks bounds a request whose client gave no
	// timeout (0 or less): 30 s at the default tick, as Kafka's admin
	// clients default to.
	defaultCallTimeoutTicks = 3000
)

// controllerCall is one forwarded request awaiting its answer. resendAt is
// when to send it again, or -1 while it is out: only NOT_CONTROLLER (the
// request was not carried out) or a missing link sends it again, so a
// CreateTopic is never decided twice.
type controllerCall struct {
	request  quorum.Request
	expires  int64
	resendAt int64
	done     func(quorum.Answer)
}

// visibleWait holds a successful answer until this broker's metadata image
// shows what the controller committed: a client that created a topic
// produces to it next, and must find it in this broker's Metadata.
type visibleWait struct {
	expires int64
	visible func(*metadata.Image) bool
	done    func()
}

// activeController is where controller requests go: the runtime's hint
// (this node when it is the active controller, else the raft leader its
// controller knows of), else where the lifecycle sends its own.
func (fe *FrontEnd) activeController() metadata.BrokerID {
	if fe.controllerHint != metadata.NoBroker {
		return fe.controllerHint
	}
	return fe.lifecycle.Controller()
}

// callController forwards request; done gets the answer, or one with
// REQUEST_TIMED_OUT after timeoutTicks.
func (b *backend) callController(request quorum.Request, timeoutTicks int64, done func(quorum.Answer)) {
	if timeoutTicks <= 0 {
		timeoutTicks = defaultCallTimeoutTicks
	}
	b.nextCall++
	request.ID, request.From = kafkaCallBit|b.nextCall, b.config.ID
	call := &controllerCall{request: request, expires: b.now + timeoutTicks, done: done}
	b.calls[request.ID] = call
	b.sendCall(call)
}

// sendCall hands a forwarded request out to the active controller; the
// runtime reports it unsent (ControllerUnsent) when it has no way there.
func (b *backend) sendCall(call *controllerCall) {
	call.resendAt = -1
	b.controllerOut = append(b.controllerOut, broker.Outgoing{To: b.frontEnd().activeController(), Request: call.request})
}

// handleForwardedAnswer takes an answer to a forwarded request and reports
// whether it was one.
func (fe *FrontEnd) handleForwardedAnswer(answer quorum.Answer) bool {
	b := (*backend)(fe)
	if answer.ID&kafkaCallBit == 0 {
		return false
	}
	call, ok := b.calls[answer.ID]
	if !ok {
		return true // timed out already, or a duplicate
	}
	if answer.ErrorCode == kerr.NotController.Code {
		call.resendAt = b.now + controllerRetryTicks
		return true
	}
	delete(b.calls, answer.ID)
	call.done(answer)
	return true
}

// tickControllerCalls resends and times out forwarded requests, in request
// order, and answers the successes that became visible.
func (fe *FrontEnd) tickControllerCalls() {
	b := (*backend)(fe)
	ids := make([]uint64, 0, len(b.calls))
	for id := range b.calls {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		call := b.calls[id]
		switch {
		case b.now >= call.expires:
			delete(b.calls, id)
			call.done(quorum.Answer{ID: id, ErrorCode: kerr.RequestTimedOut.Code})
		case call.resendAt >= 0 && b.now >= call.resendAt:
			b.sendCall(call)
		}
	}
	kept := b.visible[:0]
	for _, wait := range b.visible {
		node := b.node()
		if b.now >= wait.expires || (node != nil && wait.visible(node.Image())) {
			wait.done()
			continue
		}
		kept = append(kept, wait)
	}
	clear(b.visible[len(kept):])
	b.visible = kept
}

// whenVisible runs done once this broker's image satisfies visible, or at
// expires, whichever is first.
func (b *backend) whenVisible(expires int64, visible func(*metadata.Image) bool, done func()) {
	// The change is committed: fetch it now rather than at the next
	// heartbeat, half a second away by default.
	b.lifecycle.FetchMetadataSoon()
	b.visible = append(b.visible, &visibleWait{expires: expires, visible: visible, done: done})
}

// CreateTopics forwards one CreateTopic per topic; ValidateOnly runs the
// controller's own decision against this broker's image and creates
// nothing.
func (b *backend) CreateTopics(request wire.CreateTopicsRequest, done func([]int16)) {
	if request.ValidateOnly {
		codes := make([]int16, len(request.Topics))
		for i, topic := range request.Topics {
			codes[i] = b.validateTopic(topic)
		}
		done(codes)
		return
	}
	requests := make([]quorum.Request, len(request.Topics))
	visible := make([]func(*metadata.Image) bool, len(request.Topics))
	for i, topic := range request.Topics {
		requests[i] = quorum.Request{CreateTopic: &topic}
		visible[i] = func(img *metadata.Image) bool { _, ok := img.Topic(topic.Name); return ok }
	}
	b.forwardEach(requests, visible, request.TimeoutTicks, done)
}

// forwardEach sends the controller one request per item and answers one
// code per item, in order, once every item has failed or, having
// succeeded, is visible in this broker's metadata (visible[i]) or its time
// is up.
func (b *backend) forwardEach(requests []quorum.Request, visible []func(*metadata.Image) bool, timeoutTicks int64, done func([]int16)) {
	codes := make([]int16, len(requests))
	awaited := len(requests)
	if awaited == 0 {
		done(codes)
		return
	}
	expires := b.now + max(timeoutTicks, defaultCallTimeoutTicks)
	for i := range requests {
		b.callController(requests[i], timeoutTicks, func(answer quorum.Answer) {
			codes[i] = answer.ErrorCode
			finish := func() {
				if awaited--; awaited == 0 {
					done(codes)
				}
			}
			if answer.ErrorCode != 0 {
				finish()
				return
			}
			b.whenVisible(expires, visible[i], finish)
		})
	}
}

func (b *backend) validateTopic(topic controller.CreateTopicRequest) int16 {
	node := b.node()
	if node == nil {
		return kerr.NotController.Code // retriable: the broker has no metadata yet
	}
	_, code, err := controller.CreateTopic(node.Image(), topic, validationTopicIDs{})
	if err != nil {
		return kerr.UnknownServerError.Code
	}
	return code
}

// validationTopicIDs is the random source of a ValidateOnly CreateTopics:
// the id drawn is never used, so any usable one will do, and the front end
// keeps no randomness of its own.
type validationTopicIDs struct{}

func (validationTopicIDs) Read(b []byte) (int, error) {
	for i := range b {
		b[i] = 0x5a
	}
	return len(b), nil
}

// CreatePartitions forwards one CreatePartitions per topic, each answered
// once this broker's image has the topic at the new count; ValidateOnly
// runs the controller's own decision against this broker's image and adds
// nothing.
func (b *backend) CreatePartitions(request wire.CreatePartitionsRequest, done func([]int16)) {
	if request.ValidateOnly {
		codes := make([]int16, len(request.Topics))
		for i, grow := range request.Topics {
			codes[i] = b.validatePartitions(grow)
		}
		done(codes)
		return
	}
	requests := make([]quorum.Request, len(request.Topics))
	visible := make([]func(*metadata.Image) bool, len(request.Topics))
	for i, grow := range request.Topics {
		requests[i] = quorum.Request{CreatePartitions: &grow}
		visible[i] = func(img *metadata.Image) bool {
			topic, ok := img.Topic(grow.Topic)
			return ok && len(topic.Partitions) >= grow.Count
		}
	}
	b.forwardEach(requests, visible, request.TimeoutTicks, done)
}

func (b *backend) validatePartitions(grow controller.CreatePartitionsRequest) int16 {
	node := b.node()
	if node == nil {
		return kerr.NotController.Code // retriable: the broker has no metadata yet
	}
	_, code, err := controller.CreatePartitions(node.Image(), grow)
	if err != nil {
		return kerr.UnknownServerError.Code
	}
	return code
}

// MaxAutoCreatesInFlight bounds the topics one broker is having created for
// Metadata requests at a time (auto.create.topics.enable): a client asking
// for many unknown names cannot fill the controller's queue. Past it a
// name is not forwarded; it stays LEADER_NOT_AVAILABLE, and the client's
// next Metadata asks again.
const MaxAutoCreatesInFlight = 64

// AutoCreateTopic forwards the creation of a topic a Metadata request named
// to the controller, as a KRaft broker's AutoTopicCreationManager does,
// once per name at a time (rule one-auto-create-per-name: every producer
// of a new topic refreshes its metadata every few milliseconds, and each
// refresh would otherwise be another CreateTopic). Its answer is not
// awaited by anyone: TOPIC_ALREADY_EXISTS (a race with another broker or
// client) is as good as success, and a failure is retried by the client's
// next Metadata.
func (b *backend) AutoCreateTopic(topic controller.CreateTopicRequest) {
	if b.autoCreating[topic.Name] || len(b.autoCreating) >= MaxAutoCreatesInFlight {
		return
	}
	b.autoCreating[topic.Name] = true
	b.callController(quorum.Request{CreateTopic: &topic}, defaultCallTimeoutTicks, func(quorum.Answer) {
		delete(b.autoCreating, topic.Name)
	})
}

// DeleteTopics forwards one DeleteTopic per topic, named by name or by id;
// each is answered once this broker no longer sees that topic.
func (b *backend) DeleteTopics(topics []wire.TopicRef, timeoutTicks int64, done func([]int16)) {
	requests := make([]quorum.Request, len(topics))
	visible := make([]func(*metadata.Image) bool, len(topics))
	for i, topic := range topics {
		requests[i] = quorum.Request{DeleteTopic: &quorum.DeleteTopicRequest{Name: topic.Name, ID: topic.ID}}
		visible[i] = func(img *metadata.Image) bool {
			if !topic.ID.IsZero() {
				_, ok := img.TopicByID(topic.ID)
				return !ok
			}
			_, ok := img.Topic(topic.Name)
			return !ok
		}
	}
	b.forwardEach(requests, visible, timeoutTicks, done)
}

// ElectLeaders forwards one ElectPreferred for all the partitions. wire
// never asks for none, which to the controller would mean every partition.
func (b *backend) ElectLeaders(partitions []metadata.TopicPartition, timeoutTicks int64, done func(controller.ElectLeadersResponse)) {
	b.callController(quorum.Request{ElectPreferred: &quorum.ElectPreferredRequest{Partitions: partitions}}, timeoutTicks, func(answer quorum.Answer) {
		if answer.ElectPreferred == nil || answer.ErrorCode != 0 {
			done(controller.ElectLeadersResponse{ErrorCode: answer.ErrorCode})
			return
		}
		done(*answer.ElectPreferred)
	})
}

// AlterConfigs forwards one config change to the active controller and
// answers once this broker's image shows the resource's configs as the
// controller decided them; validateOnly runs the controller's decision
// against this broker's image and changes nothing.
func (b *backend) AlterConfigs(request controller.AlterConfigsRequest, validateOnly bool, done func(int16, string)) {
	if validateOnly {
		node := b.node()
		if node == nil {
			done(kerr.NotController.Code, "the broker has no metadata yet")
			return
		}
		// Every rule on: a production broker has no other rules.
		_, code, message, err := controller.AlterConfigs(node.Image(), request, rules.Rules{})
		if err != nil {
			code, message = kerr.UnknownServerError.Code, err.Error()
		}
		done(code, message)
		return
	}
	b.callController(quorum.Request{AlterConfigs: &request}, 0, func(answer quorum.Answer) {
		if answer.ErrorCode != 0 || answer.AlterConfigs == nil {
			message := ""
			if answer.AlterConfigs != nil {
				message = answer.AlterConfigs.Message
			}
			done(answer.ErrorCode, message)
			return
		}
		configs := answer.AlterConfigs.Configs
		visible := func(img *metadata.Image) bool { return maps.Equal(resourceConfigs(img, request.Resource), configs) }
		b.whenVisible(b.now+defaultCallTimeoutTicks, visible, func() { done(0, "") })
	})
}

// resourceConfigs is a resource's configs as img has them.
func resourceConfigs(img *metadata.Image, resource metadata.ConfigResource) map[string]string {
	if resource.Type == metadata.ConfigTopic {
		return img.TopicConfigs(resource.Name)
	}
	return img.BrokerDefaultConfigs()
}
