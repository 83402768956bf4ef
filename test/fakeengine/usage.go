package fakeengine

import (
	"context"
	"fmt"

	"afe.dev/sandbox/docker"
)

// ContainerUsage reports a running container's usage: what SetUsage gave
// it, zero otherwise. The fake's containers use no CPU or memory of their
// own.
func (e *Engine) ContainerUsage(_ context.Context, id string) (*docker.ContainerUsage, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.container(id)
	if err := e.check(OpContainerUsage, targets(id, c)...); err != nil {
		return nil, err
	}
	if c == nil || !c.running() {
		return nil, fmt.Errorf("stats of container %s: %w: not running", id, docker.ErrNotFound)
	}
	u := c.usage
	return &u, nil
}

// DiskUsage reports every container's writable layer and every volume: the
// size of the files the fake holds in each volume, and what SetUsage gave
// a container's layer.
func (e *Engine) DiskUsage(context.Context) (*docker.DiskUsage, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.check(OpDiskUsage); err != nil {
		return nil, err
	}
	out := &docker.DiskUsage{Containers: map[string]int64{}, Volumes: map[string]docker.VolumeUsage{}}
	for id, c := range e.containers {
		out.Containers[id] = c.layerBytes
	}
	for name, v := range e.volumes {
		var n int64
		for _, content := range v.files {
			n += int64(len(content))
		}
		out.Volumes[name] = docker.VolumeUsage{Labels: copyLabels(v.labels), Bytes: n}
	}
	return out, nil
}

// StorageQuota is false: like the engine these tests run on, the fake
// cannot limit a writable layer.
func (e *Engine) StorageQuota(context.Context) (bool, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.check(OpStorageQuota); err != nil {
		return false, err
	}
	return false, nil
}

// SetUsage sets what a container reports it used, and the size of its
// writable layer.
func (e *Engine) SetUsage(name string, u docker.ContainerUsage, layerBytes int64) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.container(name)
	if c == nil {
		return fmt.Errorf("container %s: %w", name, docker.ErrNotFound)
	}
	c.usage, c.layerBytes = u, layerBytes
	return nil
}
