package wire

import (
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// serveFunc serves one decoded request. It answers through x.respond, now
// or later, or returns an error (and does not answer) when the connection
// must be closed.
type serveFunc func(h *Handler, x *exchange) error

// servedAPI is one API key's served version range and its handler.
type servedAPI struct {
	key      int16
	min, max int16
	serve    serveFunc
}

// apis holds the registrations, indexed by key; ApiVersions is built from
// them, so it advertises exactly what has a handler.
var apis [kmsg.MaxKey + 1]*servedAPI

// register is called from each API file's init. A bad or repeated
// registration, or a range kmsg cannot encode, is a programmer error.
func register(key, min, max int16, serve serveFunc) {
	if key < 0 || int(key) >= len(apis) || min < 0 || max < min || serve == nil {
		panic(fmt.Sprintf("wire: invalid registration of key %d, v%d-v%d", key, min, max))
	}
	if apis[key] != nil {
		panic(fmt.Sprintf("wire: key %d registered twice", key))
	}
	if request := kmsg.RequestForKey(key); request == nil || request.MaxVersion() < max {
		panic(fmt.Sprintf("wire: kmsg cannot encode %s v%d", kmsg.NameForKey(key), max))
	}
	apis[key] = &servedAPI{key: key, min: min, max: max, serve: serve}
}

// lookup returns the registration of a key.
func lookup(key int16) (*servedAPI, bool) {
	if key < 0 || int(key) >= len(apis) || apis[key] == nil {
		return nil, false
	}
	return apis[key], true
}

// servedVersions lists the registrations in key order, for ApiVersions.
func servedVersions() []kmsg.ApiVersionsResponseApiKey {
	var keys []kmsg.ApiVersionsResponseApiKey
	for _, served := range apis {
		if served == nil {
			continue
		}
		entry := kmsg.NewApiVersionsResponseApiKey()
		entry.ApiKey, entry.MinVersion, entry.MaxVersion = served.key, served.min, served.max
		keys = append(keys, entry)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i].ApiKey < keys[j].ApiKey })
	return keys
}

// ServedVersions returns the served [min, max] versions of every API key
// served: what ApiVersions advertises.
func ServedVersions() map[int16][2]int16 {
	served := make(map[int16][2]int16)
	for _, entry := range servedVersions() {
		served[entry.ApiKey] = [2]int16{entry.MinVersion, entry.MaxVersion}
	}
	return served
}
