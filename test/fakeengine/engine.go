// Package fakeengine is an in-memory docker.Engine for the fast test tier:
// a map of containers, volumes, networks and images with the idempotent
// semantics of the real engine (docker.Client), its sentinel errors, its
// event stream, and switches that force the engine's rarer errors (a name
// taken, no address pool left, a failed pull, the engine unreachable).
//
// It stands in for the engine only where the real one makes a branch slow
// or hard to reach; every path it is used for is also tested against the
// real engine. The contract in test/enginecontract runs the same cases
// against both, so that the two cannot drift apart.
//
// Nothing runs: a container "runs" from its start until Exit, a removal or
// an outage ends it; Exec answers through an ExecFunc (exit 0 and no output
// unless set), and Processes reports the container's first process and the
// ones a test adds.
package fakeengine

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"sync"
	"time"

	"afe.dev/sandbox/docker"
)

// DefaultAddressPools is how many networks (besides the predefined ones) a
// new Engine holds before it reports docker.ErrNoAddressPool: about what the
// real engine's default address pools hold beside its own bridge.
const DefaultAddressPools = 30

// ExecFunc answers an Exec in a running container: it may write to the
// spec's Stdout and Stderr (either may be nil) and returns the exit code.
// It runs without the engine's lock held, and may block until ctx ends.
type ExecFunc func(ctx context.Context, c docker.Container, spec docker.ExecSpec) (int, error)

// Engine is an in-memory docker.Engine. The zero value is not usable; call
// New.
type Engine struct {
	mu         sync.Mutex
	seq        int
	images     map[string]bool
	containers map[string]*container // by ID
	volumes    map[string]*volume    // by name
	networks   map[string]*network   // by ID
	pools      int                   // address pools: how many networks it holds
	subnets    int                   // subnets handed out so far
	down       bool
	faults     []*fault
	subs       map[*subscriber]struct{}
	history    []docker.Event // the last maxHistory events, oldest first
	exec       ExecFunc
	runtimes   map[string]bool // besides runc
}

var _ docker.Engine = (*Engine)(nil)

// New returns an engine with the images, the predefined networks bridge,
// host and none, and DefaultAddressPools address pools.
func New(images ...string) *Engine {
	e := &Engine{
		images:     map[string]bool{},
		containers: map[string]*container{},
		volumes:    map[string]*volume{},
		networks:   map[string]*network{},
		pools:      DefaultAddressPools,
		subs:       map[*subscriber]struct{}{},
		runtimes:   map[string]bool{},
	}
	for _, ref := range images {
		e.images[ref] = true
	}
	for _, n := range []string{"bridge", "host", "none"} {
		nw := &network{id: e.newID(), name: n, labels: map[string]string{}, predefined: true}
		if n == "bridge" {
			nw.subnet = netip.MustParsePrefix("172.17.0.0/16")
		}
		e.networks[nw.id] = nw
	}
	return e
}

// newID returns a container or network ID: 64 hex digits, as the engine's.
func (e *Engine) newID() string {
	e.seq++
	sum := sha256.Sum256([]byte("fakeengine-" + strconv.Itoa(e.seq)))
	return hex.EncodeToString(sum[:])
}

// validName is the engine's rule for container and volume names.
var validName = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]+$`)

// Ping checks that the engine answers.
func (e *Engine) Ping(_ context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.check(OpPing, "")
}

// AddImage makes images present, as `docker load` would.
func (e *Engine) AddImage(refs ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, ref := range refs {
		e.images[ref] = true
	}
}

// RemoveImage makes an image absent; no registry is reachable, so a later
// EnsureImage of it fails with a *docker.PullError.
func (e *Engine) RemoveImage(ref string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.images, ref)
}

// EnsureImage makes the image present: used when it is there. Nothing can
// be pulled, so a missing image is a *docker.PullError, as on an engine
// that reaches no registry.
func (e *Engine) EnsureImage(_ context.Context, ref string) error {
	if err := docker.ValidateImageRef(ref); err != nil {
		return &docker.PullError{Ref: ref, Reason: err.Error()}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.check(OpEnsureImage, ref); err != nil {
		return err
	}
	if !e.images[ref] {
		return &docker.PullError{Ref: ref, Reason: "pull access denied for " + ref + ", repository does not exist or may require 'docker login'"}
	}
	return nil
}

// SetExec sets how Exec answers; nil restores the default (exit 0, no
// output).
func (e *Engine) SetExec(f ExecFunc) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.exec = f
}

// SetAddressPools sets how many networks (besides the predefined ones) the
// engine holds: while that many exist, EnsureNetwork of a new one fails with
// docker.ErrNoAddressPool, and removing one gives its pool back. 0 refuses
// every new network, whatever is removed meanwhile.
func (e *Engine) SetAddressPools(n int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.pools = n
}

// SetUnavailable takes the engine away (true) or brings it back (false).
// While it is away every call fails with docker.ErrUnavailable and every
// event stream breaks with it; containers keep running, as they do when
// only the engine's socket is unreachable.
func (e *Engine) SetUnavailable(down bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.down = down
	if down {
		for s := range e.subs {
			s.breakWith(fmt.Errorf("events: %w: connection refused", docker.ErrUnavailable))
			delete(e.subs, s)
		}
	}
}

// Objects lists every container, volume and network carrying all the labels
// as "container/NAME", "volume/NAME", "network/NAME", sorted: the fake's
// counterpart of dockertest.Objects.
func (e *Engine) Objects(labels map[string]string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, c := range e.containers {
		if labelsMatch(c.spec.Labels, labels) {
			out = append(out, "container/"+c.spec.Name)
		}
	}
	for _, v := range e.volumes {
		if labelsMatch(v.labels, labels) {
			out = append(out, "volume/"+v.name)
		}
	}
	for _, n := range e.networks {
		if !n.predefined && labelsMatch(n.labels, labels) {
			out = append(out, "network/"+n.name)
		}
	}
	sort.Strings(out)
	return out
}

// now is the engine's clock.
func now() time.Time { return time.Now().UTC() }

// labelsMatch is true when every wanted label is present with its value.
func labelsMatch(have, want map[string]string) bool {
	for k, v := range want {
		if got, ok := have[k]; !ok || got != v {
			return false
		}
	}
	return true
}

func copyLabels(l map[string]string) map[string]string {
	out := make(map[string]string, len(l))
	for k, v := range l {
		out[k] = v
	}
	return out
}
