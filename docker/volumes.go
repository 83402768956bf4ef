package docker

import (
	"context"
	"errors"
	"fmt"
	"path"
	"sort"
	"time"

	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/api/types/volume"
)

// EnsureVolume creates the volume unless it exists, and returns it.
func (c *Client) EnsureVolume(ctx context.Context, spec VolumeSpec) (*Volume, error) {
	// The engine's create is idempotent: a volume of the name that exists
	// is returned as it is, with its own labels, for the caller to check.
	c.count("volume_create")
	v, err := c.api.VolumeCreate(ctx, volume.CreateOptions{Name: spec.Name, Labels: spec.Labels})
	if err != nil {
		return nil, wrap(err, "create volume "+spec.Name)
	}
	return &Volume{Name: v.Name, Labels: v.Labels, Created: created(v.CreatedAt)}, nil
}

// InspectVolume returns ErrNotFound when the volume does not exist.
func (c *Client) InspectVolume(ctx context.Context, name string) (*Volume, error) {
	c.count("volume_inspect")
	v, err := c.api.VolumeInspect(ctx, name)
	if err != nil {
		return nil, wrap(err, "inspect volume "+name)
	}
	return &Volume{Name: v.Name, Labels: v.Labels, Created: created(v.CreatedAt)}, nil
}

// ListVolumes returns the volumes carrying all the labels.
func (c *Client) ListVolumes(ctx context.Context, labels map[string]string) ([]Volume, error) {
	c.count("volume_list")
	resp, err := c.api.VolumeList(ctx, volume.ListOptions{Filters: labelFilter(labels)})
	if err != nil {
		return nil, wrap(err, "list volumes")
	}
	out := make([]Volume, 0, len(resp.Volumes))
	for _, v := range resp.Volumes {
		out = append(out, Volume{Name: v.Name, Labels: v.Labels, Created: created(v.CreatedAt)})
	}
	return out, nil
}

// RemoveVolume removes the volume; it succeeds when it is already gone.
func (c *Client) RemoveVolume(ctx context.Context, name string) error {
	c.count("volume_remove")
	err := c.api.VolumeRemove(ctx, name, true)
	if err != nil && !isNotFound(err) {
		return wrap(err, "remove volume "+name)
	}
	return nil
}

// mountImageVolumes adds to the spec a volume mount of the spec's
// ImageVolumes for every VOLUME path of its image that no mount or tmpfs
// covers already (the engine makes an anonymous volume for those only).
// Like the volumes it would have made, the engine fills an empty volume
// with the image's content at the path.
func (c *Client) mountImageVolumes(ctx context.Context, spec *ContainerSpec) error {
	if spec.ImageVolumes == nil {
		return nil
	}
	c.count("image_inspect")
	img, err := c.api.ImageInspect(ctx, spec.Image)
	if err != nil {
		return wrap(err, "inspect image "+spec.Image)
	}
	if img.Config == nil {
		return nil
	}
	covered := map[string]bool{}
	for _, m := range spec.Mounts {
		covered[path.Clean(m.Target)] = true
	}
	for t := range spec.Tmpfs {
		covered[path.Clean(t)] = true
	}
	paths := make([]string, 0, len(img.Config.Volumes))
	for p := range img.Config.Volumes {
		if p = path.Clean(p); !covered[p] {
			covered[p] = true
			paths = append(paths, p)
		}
	}
	sort.Strings(paths)
	mounts := append([]Mount(nil), spec.Mounts...)
	for _, p := range paths {
		name := spec.ImageVolumes.Name(p)
		// The engine would mount a volume of the name whoever made it.
		v, err := c.InspectVolume(ctx, name)
		if err == nil && !labelsMatch(v.Labels, spec.ImageVolumes.Labels) {
			return fmt.Errorf("volume %s: %w", name, ErrConflict)
		}
		if err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		mounts = append(mounts, Mount{Type: MountVolume, Source: name, Target: p, Labels: spec.ImageVolumes.Labels})
	}
	spec.Mounts = mounts
	return nil
}

// helperMounts are the mounts of a helper made of the spec's image to set
// the owner of m: m, and the spec's other volume mounts, the image's
// volumes among them, so that the helper makes no anonymous volume either.
func helperMounts(spec ContainerSpec, m Mount) []mount.Mount {
	out := []mount.Mount{{Type: mount.Type(m.Type), Source: m.Source, Target: m.Target}}
	for _, o := range spec.Mounts {
		if o.Type == MountVolume && path.Clean(o.Target) != path.Clean(m.Target) {
			out = append(out, mount.Mount{Type: mount.TypeVolume, Source: o.Source, Target: o.Target,
				VolumeOptions: &mount.VolumeOptions{Labels: o.Labels, NoCopy: o.NoCopy}})
		}
	}
	return out
}

// created reads a volume's CreatedAt as the engine writes it (RFC 3339);
// zero when it is missing or unreadable.
func created(at string) time.Time {
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return time.Time{}
	}
	return t
}
