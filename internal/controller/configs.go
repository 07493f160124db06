package controller

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/tidelog/tide/internal/logconfig"
	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/rules"
	"github.com/twmb/franz-go/pkg/kerr"
)

// ConfigOp is one IncrementalAlterConfigs operation (KIP-339).
type ConfigOp int8

const (
	ConfigSet      ConfigOp = 0
	ConfigDelete   ConfigOp = 1
	ConfigAppend   ConfigOp = 2
	ConfigSubtract ConfigOp = 3
)

// ConfigChange is one change to one config of a resource.
type ConfigChange struct {
	Key   string
	Op    ConfigOp
	Value string
}

// AlterConfigsRequest changes one resource's configs. Incremental is
// IncrementalAlterConfigs; otherwise it is AlterConfigs, whose changes are
// all ConfigSet and replace the resource's whole set of configs (a config
// not named is removed, as in Kafka).
type AlterConfigsRequest struct {
	Resource    metadata.ConfigResource
	Changes     []ConfigChange
	Incremental bool
}

// AlterConfigs decides a config change: one config record per config
// whose value changes, or a code and message. Rule alter-whole-or-nothing:
// the resource's resulting set of configs is validated as a whole
// (logconfig) before any record is written, so a request either applies
// every change or none (Kafka's per-resource atomicity).
//
// A change of min.insync.replicas or unclean.leader.election.enable, the
// topic's own or the cluster-wide default a topic inherits, also moves the
// partitions of every topic whose value changes (topicConfigChanges):
// their ELRs and partition epochs (rule min-isr-race) and, when unclean
// election becomes allowed, the leaders of their offline partitions.
//
// Codes: UNKNOWN_TOPIC_OR_PARTITION for a topic that does not exist;
// INVALID_CONFIG for an unknown or invalid config, APPEND or SUBTRACT on
// a config that is not a list, a min.insync.replicas above the
// replication factor of a topic it would apply to, or a broker default
// for a config that is not dynamic; INVALID_REQUEST for an unknown
// operation or a config changed twice. An error is a bug: the decision
// would break an invariant of the image.
func AlterConfigs(img *metadata.Image, request AlterConfigsRequest, in rules.Rules) ([]metadata.Record, int16, string, error) {
	var current map[string]string
	switch request.Resource.Type {
	case metadata.ConfigTopic:
		if _, ok := img.Topic(request.Resource.Name); !ok {
			return nil, kerr.UnknownTopicOrPartition.Code, "unknown topic " + request.Resource.Name, nil
		}
		current = img.TopicConfigs(request.Resource.Name)
	case metadata.ConfigBrokerDefault:
		if request.Resource.Name != "" {
			return nil, kerr.InvalidRequest.Code, "only the cluster-wide broker default (an empty name) is alterable", nil
		}
		current = img.BrokerDefaultConfigs()
	default:
		return nil, kerr.InvalidRequest.Code, fmt.Sprintf("resource type %d has no configs", request.Resource.Type), nil
	}
	next, code, message := changedConfigs(current, request)
	if code != 0 {
		return nil, code, message, nil
	}
	if code, message := validateConfigs(img, request.Resource, next); code != 0 {
		return nil, code, message, nil
	}
	var configRecords []metadata.Record
	for _, key := range slices.Sorted(maps.Keys(current)) {
		if _, kept := next[key]; !kept {
			configRecords = append(configRecords, metadata.ConfigRecord{Resource: request.Resource, Key: key, Delete: true})
		}
	}
	for _, key := range slices.Sorted(maps.Keys(next)) {
		if value, was := current[key]; !was || value != next[key] {
			configRecords = append(configRecords, metadata.ConfigRecord{Resource: request.Resource, Key: key, Value: next[key]})
		}
	}
	if len(configRecords) == 0 {
		return nil, 0, "", nil
	}
	records, err := topicConfigChanges(img, request.Resource, next, configRecords, in)
	return records, 0, "", err
}

// changedConfigs applies the request's changes to a copy of current.
func changedConfigs(current map[string]string, request AlterConfigsRequest) (map[string]string, int16, string) {
	next := map[string]string{}
	if request.Incremental {
		next = maps.Clone(current)
		if next == nil {
			next = map[string]string{}
		}
	}
	seen := map[string]bool{}
	for _, change := range request.Changes {
		if seen[change.Key] {
			return nil, kerr.InvalidRequest.Code, "config " + change.Key + " is changed more than once"
		}
		seen[change.Key] = true
		switch change.Op {
		case ConfigSet:
			next[change.Key] = change.Value
		case ConfigDelete:
			delete(next, change.Key)
		case ConfigAppend, ConfigSubtract:
			if !isList(change.Key) {
				return nil, kerr.InvalidConfig.Code, "config " + change.Key + " is not a list: APPEND and SUBTRACT apply to lists only"
			}
			next[change.Key] = alterList(listValue(current, change.Key), logconfig.ListItems(change.Value), change.Op)
			if next[change.Key] == "" {
				delete(next, change.Key)
			}
		default:
			return nil, kerr.InvalidRequest.Code, fmt.Sprintf("unknown config operation %d", change.Op)
		}
	}
	return next, 0, ""
}

// isList reports whether a topic config or broker default is a List.
func isList(key string) bool {
	config, ok := logconfig.Topic(key)
	if !ok {
		config, ok = logconfig.Broker(key)
	}
	return ok && config.Type == logconfig.List
}

// listValue is a list config's current items: the set value, else the
// default, as Kafka appends to the value in effect.
func listValue(current map[string]string, key string) []string {
	if value, ok := current[key]; ok {
		return logconfig.ListItems(value)
	}
	config, ok := logconfig.Topic(key)
	if !ok {
		config, _ = logconfig.Broker(key)
	}
	return logconfig.ListItems(config.Default)
}

func alterList(items, change []string, op ConfigOp) string {
	for _, item := range change {
		switch {
		case op == ConfigAppend && !slices.Contains(items, item):
			items = append(items, item)
		case op == ConfigSubtract:
			items = slices.DeleteFunc(items, func(have string) bool { return have == item })
		}
	}
	return strings.Join(items, ",")
}

// validateConfigs checks the resource's resulting configs: a broker
// default by itself, and for every topic that would take its
// min.insync.replicas from it, against that topic's replication factor; a
// topic's whole set of configs against its replication factor.
func validateConfigs(img *metadata.Image, resource metadata.ConfigResource, next map[string]string) (int16, string) {
	if resource.Type == metadata.ConfigBrokerDefault {
		for _, key := range slices.Sorted(maps.Keys(next)) {
			if err := logconfig.ValidateBroker(key, next[key]); err != nil {
				return kerr.InvalidConfig.Code, err.Error()
			}
		}
		for _, name := range img.Topics() {
			config, _ := img.TopicConfig(name)
			if n, inherits := inheritedMinInsync(img.TopicConfigs(name), next); inherits && n > config.ReplicationFactor {
				return kerr.InvalidConfig.Code, fmt.Sprintf("min.insync.replicas %d is larger than the replication factor %d of topic %s",
					n, config.ReplicationFactor, name)
			}
		}
		return 0, ""
	}
	config, _ := img.TopicConfig(resource.Name)
	if err := logconfig.ValidateTopicConfigs(next, config.ReplicationFactor); err != nil {
		return kerr.InvalidConfig.Code, err.Error()
	}
	// A topic that drops its own min.insync.replicas takes the
	// cluster-wide default's, which must fit it as well.
	if n, inherits := inheritedMinInsync(next, img.BrokerDefaultConfigs()); inherits && n > config.ReplicationFactor {
		return kerr.InvalidConfig.Code, fmt.Sprintf("min.insync.replicas %d (the cluster-wide default) is larger than the replication factor %d",
			n, config.ReplicationFactor)
	}
	return 0, ""
}

// inheritedMinInsync is the cluster-wide min.insync.replicas a topic with
// these configs of its own takes, if it sets none and a default is set.
func inheritedMinInsync(own, defaults map[string]string) (int, bool) {
	if _, set := own["min.insync.replicas"]; set {
		return 0, false
	}
	value, ok := defaults["min.insync.replicas"]
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(strings.TrimSpace(value))
	return n, err == nil
}
