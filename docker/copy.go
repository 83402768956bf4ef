package docker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/docker/docker/api/types/container"

	"afe.dev/sandbox/internal/tarbound"
)

// CopySpec is a copy of a workspace tree from one mount to another.
type CopySpec struct {
	// Name prefixes the two helper containers, Name-from and Name-to.
	Name string
	// Image is an image present on the engine; nothing of it is executed.
	Image  string
	Labels map[string]string
	// From and To are mounted at /workspace in the helpers (their Target is
	// ignored).
	From Mount
	To   Mount
	// MaxBytes bounds the copy: its entries, each counted as a plain tar
	// holds it (internal/tarbound), 0 bounding no size; a sparse entry is
	// refused either way. The copy fails at the entry that passes it
	// (errors.Is tarbound.ErrTooLarge, or tarbound.ErrSparse), before
	// anything of that entry reaches To; what was copied before it stays
	// there for the caller to remove.
	MaxBytes int64
	// Owners, when set, gives the files of one owner to another on the
	// way (a workspace restored into a sandbox with another user).
	Owners *OwnerChange
}

// copyPath is where the helpers mount the trees.
const copyPath = "/workspace"

// CopyWorkspace copies the tree of From into To, owners and modes kept,
// through two helper containers that are created and never started (so
// nothing runs, and the sandbox container is not involved): the engine
// streams a tar out of the first and into the second. The helpers are
// removed afterwards, also on failure; helpers of the same names and labels
// left by an earlier crash are replaced, and a container of a helper's name
// with other labels fails the copy with ErrConflict. It returns the bytes of the tar stream.
func (c *Client) CopyWorkspace(ctx context.Context, spec CopySpec) (int64, error) {
	from, to := spec.Name+"-from", spec.Name+"-to"
	var created []string
	defer func() {
		rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		for _, id := range created {
			_ = c.RemoveContainer(rmCtx, id)
		}
	}()
	for _, h := range []struct {
		name string
		m    Mount
	}{{from, spec.From}, {to, spec.To}} {
		id, err := c.createHelper(ctx, "copy helper", h.name, spec.Image, spec.Labels, h.m)
		if err != nil {
			return 0, err
		}
		created = append(created, id)
	}
	c.count("copy_from_container")
	rc, _, err := c.api.CopyFromContainer(ctx, created[0], copyPath)
	if err != nil {
		return 0, wrap(err, "read the tree of "+from)
	}
	defer func() { _ = rc.Close() }()
	n, err := c.writeTree(ctx, created[1], rc, spec.MaxBytes, spec.Owners)
	if err != nil {
		return n, fmt.Errorf("copy the tree of %s into %s: %w", from, to, err)
	}
	return n, nil
}

// writeTree writes the tar of rc (entries under workspace/) into the
// helper at "/", through the bound (tarbound), the owners changed when
// asked; it returns the bytes read from rc. On an error rc is closed when
// it is a ReadCloser, so that its writer ends too.
func (c *Client) writeTree(ctx context.Context, helper string, rc io.Reader, maxBytes int64, owners *OwnerChange) (int64, error) {
	// The stream goes through the bound on its way: each entry's header
	// is passed on once checked, and its owners changed when asked.
	pr, pw := io.Pipe()
	bound := &tarbound.Bound{Max: maxBytes}
	var n int64
	passed := make(chan error, 1)
	go func() {
		var err error
		n, err = tarbound.Pass(pw, rc, bound)
		_ = pw.CloseWithError(err)
		passed <- err
	}()
	var tree io.Reader = pr
	if owners != nil {
		changed := changeOwners(pr, *owners)
		defer func() { _ = changed.Close() }()
		tree = changed
	}
	c.count("copy_to_container")
	err := c.api.CopyToContainer(ctx, helper, "/", tree, container.CopyToContainerOptions{})
	_ = pr.CloseWithError(errCopyEnded)
	if closer, ok := rc.(io.Closer); ok {
		_ = closer.Close()
	}
	if perr := <-passed; perr != nil && !errors.Is(perr, errCopyEnded) {
		return n, perr
	}
	if err != nil {
		return n, wrap(err, "write the tree")
	}
	return n, nil
}

// FillSpec fills a workspace volume from a tar stream: a workspace moved
// from another engine.
type FillSpec struct {
	// Name names the helper container.
	Name   string
	Labels map[string]string
	// To is mounted at /workspace in the helper (its Target is ignored).
	To Mount
	// Tree is a tar whose entries are under workspace/, as ExportWorkspace
	// streams it.
	Tree io.Reader
	// MaxBytes and Owners are as in CopySpec.
	MaxBytes int64
	Owners   *OwnerChange
}

// FillWorkspace writes the tree of spec.Tree into the volume of spec.To
// through a helper container created and never started (FilesImage), as
// CopyWorkspace writes its copy, and removes the helper. It returns the
// bytes read from Tree.
func (c *Client) FillWorkspace(ctx context.Context, spec FillSpec) (int64, error) {
	if err := c.ensureFilesImage(ctx); err != nil {
		return 0, err
	}
	m := spec.To
	m.NoCopy = true
	id, err := c.createHelper(ctx, "fill helper", spec.Name, FilesImage, spec.Labels, m)
	if err != nil {
		return 0, err
	}
	defer func() {
		rmCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		_ = c.RemoveContainer(rmCtx, id)
	}()
	return c.writeTree(ctx, id, spec.Tree, spec.MaxBytes, spec.Owners)
}

// ExportWorkspace streams the tree of the volume of m as a tar whose
// entries are under workspace/, through a helper container created and
// never started (FilesImage); closing the stream removes the helper.
func (c *Client) ExportWorkspace(ctx context.Context, name string, labels map[string]string, m Mount) (io.ReadCloser, error) {
	h, err := c.OpenFilesHelper(ctx, FilesHelperSpec{Name: name, Labels: labels, Workspace: m})
	if err != nil {
		return nil, err
	}
	rc, err := h.Read(ctx, copyPath)
	if err != nil {
		return nil, errors.Join(err, h.Close())
	}
	return &helperStream{ReadCloser: rc, h: h}, nil
}

// helperStream is a helper's archive stream, which removes the helper
// once closed.
type helperStream struct {
	io.ReadCloser
	h *FilesHelper
}

func (s *helperStream) Close() error {
	return errors.Join(s.ReadCloser.Close(), s.h.Close())
}

// errCopyEnded stops the stream of a copy whose writing side has ended.
var errCopyEnded = errors.New("the copy ended")

// createHelper creates a helper container, never started, whose only mount
// is m at copyPath (m's Target and Owner are ignored): nothing of image
// runs, and the engine's archive API reads and writes the tree there. A
// helper of the name left by a crash is replaced first (removeStaleHelper).
// what names the helper in errors.
func (c *Client) createHelper(ctx context.Context, what, name, image string, labels map[string]string, m Mount) (string, error) {
	if err := c.removeStaleHelper(ctx, name, labels); err != nil {
		return "", err
	}
	m.Target, m.Owner = copyPath, nil
	cfg, hc, _ := containerConfig(ContainerSpec{
		Name:            name,
		Image:           image,
		Entrypoint:      []string{},
		Command:         []string{"/afe-never-started"},
		User:            "65534:65534",
		Labels:          labels,
		Mounts:          []Mount{m},
		Network:         "none",
		CapDrop:         []string{"ALL"},
		NoNewPrivileges: true,
	})
	c.count("container_create")
	resp, err := c.api.ContainerCreate(ctx, cfg, hc, nil, nil, name)
	if err != nil {
		return "", wrap(err, "create "+what+" "+name)
	}
	return resp.ID, nil
}

// removeStaleHelper removes a helper of the name that an earlier copy left
// (a crash cut it short) when it carries the labels of this copy; a
// container of that name with other labels is someone else's and fails the
// copy with ErrConflict.
func (c *Client) removeStaleHelper(ctx context.Context, name string, labels map[string]string) error {
	have, err := c.InspectContainer(ctx, name)
	if errors.Is(err, ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if !labelsMatch(have.Labels, labels) {
		return fmt.Errorf("copy helper %s: %w", name, ErrConflict)
	}
	return c.RemoveContainer(ctx, have.ID)
}
