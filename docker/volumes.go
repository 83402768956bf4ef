package docker

import (
	"context"

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
	return &Volume{Name: v.Name, Labels: v.Labels}, nil
}

// InspectVolume returns ErrNotFound when the volume does not exist.
func (c *Client) InspectVolume(ctx context.Context, name string) (*Volume, error) {
	c.count("volume_inspect")
	v, err := c.api.VolumeInspect(ctx, name)
	if err != nil {
		return nil, wrap(err, "inspect volume "+name)
	}
	return &Volume{Name: v.Name, Labels: v.Labels}, nil
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
		out = append(out, Volume{Name: v.Name, Labels: v.Labels})
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
