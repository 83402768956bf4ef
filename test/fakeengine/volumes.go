package fakeengine

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"afe.dev/sandbox/docker"
)

type volume struct {
	name    string
	labels  map[string]string
	created time.Time
	// files is the volume's content, by path relative to its root.
	files map[string]string
}

// mountpoint is where the engine keeps a volume's data on its host.
func (v *volume) mountpoint() string { return "/var/lib/docker/volumes/" + v.name + "/_data" }

func (v *volume) report() *docker.Volume {
	return &docker.Volume{Name: v.name, Labels: copyLabels(v.labels), Created: v.created}
}

// EnsureVolume creates the volume unless it exists, and returns it.
func (e *Engine) EnsureVolume(_ context.Context, spec docker.VolumeSpec) (*docker.Volume, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.check(OpEnsureVolume, spec.Name); err != nil {
		return nil, err
	}
	if v, ok := e.volumes[spec.Name]; ok {
		return v.report(), nil
	}
	v, err := e.createVolume(spec.Name, spec.Labels)
	if err != nil {
		return nil, err
	}
	return v.report(), nil
}

func (e *Engine) createVolume(name string, labels map[string]string) (*volume, error) {
	if !validName.MatchString(name) {
		return nil, fmt.Errorf("create volume %s: %q includes invalid characters for a local volume name", name, name)
	}
	v := &volume{name: name, labels: copyLabels(labels), created: time.Now().Round(0), files: map[string]string{}}
	e.volumes[name] = v
	return v, nil
}

// InspectVolume returns docker.ErrNotFound when the volume does not exist.
func (e *Engine) InspectVolume(_ context.Context, name string) (*docker.Volume, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.check(OpInspectVolume, name); err != nil {
		return nil, err
	}
	v, ok := e.volumes[name]
	if !ok {
		return nil, fmt.Errorf("inspect volume %s: %w: no such volume", name, docker.ErrNotFound)
	}
	return v.report(), nil
}

// ListVolumes returns the volumes carrying all the labels.
func (e *Engine) ListVolumes(_ context.Context, labels map[string]string) ([]docker.Volume, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.check(OpListVolumes); err != nil {
		return nil, err
	}
	out := []docker.Volume{}
	for _, v := range e.volumes {
		if labelsMatch(v.labels, labels) {
			out = append(out, *v.report())
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// RemoveVolume removes the volume; it succeeds when it is already gone, and
// fails with docker.ErrConflict while a container, running or not, mounts
// it.
func (e *Engine) RemoveVolume(_ context.Context, name string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.check(OpRemoveVolume, name); err != nil {
		return err
	}
	if _, ok := e.volumes[name]; !ok {
		return nil
	}
	var users []string
	for _, c := range e.containers {
		for _, m := range c.spec.Mounts {
			if m.Type == docker.MountVolume && m.Source == name {
				users = append(users, c.id)
			}
		}
	}
	if len(users) > 0 {
		sort.Strings(users)
		return fmt.Errorf("remove volume %s: %w: volume is in use - [%s]", name, docker.ErrConflict, strings.Join(users, ", "))
	}
	delete(e.volumes, name)
	return nil
}

// WriteFile puts a file into a volume, as a container writing to its mount
// would. It fails when the volume does not exist.
func (e *Engine) WriteFile(volumeName, path, content string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.volumes[volumeName]
	if !ok {
		return fmt.Errorf("volume %s: %w", volumeName, docker.ErrNotFound)
	}
	v.files[path] = content
	return nil
}

// Files returns a copy of a volume's content by path, nil when the volume
// does not exist.
func (e *Engine) Files(volumeName string) map[string]string {
	e.mu.Lock()
	defer e.mu.Unlock()
	v, ok := e.volumes[volumeName]
	if !ok {
		return nil
	}
	return copyLabels(v.files)
}
