package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tidelog/tide/internal/server"
)

// node is one `tide serve` process: a broker and a voter.
type node struct {
	id                int32
	controller, kafka string // listeners, host:port
	dir               string
	command           *exec.Cmd
	exited            chan struct{}
	log               *os.File
	paused            bool
}

// cluster is the processes of a run.
type cluster struct {
	config Config
	binary string
	nodes  []*node // nodes[i].id == i+1
	voters string
	// firewall runs each node under a uid of its own and drops packets;
	// nil when isolation faults cannot run here.
	firewall *firewall
	mu       sync.Mutex
}

// startCluster picks the ports and starts every node.
func startCluster(config Config, root string, firewall *firewall) (*cluster, error) {
	c := &cluster{config: config, binary: config.Binary, firewall: firewall}
	if firewall != nil {
		// Nodes run under other uids: they need a binary and directories
		// they can reach. A copy under the run's directory is both.
		copied := filepath.Join(root, "bin", "tide")
		if err := copyExecutable(config.Binary, copied, root); err != nil {
			return nil, err
		}
		c.binary = copied
	}
	var voters []string
	ports := newPortPicker(config.BasePort)
	for i := range config.Nodes {
		controller, err := ports.next()
		if err != nil {
			return nil, err
		}
		kafka, err := ports.next()
		if err != nil {
			return nil, err
		}
		n := &node{id: int32(i + 1), controller: controller, kafka: kafka, dir: filepath.Join(root, fmt.Sprintf("node-%d", i+1))}
		c.nodes = append(c.nodes, n)
		voters = append(voters, fmt.Sprintf("%d@%s", n.id, controller))
	}
	c.voters = strings.Join(voters, ",")
	for _, n := range c.nodes {
		if err := c.start(n.id); err != nil {
			c.stopAll(io.Discard)
			return nil, err
		}
	}
	return c, nil
}

func (c *cluster) node(id int32) *node { return c.nodes[id-1] }

// kafkaAddresses are the brokers' Kafka listeners in node order.
func (c *cluster) kafkaAddresses() []string {
	var addresses []string
	for _, n := range c.nodes {
		addresses = append(addresses, n.kafka)
	}
	return addresses
}

// start runs node id (again, after a kill, on the same data).
func (c *cluster) start(id int32) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.node(id)
	if err := os.MkdirAll(n.dir, 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(n.dir+".log", os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	command := exec.Command(c.binary, "serve", "--id", strconv.Itoa(int(id)), "--controllers", c.voters, "--data-dir", n.dir,
		"--kafka-listen", n.kafka, "--session-timeout", c.config.SessionTimeout.String(),
		"--heartbeat-interval", (c.config.SessionTimeout / 10).String(), "--election-timeout", "1s",
		// Leadership goes back to the preferred replicas within seconds of
		// a restart: more leader changes under load, and a killed
		// leader's partitions spread again.
		"--leader-imbalance-check-interval", "5s")
	command.Stdout, command.Stderr = log, log
	command.Env = append(os.Environ(), c.config.BinaryEnv...)
	// The nodes die with this process, whatever kills it.
	command.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if c.firewall != nil {
		if err := c.firewall.prepare(id, n.dir, command); err != nil {
			log.Close()
			return err
		}
	}
	if err := command.Start(); err != nil {
		log.Close()
		return fmt.Errorf("starting node %d: %w", id, err)
	}
	n.command, n.log, n.paused, n.exited = command, log, false, make(chan struct{})
	go func(exited chan struct{}) {
		command.Wait()
		log.Close()
		close(exited)
	}(n.exited)
	return nil
}

// running reports whether node id's process is alive.
func (c *cluster) running(id int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := c.node(id)
	if n.command == nil {
		return false
	}
	select {
	case <-n.exited:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL to node id and waits for it to go.
func (c *cluster) kill(id int32) {
	c.mu.Lock()
	n := c.node(id)
	command, exited := n.command, n.exited
	c.mu.Unlock()
	if command == nil {
		return
	}
	command.Process.Signal(syscall.SIGKILL)
	<-exited
}

// pause stops node id with SIGSTOP; resume continues it.
func (c *cluster) pause(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.node(id); n.command != nil {
		n.command.Process.Signal(syscall.SIGSTOP)
		n.paused = true
	}
}

func (c *cluster) resume(id int32) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if n := c.node(id); n.command != nil {
		n.command.Process.Signal(syscall.SIGCONT)
		n.paused = false
	}
}

// stopAll stops every node with SIGTERM (a controlled shutdown), killing
// one that has not exited after 20 s.
func (c *cluster) stopAll(out io.Writer) {
	var wait sync.WaitGroup
	for _, n := range c.nodes {
		if !c.running(n.id) {
			continue
		}
		c.resume(n.id)
		n.command.Process.Signal(syscall.SIGTERM)
		wait.Add(1)
		go func(n *node) {
			defer wait.Done()
			select {
			case <-n.exited:
			case <-time.After(20 * time.Second):
				fmt.Fprintf(out, "node %d ignored SIGTERM for 20 s: killed\n", n.id)
				n.command.Process.Signal(syscall.SIGKILL)
				<-n.exited
			}
		}(n)
	}
	wait.Wait()
}

// status asks node id's controller listener for its view.
func (c *cluster) status(ctx context.Context, id int32) (server.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	client, err := server.Dial(ctx, c.node(id).controller)
	if err != nil {
		return server.Status{}, err
	}
	defer client.Close()
	return client.Status(ctx)
}

// activeController is the node that says it is the active controller, or
// 0.
func (c *cluster) activeController(ctx context.Context) int32 {
	for _, n := range c.nodes {
		if c.running(n.id) && !n.paused {
			if status, err := c.status(ctx, n.id); err == nil && status.Active {
				return n.id
			}
		}
	}
	return 0
}

// leader is the node that leads topic's partition in the newest leader
// epoch any node reports, or 0.
func (c *cluster) leader(ctx context.Context, topic string, partition int32) int32 {
	leader, epoch := int32(0), int32(-1)
	for _, n := range c.nodes {
		if !c.running(n.id) || n.paused {
			continue
		}
		status, err := c.status(ctx, n.id)
		if err != nil {
			continue
		}
		for _, p := range status.Partitions {
			if p.Topic == topic && p.Partition == partition && p.Role == "leader" && p.LeaderEpoch > epoch {
				leader, epoch = n.id, p.LeaderEpoch
			}
		}
	}
	return leader
}

// portPicker hands out loopback addresses: from base upwards when base is
// set, else random ports below the ephemeral range that were free a
// moment ago (a port from the ephemeral range could be taken by any
// outgoing connection before the node binds it).
type portPicker struct {
	base, handed int
	taken        map[int]bool
}

func newPortPicker(base int) *portPicker { return &portPicker{base: base, taken: map[int]bool{}} }

func (p *portPicker) next() (string, error) {
	for range 500 {
		port := 20000 + rand.IntN(12000)
		if p.base > 0 {
			port = p.base + p.handed
			p.handed++
		}
		if p.taken[port] {
			continue
		}
		address := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		listener, err := net.Listen("tcp", address)
		if err != nil {
			if p.base > 0 {
				return "", fmt.Errorf("port %d (from --base-port %d) is taken: %w", port, p.base, err)
			}
			continue
		}
		listener.Close()
		p.taken[port] = true
		return address, nil
	}
	return "", errors.New("no free loopback port")
}

// copyExecutable copies the tide binary to path, readable and runnable by
// every uid, and lets every uid into the directories from root down to it
// (root's parent must let them in already: /tmp does).
func copyExecutable(from, to, root string) error {
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	data, err := os.ReadFile(from)
	if err != nil {
		return fmt.Errorf("reading the tide binary: %w", err)
	}
	if err := os.WriteFile(to, data, 0o755); err != nil {
		return err
	}
	for dir := filepath.Dir(to); strings.HasPrefix(dir, root); dir = filepath.Dir(dir) {
		info, err := os.Stat(dir)
		if err != nil {
			return err
		}
		if err := os.Chmod(dir, info.Mode().Perm()|0o055); err != nil {
			return err
		}
	}
	return nil
}
