package main

import (
	"fmt"
	"net"
)

// devPortRange is one kind of listener each broker of tide dev gets: its
// flag, and broker 1's port (0 for free ports, -1 for none where the kind
// is optional).
type devPortRange struct {
	flag     string
	first    int
	optional bool
}

// portRanges are the listener kinds in the order planDev binds them. With
// --kafka-port 0 every listener takes a free port, so tests and scripts
// that ask for free ports never collide on the others' defaults.
func (o devOptions) portRanges() []devPortRange {
	ranges := []devPortRange{{"--kafka-port", o.kafkaPort, false}, {"--controller-port", o.controllerPort, false},
		{"--metrics-port", o.metricsPort, true}, {"--http-port", o.httpPort, true}}
	if o.kafkaPort == 0 {
		for i := range ranges {
			ranges[i].first = min(ranges[i].first, 0)
			if !ranges[i].optional {
				ranges[i].first = 0
			}
		}
	}
	return ranges
}

// validatePorts checks each range lies in the port space and that no two
// overlap.
func (o devOptions) validatePorts() error {
	ranges := []devPortRange{{"--kafka-port", o.kafkaPort, false}, {"--controller-port", o.controllerPort, false},
		{"--metrics-port", o.metricsPort, true}, {"--http-port", o.httpPort, true}}
	for _, r := range ranges {
		if (r.first < 0 && !(r.optional && r.first == -1)) || r.first+o.brokers-1 > 65535 {
			none := ""
			if r.optional {
				none = ", -1 serves none"
			}
			return fmt.Errorf("%s %d: the ports of %d brokers must lie in 1..65535 (0 picks free ones%s)", r.flag, r.first, o.brokers, none)
		}
	}
	for i, a := range ranges {
		for _, b := range ranges[i+1:] {
			if a.first > 0 && b.first > 0 && a.first < b.first+o.brokers && b.first < a.first+o.brokers {
				return fmt.Errorf("%s %d and %s %d: the ranges of %d brokers overlap", a.flag, a.first, b.flag, b.first, o.brokers)
			}
		}
	}
	return nil
}

// planDev chooses the addresses and binds them all, so that a port in use
// is one clear error before any node starts; the nodes serve these
// listeners (free ports, 0, are those the system handed out).
func planDev(options devOptions) (devLayout, error) {
	layout := devLayout{topics: options.topics}
	var wanted []string
	var kinds []int // the range each wanted address belongs to
	var controllerListeners []net.Listener
	for kind, r := range options.portRanges() {
		if r.first < 0 {
			continue
		}
		for i := range options.brokers {
			wanted, kinds = append(wanted, devAddress(r.first, i)), append(kinds, kind)
		}
	}
	listeners, err := reserveAddresses(wanted)
	if err != nil {
		return devLayout{}, err
	}
	for i, l := range listeners {
		address := l.Addr().String()
		switch kinds[i] {
		case 0:
			layout.kafka, layout.listeners = append(layout.kafka, address), append(layout.listeners, l)
		case 1:
			layout.controller, controllerListeners = append(layout.controller, address), append(controllerListeners, l)
		case 2:
			layout.metrics, layout.metricsListeners = append(layout.metrics, address), append(layout.metricsListeners, l)
		case 3:
			layout.http, layout.httpListeners = append(layout.http, address), append(layout.httpListeners, l)
		}
	}
	layout.listeners = append(layout.listeners, controllerListeners...)
	return layout, nil
}

// closeListeners releases every listener a plan bound.
func (l devLayout) closeListeners() {
	for _, group := range [][]net.Listener{l.listeners, l.metricsListeners, l.httpListeners} {
		for _, listener := range group {
			listener.Close()
		}
	}
}
