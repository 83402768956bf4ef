package docker

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/docker/docker/api/types"
	"github.com/docker/docker/api/types/container"
)

// ContainerUsage is what a running container has used since it started, as
// the engine's cgroup accounting reports it.
type ContainerUsage struct {
	// CPUNanoseconds is the CPU time of all its processes.
	CPUNanoseconds uint64
	// MemoryBytes is its working set: the memory in use less the page cache
	// the kernel may reclaim (as `docker stats` and the kubelet count it).
	MemoryBytes uint64
	// NetworkReceiveBytes and NetworkTransmitBytes are summed over its
	// interfaces (zero without a network).
	NetworkReceiveBytes  uint64
	NetworkTransmitBytes uint64
}

// DiskUsage is the disk usage of containers and volumes, measured in one
// round.
type DiskUsage struct {
	// Containers maps a container's ID to the size of its writable layer.
	Containers map[string]int64
	// Layers maps a container's ID to its labels and the use of its
	// writable layer.
	Layers map[string]LayerUsage
	// Volumes maps a volume's name to its labels and size.
	Volumes map[string]VolumeUsage
	// InodesCounted is true when the inodes were counted (a local engine
	// whose data this process sees); else every Inodes is -1.
	InodesCounted bool
}

// VolumeUsage is the size of one volume.
type VolumeUsage struct {
	Labels map[string]string
	// Bytes is -1 when the engine does not know it (a volume driver that
	// does not report sizes, a tree that cannot be walked).
	Bytes int64
	// Inodes are the files, directories and other entries in the volume, a
	// hard-linked file once; -1 when not counted.
	Inodes int64
}

// LayerUsage is the use of one container's writable layer.
type LayerUsage struct {
	Labels map[string]string
	// Bytes and Inodes are as a volume's (VolumeUsage): -1 when not
	// measured (no walk here, or a storage driver that reports no
	// directory for the layer).
	Bytes  int64
	Inodes int64
	// Unmeasurable is true when the walk of the layer failed, as on a path
	// longer than the host allows, which the workload can make.
	Unmeasurable bool
}

// newDiskUsage is an empty measurement.
func newDiskUsage(inodes bool) *DiskUsage {
	return &DiskUsage{Containers: map[string]int64{}, Layers: map[string]LayerUsage{},
		Volumes: map[string]VolumeUsage{}, InodesCounted: inodes}
}

// ContainerUsage reads the usage of a running container (id is its full
// ID): from the host's cgroup files when the engine is local and they are
// visible here, without a request; otherwise in one request (one-shot
// stats: the engine does not wait for a second sample).
func (c *Client) ContainerUsage(ctx context.Context, id string) (*ContainerUsage, error) {
	if u, ok := c.cgroups.usage(id); ok {
		return u, nil
	}
	return c.containerStats(ctx, id)
}

// containerStats asks the engine for a running container's usage.
func (c *Client) containerStats(ctx context.Context, id string) (*ContainerUsage, error) {
	c.count("container_stats")
	resp, err := c.api.ContainerStatsOneShot(ctx, id)
	if err != nil {
		return nil, wrap(err, "stats of container "+id)
	}
	defer func() { _ = resp.Body.Close() }()
	var st container.StatsResponse
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return nil, fmt.Errorf("stats of container %s: %w", id, err)
	}
	return usageOf(&st), nil
}

// usageOf reduces the engine's stats to the usage.
func usageOf(st *container.StatsResponse) *ContainerUsage {
	u := &ContainerUsage{CPUNanoseconds: st.CPUStats.CPUUsage.TotalUsage, MemoryBytes: st.MemoryStats.Usage}
	// cgroup v1 reports total_inactive_file, v2 inactive_file.
	inactive, ok := st.MemoryStats.Stats["total_inactive_file"]
	if !ok {
		inactive = st.MemoryStats.Stats["inactive_file"]
	}
	if inactive < u.MemoryBytes {
		u.MemoryBytes -= inactive
	}
	for _, n := range st.Networks {
		u.NetworkReceiveBytes += n.RxBytes
		u.NetworkTransmitBytes += n.TxBytes
	}
	return u
}

// diskUsageWait bounds the wait for another measurement of the engine's
// disk usage to end.
const diskUsageWait = 60 * time.Second

// DiskUsage measures the writable layers of the containers and the volumes
// that carry all the labels (all of them for none). Where this process sees
// the data of a local engine it walks each tree once and counts its bytes
// and its inodes; otherwise it asks the engine, in one request (its
// /system/df, which counts bytes only; engines from API 1.42 on skip
// images and the build cache), and reports no inodes.
func (c *Client) DiskUsage(ctx context.Context, labels map[string]string) (*DiskUsage, error) {
	if root := c.dataRoot(ctx); root != "" {
		out, err := c.walkDiskUsage(ctx, root, labels)
		if err == nil {
			c.forgetLayers(out.Layers)
		}
		return out, err
	}
	return c.engineDiskUsage(ctx, labels)
}

// engineDiskUsage asks the engine for the disk usage, and keeps what
// carries the labels.
func (c *Client) engineDiskUsage(ctx context.Context, labels map[string]string) (*DiskUsage, error) {
	var df types.DiskUsage
	var err error
	// Engines before 23.0 refuse a second measurement while one is running
	// (anyone's: `docker system df`, another manager on the engine), later
	// ones share it: wait for it, at a jittered pace so that several
	// waiters do not keep meeting.
	deadline := time.Now().Add(diskUsageWait)
	for {
		c.count("system_df")
		df, err = c.api.DiskUsage(ctx, types.DiskUsageOptions{Types: []types.DiskUsageObject{types.ContainerObject, types.VolumeObject}})
		if err == nil || !strings.Contains(err.Error(), "disk usage operation is already running") || time.Now().After(deadline) {
			break
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(100*time.Millisecond + time.Duration(rand.Int64N(int64(200*time.Millisecond)))):
		}
	}
	if err != nil {
		return nil, wrap(err, "disk usage")
	}
	out := newDiskUsage(false)
	for _, ct := range df.Containers {
		if ct != nil && labelsMatch(ct.Labels, labels) {
			out.Containers[ct.ID] = ct.SizeRw
			out.Layers[ct.ID] = LayerUsage{Labels: ct.Labels, Bytes: ct.SizeRw, Inodes: -1}
		}
	}
	for _, v := range df.Volumes {
		if v == nil || !labelsMatch(v.Labels, labels) {
			continue
		}
		vu := VolumeUsage{Labels: v.Labels, Bytes: -1, Inodes: -1}
		if v.UsageData != nil {
			vu.Bytes = v.UsageData.Size
		}
		out.Volumes[v.Name] = vu
	}
	return out, nil
}
