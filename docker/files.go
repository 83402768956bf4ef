package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/image"
)

// FilesImage is the image of the files helpers: a filesystem holding one
// empty file (an image needs a layer), imported from a tar made here (no
// registry).
const FilesImage = "afe/files-helper:v2"

// FilesHelperSpec is a helper container giving access to a workspace.
type FilesHelperSpec struct {
	Name   string
	Labels map[string]string
	// Workspace is mounted at /workspace (its Target is ignored).
	Workspace Mount
}

// FilesHelper is a container, created and never started, whose only
// content is the workspace at /workspace: the engine's archive API reads
// and writes files there. The engine resolves symlinks within the
// container's filesystem, which holds nothing else, so a symlink in the
// workspace cannot lead a read or a write to anything outside it.
type FilesHelper struct {
	c  *Client
	ID string
}

// PathInfo is what the engine reports of a path.
type PathInfo struct {
	Name       string
	Size       int64
	Mode       os.FileMode
	LinkTarget string
}

// OpenFilesHelper creates the helper (FilesImage is imported first when
// missing). A helper of that name with the spec's labels, left by a crash,
// is replaced; one with other labels fails with ErrConflict. Close removes
// it.
func (c *Client) OpenFilesHelper(ctx context.Context, spec FilesHelperSpec) (*FilesHelper, error) {
	if err := c.ensureFilesImage(ctx); err != nil {
		return nil, err
	}
	m := spec.Workspace
	// NoCopy: an empty workspace must not get the image's /workspace (and
	// its root owner) copied into it.
	m.NoCopy = true
	id, err := c.createHelper(ctx, "files helper", spec.Name, FilesImage, spec.Labels, m)
	if err != nil {
		return nil, err
	}
	return &FilesHelper{c: c, ID: id}, nil
}

// Close removes the helper.
func (h *FilesHelper) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return h.c.RemoveContainer(ctx, h.ID)
}

// Stat reports the path; ErrNotFound when it does not exist. A symlink is
// reported as such (its LinkTarget), not followed.
func (h *FilesHelper) Stat(ctx context.Context, path string) (PathInfo, error) {
	h.c.count("container_stat_path")
	st, err := h.c.api.ContainerStatPath(ctx, h.ID, path)
	if err != nil {
		return PathInfo{}, wrap(err, "stat "+path)
	}
	return PathInfo{Name: st.Name, Size: st.Size, Mode: st.Mode, LinkTarget: st.LinkTarget}, nil
}

// Read streams the path (a file or a tree) as a tar whose entries are named
// after its last element.
func (h *FilesHelper) Read(ctx context.Context, path string) (io.ReadCloser, error) {
	h.c.count("copy_from_container")
	rc, _, err := h.c.api.CopyFromContainer(ctx, h.ID, path)
	if err != nil {
		return nil, wrap(err, "read "+path)
	}
	return rc, nil
}

// Write extracts the tar into the folder dir, which must exist.
func (h *FilesHelper) Write(ctx context.Context, dir string, tarStream io.Reader) error {
	h.c.count("copy_to_container")
	err := h.c.api.CopyToContainer(ctx, h.ID, dir, tarStream, container.CopyToContainerOptions{})
	return wrap(err, "write into "+dir)
}

// ensureFilesImage imports FilesImage when the engine lacks it.
func (c *Client) ensureFilesImage(ctx context.Context) error {
	c.count("image_inspect")
	if _, err := c.api.ImageInspect(ctx, FilesImage); err == nil {
		return nil
	} else if !isNotFound(err) {
		return wrap(err, "inspect image "+FilesImage)
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: "afe-files-helper", Typeflag: tar.TypeReg, Mode: 0o444, ModTime: time.Unix(0, 0)}); err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	c.count("image_import")
	rc, err := c.api.ImageImport(ctx, image.ImportSource{Source: &buf, SourceName: "-"}, FilesImage, image.ImportOptions{})
	if err != nil {
		return wrap(err, "import "+FilesImage)
	}
	defer func() { _ = rc.Close() }()
	if _, err := io.Copy(io.Discard, rc); err != nil {
		return fmt.Errorf("import %s: %w", FilesImage, err)
	}
	if _, err := c.api.ImageInspect(ctx, FilesImage); err != nil {
		return errors.Join(fmt.Errorf("import %s", FilesImage), err)
	}
	return nil
}
