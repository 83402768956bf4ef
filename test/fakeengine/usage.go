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

// DiskUsage reports the writable layer of every container and every volume
// of the labels: the size and the number of the files the fake holds in
// each volume, and what SetUsage gave a container's layer (no inodes).
func (e *Engine) DiskUsage(_ context.Context, labels map[string]string) (*docker.DiskUsage, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.check(OpDiskUsage); err != nil {
		return nil, err
	}
	out := &docker.DiskUsage{Containers: map[string]int64{}, Layers: map[string]docker.LayerUsage{},
		Volumes: map[string]docker.VolumeUsage{}, InodesCounted: true}
	for id, c := range e.containers {
		if labelsMatch(c.spec.Labels, labels) {
			out.Containers[id] = c.layerBytes
			out.Layers[id] = docker.LayerUsage{Labels: copyLabels(c.spec.Labels), Bytes: c.layerBytes}
		}
	}
	for name, v := range e.volumes {
		if !labelsMatch(v.labels, labels) {
			continue
		}
		var n int64
		for _, content := range v.files {
			n += int64(len(content))
		}
		out.Volumes[name] = docker.VolumeUsage{Labels: copyLabels(v.labels), Bytes: n, Inodes: int64(len(v.files))}
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
