package fakeengine

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"afe.dev/sandbox/docker"
)

// running finds the running container for an Exec or Processes call:
// docker.ErrNotFound when there is none of the name, docker.ErrConflict when
// it is not running. The caller holds e.mu.
func (e *Engine) running(op Op, what, name string) (*container, error) {
	c := e.container(name)
	if err := e.check(op, targets(name, c)...); err != nil {
		return nil, err
	}
	if c == nil {
		return nil, fmt.Errorf("%s %s: %w: No such container: %s", what, name, docker.ErrNotFound, name)
	}
	if !c.running() {
		return nil, fmt.Errorf("%s %s: %w: Container %s is not running", what, name, docker.ErrConflict, c.id)
	}
	return c, nil
}

// Exec runs a command in a running container through the engine's
// ExecFunc and returns its exit code: docker.ErrNotFound when the container
// does not exist, docker.ErrConflict when it is not running.
func (e *Engine) Exec(ctx context.Context, name string, spec docker.ExecSpec) (int, error) {
	e.mu.Lock()
	c, err := e.running(OpExec, "exec in", name)
	if err != nil {
		e.mu.Unlock()
		return -1, err
	}
	report, f := *c.report(e.volumes), e.exec
	c.execs++
	e.emit(docker.ActionExecStart, c)
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		if c.execs > 0 {
			c.execs--
		}
		if _, ok := e.containers[c.id]; ok {
			e.emit(docker.ActionExecDie, c)
		}
	}()
	if f == nil {
		return 0, nil
	}
	code, err := f(ctx, report, spec)
	if ctx.Err() != nil {
		return -1, ctx.Err()
	}
	return code, err
}

// Tell finds the running container, but no process of a fake container
// reads its stdin: nothing ever answers (docker.ErrNoAnswer).
func (e *Engine) Tell(_ context.Context, name, _ string, _ func(string) bool) (string, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if _, err := e.running(OpTell, "tell", name); err != nil {
		return "", err
	}
	return "", fmt.Errorf("tell %s: %w", name, docker.ErrNoAnswer)
}

// Processes lists the processes of a running container: its first process
// (with the group of its user) and those added with AddProcess.
func (e *Engine) Processes(_ context.Context, name string) ([]docker.Process, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, err := e.running(OpProcesses, "list the processes of", name)
	if err != nil {
		return nil, err
	}
	gid := 0
	if _, g, ok := strings.Cut(c.spec.User, ":"); ok {
		gid, _ = strconv.Atoi(g)
	}
	out := []docker.Process{{PID: c.pid, RGID: gid, EGID: gid, SGID: gid, State: "Ss"}}
	return append(out, c.processes...), nil
}

// GroupProcesses lists the processes of Processes that have the group.
func (e *Engine) GroupProcesses(ctx context.Context, name string, gid int) ([]docker.Process, error) {
	ps, err := e.Processes(ctx, name)
	if err != nil {
		return nil, err
	}
	var out []docker.Process
	for _, p := range ps {
		if p.HasGroup(gid) {
			out = append(out, p)
		}
	}
	return out, nil
}

// AddProcess adds a process to a running container, as a command started
// in it would; it goes when the container stops.
func (e *Engine) AddProcess(name string, p docker.Process) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	c, err := e.running(OpProcesses, "add a process to", name)
	if err != nil {
		return err
	}
	c.processes = append(c.processes, p)
	return nil
}

// RemoveProcesses removes the added processes that have the group.
func (e *Engine) RemoveProcesses(name string, gid int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	c := e.container(name)
	if c == nil {
		return
	}
	kept := c.processes[:0]
	for _, p := range c.processes {
		if !p.HasGroup(gid) {
			kept = append(kept, p)
		}
	}
	c.processes = kept
}

// CopyWorkspace copies the tree of From into To through two helper
// containers, Name-from and Name-to, created and never started, and
// removed afterwards; helpers of those names with the copy's labels are
// replaced, with other labels the copy fails with docker.ErrConflict. A
// volume mount whose volume is missing is made, empty, by the engine, as
// for any container. It returns the bytes of the tar stream.
func (e *Engine) CopyWorkspace(_ context.Context, spec docker.CopySpec) (int64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.check(OpCopyWorkspace, spec.Name); err != nil {
		return 0, err
	}
	var helpers []*container
	defer func() {
		for _, h := range helpers {
			e.destroy(h)
		}
	}()
	for _, h := range []struct {
		name string
		m    docker.Mount
	}{{spec.Name + "-from", spec.From}, {spec.Name + "-to", spec.To}} {
		if stale := e.byName(h.name); stale != nil {
			if !labelsMatch(stale.spec.Labels, spec.Labels) {
				return 0, fmt.Errorf("copy helper %s: %w", h.name, docker.ErrConflict)
			}
			e.destroy(stale)
		}
		m := h.m
		m.Target, m.Owner = "/workspace", nil
		c, err := e.create(docker.ContainerSpec{Name: h.name, Image: spec.Image, Command: []string{"/afe-never-started"},
			User: "65534:65534", Labels: spec.Labels, Mounts: []docker.Mount{m}, Network: "none"})
		if err != nil {
			return 0, fmt.Errorf("create copy helper %s: %w", h.name, err)
		}
		helpers = append(helpers, c)
	}
	files, err := e.readTree(spec.From)
	if err != nil {
		return 0, fmt.Errorf("read the tree of %s-from: %w", spec.Name, err)
	}
	n, err := tarSize(files)
	if err != nil {
		return 0, err
	}
	if err := e.writeTree(spec.To, files); err != nil {
		return n, fmt.Errorf("write the tree into %s-to: %w", spec.Name, err)
	}
	return n, nil
}

// FillWorkspace writes the regular files of spec.Tree (entries under
// workspace/) into the volume of spec.To, as a helper created and removed
// would; it returns the bytes read from the tree.
func (e *Engine) FillWorkspace(_ context.Context, spec docker.FillSpec) (int64, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.check(OpFillWorkspace, spec.Name); err != nil {
		return 0, err
	}
	if e.volumes[spec.To.Source] == nil {
		return 0, fmt.Errorf("fill %s: %w", spec.To.Source, docker.ErrNotFound)
	}
	counted := &countedReader{r: spec.Tree}
	tr := tar.NewReader(counted)
	files := map[string]string{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return counted.n, err
		}
		p, ok := strings.CutPrefix(h.Name, "workspace/")
		if !ok || h.Typeflag != tar.TypeReg {
			continue
		}
		content, err := io.ReadAll(tr)
		if err != nil {
			return counted.n, err
		}
		files[p] = string(content)
	}
	_, _ = io.Copy(io.Discard, counted)
	return counted.n, e.writeTree(spec.To, files)
}

// countedReader counts the bytes read through it.
type countedReader struct {
	r io.Reader
	n int64
}

func (c *countedReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// readTree reads a mount's files: a volume's content, or a host folder's
// regular files. The caller holds e.mu.
func (e *Engine) readTree(m docker.Mount) (map[string]string, error) {
	if m.Type == docker.MountVolume {
		return copyLabels(e.volumes[m.Source].files), nil
	}
	files := map[string]string{}
	err := filepath.WalkDir(m.Source, func(p string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(m.Source, p)
		files[filepath.ToSlash(rel)] = string(b)
		return err
	})
	return files, err
}

// writeTree adds files to a mount. The caller holds e.mu.
func (e *Engine) writeTree(m docker.Mount, files map[string]string) error {
	if m.Type == docker.MountVolume {
		for p, content := range files {
			e.volumes[m.Source].files[p] = content
		}
		return nil
	}
	var errs []error
	for p, content := range files {
		dst := filepath.Join(m.Source, filepath.FromSlash(p))
		errs = append(errs, os.MkdirAll(filepath.Dir(dst), 0o755), os.WriteFile(dst, []byte(content), 0o644))
	}
	return errors.Join(errs...)
}

// tarSize is the size of the tar the engine would stream for the files,
// under the helper's workspace directory.
func tarSize(files map[string]string) (int64, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: "workspace/", Mode: 0o755}); err != nil {
		return 0, err
	}
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: "workspace/" + p, Mode: 0o644, Size: int64(len(files[p]))}); err != nil {
			return 0, err
		}
		if _, err := tw.Write([]byte(files[p])); err != nil {
			return 0, err
		}
	}
	if err := tw.Close(); err != nil {
		return 0, err
	}
	return int64(buf.Len()), nil
}

// InspectExec knows no exec: the fake engine keeps none once it ended.
func (e *Engine) InspectExec(_ context.Context, id string) (docker.ExecInfo, error) {
	return docker.ExecInfo{}, fmt.Errorf("inspect exec %s: %w", id, docker.ErrNotFound)
}

// OwnExec is true: every exec of the fake engine is made through Exec, by
// its one client.
func (e *Engine) OwnExec(string) bool { return true }

// ForgetExec has nothing to forget.
func (e *Engine) ForgetExec(string) {}

// Runtime knows runc, and the runtimes AddRuntime added.
func (e *Engine) Runtime(_ context.Context, name string) (docker.Runtime, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.check(OpRuntime); err != nil {
		return docker.Runtime{}, err
	}
	if name == "runc" || e.runtimes[name] {
		return docker.Runtime{Name: name, Path: name}, nil
	}
	return docker.Runtime{}, fmt.Errorf("the engine has no runtime %q: %w", name, docker.ErrNotFound)
}

// AddRuntime registers a runtime, as daemon.json and SIGHUP would.
func (e *Engine) AddRuntime(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.runtimes[name] = true
}
