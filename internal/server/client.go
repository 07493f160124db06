package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tidelog/tide/internal/metadata"
	"github.com/tidelog/tide/internal/quorum"
)

// Client is an admin connection to one node's controller listener.
type Client struct {
	c  net.Conn
	id int32
}

// Dial opens an admin connection.
func Dial(ctx context.Context, address string) (*Client, error) {
	dialer := net.Dialer{Timeout: dialTimeout}
	c, err := dialer.DialContext(ctx, "tcp", address)
	if err != nil {
		return nil, err
	}
	// Admin clients name themselves with a negative id, apart from brokers.
	client := &Client{c: c, id: -2 - rand.Int32N(1<<30)}
	if err := writeFrame(c, frameHello, helloPayload(client.id)); err != nil {
		c.Close()
		return nil, err
	}
	return client, nil
}

// Close closes the connection.
func (c *Client) Close() error { return c.c.Close() }

func (c *Client) roundTrip(ctx context.Context, kind byte, payload []byte) ([]byte, error) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(10 * time.Second)
	}
	c.c.SetDeadline(deadline)
	if err := writeFrame(c.c, kind, payload); err != nil {
		return nil, err
	}
	gotKind, answer, err := readFrame(c.c, 256<<20)
	if err != nil {
		return nil, err
	}
	if gotKind != kind && !(kind == frameRequest && gotKind == frameAnswer) {
		return nil, fmt.Errorf("server: answered with frame type %d", gotKind)
	}
	return answer, nil
}

// Status asks the node for its view.
func (c *Client) Status(ctx context.Context) (Status, error) {
	payload, err := c.roundTrip(ctx, frameStatus, nil)
	if err != nil {
		return Status{}, err
	}
	var status Status
	return status, json.Unmarshal(payload, &status)
}

// Request sends one controller request and reads its answer.
func (c *Client) Request(ctx context.Context, request quorum.Request) (quorum.Answer, error) {
	request.From = metadata.BrokerID(c.id)
	payload, err := c.roundTrip(ctx, frameRequest, quorum.EncodeRequest(nil, request))
	if err != nil {
		return quorum.Answer{}, err
	}
	return quorum.DecodeAnswer(payload)
}

// AdminRequest sends a request to the active controller of a cluster:
// it tries the voters in turn and follows NOT_CONTROLLER hints until one
// answers or ctx ends.
func AdminRequest(ctx context.Context, controllers map[metadata.BrokerID]string, request quorum.Request) (quorum.Answer, error) {
	voters := Config{Controllers: controllers}.voters()
	if len(voters) == 0 {
		return quorum.Answer{}, errors.New("no controllers")
	}
	target, lastErr := voters[0], error(nil)
	for attempt := 0; ctx.Err() == nil; attempt++ {
		answer, err := requestOnce(ctx, controllers[target], request)
		switch {
		case err == nil && answer.ErrorCode != kerr.NotController.Code:
			return answer, nil
		case err == nil && answer.Leader != metadata.NoBroker && controllers[answer.Leader] != "":
			target = answer.Leader
		default:
			lastErr = err
			target = voters[(attempt+1)%len(voters)]
		}
		if !sleep(ctx, backoffInitial) {
			break
		}
	}
	return quorum.Answer{}, fmt.Errorf("no active controller answered: %v (%w)", lastErr, ctx.Err())
}

func requestOnce(ctx context.Context, address string, request quorum.Request) (quorum.Answer, error) {
	attempt, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	client, err := Dial(attempt, address)
	if err != nil {
		return quorum.Answer{}, err
	}
	defer client.Close()
	return client.Request(attempt, request)
}
