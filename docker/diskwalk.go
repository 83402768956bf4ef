package docker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/volume"
)

// hostData is where the engine keeps its data, when this process sees it:
// a local engine, its data directory visible and readable at the path the
// engine reports. Then the disk usage is measured here, by one walk of
// each tree that counts its bytes and its inodes, in place of the engine's
// walk, which counts bytes only.
type hostData struct {
	mu    sync.Mutex
	known bool
	root  string
	// upper holds the writable layer directory of each container by ID:
	// it does not change while the container exists.
	upper sync.Map
}

// dataRoot is the engine's data directory when this process can walk it,
// else "".
func (c *Client) dataRoot(ctx context.Context) string {
	if !c.IsLocal() {
		return ""
	}
	c.data.mu.Lock()
	defer c.data.mu.Unlock()
	if c.data.known {
		return c.data.root
	}
	c.count("info")
	info, err := c.api.Info(ctx)
	if err != nil {
		return ""
	}
	c.data.known = true
	if fi, err := os.Stat(filepath.Join(info.DockerRootDir, "volumes")); err == nil && fi.IsDir() {
		c.data.root = filepath.Clean(info.DockerRootDir)
	}
	return c.data.root
}

// walkDiskUsage measures the volumes and the writable layers of the
// containers that carry the labels, each in one walk.
func (c *Client) walkDiskUsage(ctx context.Context, root string, labels map[string]string) (*DiskUsage, error) {
	c.count("volume_list")
	vols, err := c.api.VolumeList(ctx, volume.ListOptions{Filters: labelFilter(labels)})
	if err != nil {
		return nil, wrap(err, "list volumes")
	}
	c.count("container_list")
	cts, err := c.api.ContainerList(ctx, container.ListOptions{All: true, Filters: labelFilter(labels)})
	if err != nil {
		return nil, wrap(err, "list containers")
	}
	out := newDiskUsage(true)
	for _, v := range vols.Volumes {
		if v == nil {
			continue
		}
		vu := VolumeUsage{Labels: v.Labels, Bytes: -1, Inodes: -1}
		// The engine sizes only its local driver's volumes.
		if v.Driver == "local" && within(root, v.Mountpoint) {
			vu.Bytes, vu.Inodes = measureTree(v.Mountpoint)
		}
		out.Volumes[v.Name] = vu
	}
	for _, ct := range cts {
		layer := LayerUsage{Labels: ct.Labels, Bytes: -1, Inodes: -1}
		if dir := c.upperDir(ctx, ct.ID); dir != "" && within(root, dir) {
			layer.Bytes, layer.Inodes = measureTree(dir)
			// A layer removed with its container meanwhile is not measured.
			layer.Unmeasurable = layer.Inodes < 0 && exists(dir)
		}
		out.Containers[ct.ID] = layer.Bytes
		out.Layers[ct.ID] = layer
	}
	return out, nil
}

// measureTree is the bytes and inodes of the tree under dir, -1 and -1
// when it cannot be measured, as the engine reports a size it cannot tell.
func measureTree(dir string) (int64, int64) {
	bytes, inodes, err := countTree(dir)
	if err != nil {
		return -1, -1
	}
	return bytes, inodes
}

// exists is true when dir is there.
func exists(dir string) bool {
	_, err := os.Lstat(dir)
	return err == nil
}

// upperDir is the directory of the container's writable layer, as its
// storage driver reports it (overlay2 and fuse-overlayfs: UpperDir); ""
// when it has none or the container is gone.
func (c *Client) upperDir(ctx context.Context, id string) string {
	if dir, ok := c.data.upper.Load(id); ok {
		return dir.(string)
	}
	c.count("container_inspect")
	info, err := c.api.ContainerInspect(ctx, id)
	if err != nil || info.GraphDriver.Data == nil {
		return ""
	}
	dir := info.GraphDriver.Data["UpperDir"]
	if dir != "" {
		c.data.upper.Store(id, dir)
	}
	return dir
}

// forgetLayers drops the writable layer directories of the containers
// that are no longer listed.
func (c *Client) forgetLayers(listed map[string]LayerUsage) {
	c.data.upper.Range(func(id, _ any) bool {
		if _, ok := listed[id.(string)]; !ok {
			c.data.upper.Delete(id)
		}
		return true
	})
}

// within is true when dir lies under the engine's data directory root: a
// path the engine reports elsewhere is not walked.
func within(root, dir string) bool {
	return dir != "" && strings.HasPrefix(filepath.Clean(dir), root+string(filepath.Separator))
}
