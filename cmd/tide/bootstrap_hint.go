package main

import (
	"context"
	"fmt"
	"time"

	"github.com/tidelog/tide/internal/server"
)

// controllerHintTimeout bounds the probe of a bootstrap address that
// refused the Kafka protocol.
const controllerHintTimeout = time.Second

// controllerListenerHint asks each seed whether it is a tide node's
// controller listener, which closes a Kafka client's connection at its
// first request: the Kafka client then guesses at missing TLS, which
// sends the user the wrong way. It returns the error to show instead, or
// nil when no seed is a controller listener.
func controllerListenerHint(ctx context.Context, seeds []string) error {
	for _, seed := range seeds {
		probe, cancel := context.WithTimeout(ctx, controllerHintTimeout)
		status, err := controllerStatus(probe, seed)
		cancel()
		if err != nil {
			continue
		}
		suggestion := ""
		for _, broker := range status.Brokers {
			if broker.ID == status.ID && broker.Endpoint != "" {
				suggestion = ", such as node " + fmt.Sprint(status.ID) + "'s " + broker.Endpoint
			}
		}
		return fmt.Errorf("--bootstrap %s is node %d's controller listener, not a Kafka listener: give a broker's Kafka address%s", seed, status.ID, suggestion)
	}
	return nil
}

func controllerStatus(ctx context.Context, address string) (server.Status, error) {
	client, err := server.Dial(ctx, address)
	if err != nil {
		return server.Status{}, err
	}
	defer client.Close()
	return client.Status(ctx)
}
