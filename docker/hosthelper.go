package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
)

// HostHelper is a long-lived container in the engine host's network
// namespace (host networking) holding NET_ADMIN and no other capability,
// through which a process that does not share that namespace (a manager in
// a Pod) runs commands there: nft, to install the conntrack bound. It is
// found by its name and acted on only once its labels are the ones it was
// made with: a container of that name made by anyone else is never exec'd
// into nor removed.
type HostHelper struct {
	c    *Client
	spec ContainerSpec

	mu sync.Mutex
	id string // the helper's container, once made or adopted
}

// HostHelper is the helper container name of the image, carrying the
// labels (which must name it uniquely: its owner and its role); it is made
// on first use.
func (c *Client) HostHelper(name, image string, labels map[string]string) *HostHelper {
	l := map[string]string{}
	for k, v := range labels {
		l[k] = v
	}
	// The image is part of its identity: a helper of another image is
	// replaced, not used.
	l[hostHelperImageLabel] = image
	return &HostHelper{c: c, spec: ContainerSpec{
		Name:            name,
		Image:           image,
		Labels:          l,
		Network:         "host",
		User:            "0:0",
		Command:         []string{"sleep", "2147483647"},
		CapDrop:         []string{"ALL"},
		CapAdd:          []string{"NET_ADMIN"},
		NoNewPrivileges: true,
		ReadOnlyRootfs:  true,
		Init:            true,
		NanoCPUs:        500_000_000,
		MemoryBytes:     64 << 20,
		PidsLimit:       32,
	}}
}

// hostHelperImageLabel holds the image a host helper was made of.
const hostHelperImageLabel = "afe.helper-image"

// Run runs cmd in the helper with stdin as its input and returns its
// output; a command that exits non-zero is an error with its stderr. The
// helper is made, started or replaced (another image of it) first when
// needed.
func (h *HostHelper) Run(ctx context.Context, stdin string, cmd ...string) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if h.id == "" {
			id, err := h.ensure(ctx)
			if err != nil {
				return nil, err
			}
			h.id = id
		}
		out, err := h.exec(ctx, stdin, cmd)
		var exit *helperExit
		if err == nil || errors.As(err, &exit) || attempt > 0 {
			return out, err
		}
		// Removed or stopped since: made or started again, once.
		h.id = ""
	}
}

// helperExit is a command of the helper that exited non-zero.
type helperExit struct {
	cmd    []string
	code   int
	stderr string
}

func (e *helperExit) Error() string {
	return fmt.Sprintf("%s exited %d: %s", strings.Join(e.cmd, " "), e.code, e.stderr)
}

func (h *HostHelper) exec(ctx context.Context, stdin string, cmd []string) ([]byte, error) {
	var stdout, stderr bytes.Buffer
	code, err := h.c.ExecStream(ctx, h.id, StreamSpec{Cmd: cmd, User: "0:0", Stdin: strings.NewReader(stdin), Stdout: &stdout, Stderr: &stderr})
	if err != nil {
		return nil, fmt.Errorf("run %s in the host helper %s: %w", cmd[0], h.spec.Name, err)
	}
	if code != 0 {
		return nil, &helperExit{cmd: cmd, code: code, stderr: strings.TrimSpace(stderr.String())}
	}
	return stdout.Bytes(), nil
}

// ensure makes the helper, or adopts the running or stopped one of its
// labels, and returns its ID. One of an older image of this owner and role
// is replaced; a container of the name with other labels is a conflict.
func (h *HostHelper) ensure(ctx context.Context) (string, error) {
	if err := h.c.EnsureImage(ctx, h.spec.Image); err != nil {
		return "", err
	}
	ct, err := h.c.RunContainer(ctx, h.spec)
	if errors.Is(err, ErrConflict) {
		ct, err = h.replace(ctx)
	}
	if err != nil {
		return "", fmt.Errorf("host helper %s: %w", h.spec.Name, err)
	}
	return ct.ID, nil
}

// replace removes the helper of the name when it carries the labels of
// this helper but another image, and makes it again.
func (h *HostHelper) replace(ctx context.Context) (*Container, error) {
	existing, err := h.c.InspectContainer(ctx, h.spec.Name)
	if err != nil {
		return nil, err
	}
	for k, v := range h.spec.Labels {
		if k != hostHelperImageLabel && existing.Labels[k] != v {
			return nil, fmt.Errorf("container %s is not this helper (its labels differ): %w", h.spec.Name, ErrConflict)
		}
	}
	if err := h.c.RemoveContainer(ctx, existing.ID); err != nil {
		return nil, err
	}
	return h.c.RunContainer(ctx, h.spec)
}
