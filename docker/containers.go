package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/network"
)

// RunContainer creates and starts the container.
func (c *Client) RunContainer(ctx context.Context, spec ContainerSpec) (*Container, error) {
	if err := c.mountImageVolumes(ctx, &spec); err != nil {
		return nil, err
	}
	cfg, hc, nc := containerConfig(spec)
	c.count("container_create")
	resp, err := c.api.ContainerCreate(ctx, cfg, hc, nc, nil, spec.Name)
	if cerrdefs.IsConflict(err) {
		return c.adopt(ctx, spec)
	}
	if err != nil && spec.StorageSizeBytes > 0 && storageQuotaRefused(err) {
		return nil, fmt.Errorf("create container %s: %w: %w", spec.Name, ErrStorageQuotaUnsupported, err)
	}
	if err != nil {
		return nil, wrap(err, "create container "+spec.Name)
	}
	if err := c.prepareAndStart(ctx, resp.ID, spec); err != nil {
		// Leave nothing half-created behind; use a fresh context so that a
		// cancelled ctx does not leak the container.
		rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = c.RemoveContainer(rmCtx, resp.ID)
		return nil, err
	}
	return c.InspectContainer(ctx, resp.ID)
}

// adopt returns an existing container of the spec's name when it carries the
// spec's labels, started.
func (c *Client) adopt(ctx context.Context, spec ContainerSpec) (*Container, error) {
	existing, err := c.InspectContainer(ctx, spec.Name)
	if err != nil {
		return nil, err
	}
	if !labelsMatch(existing.Labels, spec.Labels) {
		return nil, fmt.Errorf("container %s: %w", spec.Name, ErrConflict)
	}
	if !existing.Running {
		c.count("container_start")
		if err := c.api.ContainerStart(ctx, existing.ID, container.StartOptions{}); err != nil {
			return nil, wrap(err, "start container "+spec.Name)
		}
		return c.InspectContainer(ctx, existing.ID)
	}
	return existing, nil
}

func (c *Client) prepareAndStart(ctx context.Context, id string, spec ContainerSpec) error {
	for _, m := range spec.Mounts {
		if m.Owner == nil {
			continue
		}
		target := id
		if spec.ReadOnlyRootfs {
			// The engine refuses to extract into a read-only root, even
			// onto a mount point: a helper sets the owner instead.
			helper, done, err := c.chownHelper(ctx, spec, m)
			if err != nil {
				return err
			}
			defer done()
			target = helper
		}
		if err := c.chownMountPoint(ctx, target, m); err != nil {
			return err
		}
	}
	for _, n := range spec.ExtraNetworks {
		c.count("network_connect")
		if err := c.api.NetworkConnect(ctx, n, id, &network.EndpointSettings{}); err != nil {
			return wrap(err, fmt.Sprintf("connect container %s to network %s", spec.Name, n))
		}
	}
	c.count("container_start")
	if err := c.api.ContainerStart(ctx, id, container.StartOptions{}); err != nil {
		err = wrap(err, "start container "+spec.Name)
		if errors.Is(err, ErrUnavailable) {
			return err
		}
		return fmt.Errorf("%w: %w", ErrStartFailed, err)
	}
	return nil
}

// ChownHelperName is the name of the helper container that RunContainer
// creates, and removes, beside the container of the name while it makes
// one with a read-only root (chownHelper). It carries that container's
// labels: whoever lists containers by labels must not take it for the
// container itself.
func ChownHelperName(name string) string { return name + "_chown" }

// chownHelper creates, and never starts, a container of the spec's image
// and labels with the mount alone and a writable root, to set the owner of
// the mount point through; done removes it.
func (c *Client) chownHelper(ctx context.Context, spec ContainerSpec, m Mount) (string, func(), error) {
	name := ChownHelperName(spec.Name)
	// One left by a crash in the middle.
	if err := c.RemoveContainer(ctx, name); err != nil {
		return "", nil, err
	}
	c.count("container_create")
	resp, err := c.api.ContainerCreate(ctx,
		&container.Config{Image: spec.Image, Entrypoint: []string{"/nonexistent"}, Labels: spec.Labels},
		&container.HostConfig{NetworkMode: "none", Mounts: helperMounts(spec, m), Tmpfs: spec.Tmpfs},
		nil, nil, name)
	if err != nil {
		return "", nil, wrap(err, "create container "+name)
	}
	return resp.ID, func() {
		rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = c.RemoveContainer(rmCtx, resp.ID)
	}, nil
}

// chownMountPoint sets the owner of a mount point by extracting a tar that
// holds only that directory into the created container: Docker applies the
// entry's owner and mode to the existing directory, inside the mounted volume,
// without running anything and without any capability in the container.
func (c *Client) chownMountPoint(ctx context.Context, id string, m Mount) error {
	dir := strings.Trim(path.Clean(m.Target), "/")
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{
		Typeflag: tar.TypeDir,
		Name:     dir + "/",
		Mode:     0o755,
		Uid:      m.Owner.UID,
		Gid:      m.Owner.GID,
		ModTime:  time.Now(),
	}); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	c.count("copy_to_container")
	if err := c.api.CopyToContainer(ctx, id, "/", &buf, container.CopyToContainerOptions{}); err != nil {
		return wrap(err, "set owner of "+m.Target)
	}
	return nil
}

// containerConfig is the engine's form of spec: the container's config,
// its host config and the endpoint on its first network.
func containerConfig(spec ContainerSpec) (*container.Config, *container.HostConfig, *network.NetworkingConfig) {
	cfg := &container.Config{
		Image:      spec.Image,
		Entrypoint: spec.Entrypoint,
		Cmd:        spec.Command,
		User:       spec.User,
		WorkingDir: spec.WorkingDir,
		Env:        spec.Env,
		Labels:     spec.Labels,
		OpenStdin:  spec.OpenStdin,
	}
	init := spec.Init
	pids := spec.PidsLimit
	hc := &container.HostConfig{
		NetworkMode:    container.NetworkMode(spec.Network),
		DNS:            spec.DNS,
		ExtraHosts:     spec.ExtraHosts,
		CapDrop:        spec.CapDrop,
		CapAdd:         spec.CapAdd,
		ReadonlyRootfs: spec.ReadOnlyRootfs,
		Tmpfs:          spec.Tmpfs,
		Init:           &init,
		IpcMode:        container.IPCModePrivate,
		RestartPolicy:  container.RestartPolicy{Name: container.RestartPolicyDisabled},
		Runtime:        spec.Runtime,
		Resources: container.Resources{
			NanoCPUs:   spec.NanoCPUs,
			Memory:     spec.MemoryBytes,
			MemorySwap: spec.MemoryBytes,
		},
	}
	if spec.Log != nil {
		hc.LogConfig = logConfig(*spec.Log)
	}
	if spec.StorageSizeBytes > 0 {
		hc.StorageOpt = map[string]string{"size": strconv.FormatInt(spec.StorageSizeBytes, 10)}
	}
	if spec.NoNewPrivileges {
		hc.SecurityOpt = []string{"no-new-privileges:true"}
	}
	if pids > 0 {
		hc.PidsLimit = &pids
	}
	for _, u := range spec.Ulimits {
		hc.Ulimits = append(hc.Ulimits, &container.Ulimit{Name: u.Name, Soft: u.Soft, Hard: u.Hard})
	}
	hc.Mounts = engineMounts(spec.Mounts)
	return cfg, hc, networkingConfig(spec)
}

// engineMounts are the engine's form of the mounts: binds private, volumes
// labelled and kept from the image's content as asked.
func engineMounts(ms []Mount) []mount.Mount {
	var out []mount.Mount
	for _, m := range ms {
		mm := mount.Mount{Type: mount.Type(m.Type), Source: m.Source, Target: m.Target}
		if m.Type == MountBind {
			mm.BindOptions = &mount.BindOptions{Propagation: mount.PropagationRPrivate}
		}
		if m.Type == MountVolume && (len(m.Labels) > 0 || m.NoCopy) {
			mm.VolumeOptions = &mount.VolumeOptions{Labels: m.Labels, NoCopy: m.NoCopy}
		}
		out = append(out, mm)
	}
	return out
}

// networkingConfig is the container's endpoint on its first network (its
// aliases and fixed address there), nil for none.
func networkingConfig(spec ContainerSpec) *network.NetworkingConfig {
	if spec.Network == "" || spec.Network == "none" {
		return nil
	}
	ep := &network.EndpointSettings{Aliases: spec.Aliases}
	if spec.IPv4Address != "" {
		ep.IPAMConfig = &network.EndpointIPAMConfig{IPv4Address: spec.IPv4Address}
	}
	return &network.NetworkingConfig{EndpointsConfig: map[string]*network.EndpointSettings{spec.Network: ep}}
}

// InspectContainer returns ErrNotFound when the container does not exist.
func (c *Client) InspectContainer(ctx context.Context, name string) (*Container, error) {
	c.count("container_inspect")
	info, err := c.api.ContainerInspect(ctx, name)
	if err != nil {
		return nil, wrap(err, "inspect container "+name)
	}
	if info.GraphDriver.Data != nil && info.GraphDriver.Data["UpperDir"] != "" {
		// The disk measurement walks it: remembered from any inspect, it
		// costs that measurement no inspect of its own (upperDir).
		c.data.upper.Store(info.ID, info.GraphDriver.Data["UpperDir"])
	}
	out := &Container{
		ID:     info.ID,
		Name:   strings.TrimPrefix(info.Name, "/"),
		IPs:    map[string]string{},
		Labels: map[string]string{},
	}
	if info.Config != nil {
		out.Image = info.Config.Image
		out.Labels = info.Config.Labels
		out.User = info.Config.User
	}
	if t, err := time.Parse(time.RFC3339Nano, info.Created); err == nil {
		out.Created = t
	}
	if st := info.State; st != nil {
		out.State = st.Status
		out.Running = st.Running
		out.ExitCode = st.ExitCode
		if t, err := time.Parse(time.RFC3339Nano, st.StartedAt); err == nil && t.Year() > 1 {
			out.StartedAt = t
		}
		if st.Running {
			out.Pid = st.Pid
		}
	}
	if info.HostConfig != nil {
		out.Runtime = info.HostConfig.Runtime
	}
	out.Mounts = mountPoints(info.Mounts)
	if info.NetworkSettings != nil {
		addIPs(out.IPs, info.NetworkSettings.Networks)
	}
	return out, nil
}

// mountPoints is our form of the engine's report of a container's mounts.
func mountPoints(ms []container.MountPoint) []MountPoint {
	var out []MountPoint
	for _, m := range ms {
		out = append(out, MountPoint{Type: MountType(m.Type), Source: m.Source, Destination: m.Destination, Name: m.Name})
	}
	return out
}

// addIPs adds to ips the container's IPv4 address on each of its networks.
func addIPs(ips map[string]string, networks map[string]*network.EndpointSettings) {
	for n, ep := range networks {
		if ep != nil {
			ips[n] = ep.IPAddress
		}
	}
}

// ListContainers returns the containers carrying all the labels.
func (c *Client) ListContainers(ctx context.Context, labels map[string]string) ([]Container, error) {
	c.count("container_list")
	list, err := c.api.ContainerList(ctx, container.ListOptions{All: true, Filters: labelFilter(labels)})
	if err != nil {
		return nil, wrap(err, "list containers")
	}
	out := make([]Container, 0, len(list))
	for _, s := range list {
		ct := Container{
			ID:       s.ID,
			Image:    s.Image,
			Labels:   s.Labels,
			State:    s.State,
			Running:  s.State == container.StateRunning,
			ExitCode: -1,
			IPs:      map[string]string{},
			Created:  time.Unix(s.Created, 0),
		}
		if len(s.Names) > 0 {
			ct.Name = strings.TrimPrefix(s.Names[0], "/")
		}
		ct.Mounts = mountPoints(s.Mounts)
		if s.NetworkSettings != nil {
			addIPs(ct.IPs, s.NetworkSettings.Networks)
		}
		out = append(out, ct)
	}
	return out, nil
}

// RemoveContainer kills and removes the container and its anonymous volumes
// (each recreation of a container of an image with VOLUME lines would leave
// one behind otherwise); named volumes, the workspace among them, stay. It
// succeeds when the container is already gone.
func (c *Client) RemoveContainer(ctx context.Context, name string) error {
	c.count("container_remove")
	err := c.api.ContainerRemove(ctx, name, container.RemoveOptions{Force: true, RemoveVolumes: true})
	if err == nil || isNotFound(err) {
		return nil
	}
	// A removal already in progress ends with the container gone.
	if cerrdefs.IsConflict(err) && strings.Contains(err.Error(), "already in progress") {
		return c.waitGone(ctx, name)
	}
	return wrap(err, "remove container "+name)
}

// RenameContainer renames the container named from to the name to; see
// Engine.
func (c *Client) RenameContainer(ctx context.Context, from, to string) error {
	c.count("container_rename")
	// The engine finds a container by name, full ID or ID prefix: a name
	// that is all hex could be taken for another container's ID.
	if isHex(from) {
		return fmt.Errorf("rename container %s: %w: a name of hex digits only could name another container's ID", from, ErrConflict)
	}
	return wrap(c.api.ContainerRename(ctx, "/"+strings.TrimPrefix(from, "/"), to), "rename container "+from+" to "+to)
}

// isHex is true for a non-empty string of hex digits only.
func isHex(s string) bool {
	for _, r := range s {
		if !strings.ContainsRune("0123456789abcdef", r) {
			return false
		}
	}
	return s != ""
}

func (c *Client) waitGone(ctx context.Context, name string) error {
	for i := 0; i < 100; i++ {
		c.count("container_inspect")
		if _, err := c.api.ContainerInspect(ctx, name); isNotFound(err) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("container %s: removal did not finish", name)
}

func isNotFound(err error) bool {
	return cerrdefs.IsNotFound(err) || errors.Is(err, ErrNotFound)
}
