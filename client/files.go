package client

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"strings"
	"time"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
)

// Files moves files in and out of a sandbox's workspace through the access
// API (as tars, extracted and made by the manager in a helper container
// that holds nothing but the workspace). Remote paths are absolute, under
// /workspace.
type Files struct {
	c       *Client
	sandbox string
}

// Files is the workspace of the sandbox.
func (c *Client) Files(sandbox string) *Files { return &Files{c: c, sandbox: sandbox} }

// Put copies the local file or tree into the workspace: a remote path
// ending in "/" (or /workspace itself) is a folder that receives it under
// its own name; any other is the name it gets, in a folder that must
// exist.
func (f *Files) Put(ctx context.Context, local, remote string) error {
	if _, err := os.Lstat(local); err != nil {
		return err
	}
	dir, name := uploadTarget(local, remote)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw, local, name)) }()
	defer func() { _ = pr.Close() }()
	return f.putTar(ctx, dir, pr)
}

// PutReader writes what r gives as the file remote (its folder must
// exist), with the mode's permission bits.
func (f *Files) PutReader(ctx context.Context, remote string, r io.Reader, mode os.FileMode) error {
	// A tar entry needs its size first: r is spooled.
	spool, err := os.CreateTemp("", "afe-put-*")
	if err != nil {
		return err
	}
	defer func() { _ = spool.Close(); _ = os.Remove(spool.Name()) }()
	size, err := io.Copy(spool, r)
	if err != nil {
		return err
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() {
		tw := tar.NewWriter(pw)
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: path.Base(remote), Size: size, Mode: int64(mode.Perm()), ModTime: time.Now()}
		err := tw.WriteHeader(hdr)
		if err == nil {
			_, err = io.Copy(tw, spool)
		}
		if err == nil {
			err = tw.Close()
		}
		pw.CloseWithError(err)
	}()
	defer func() { _ = pr.Close() }()
	return f.putTar(ctx, path.Dir(remote), pr)
}

// putTar extracts the tar into the remote folder dir.
func (f *Files) putTar(ctx context.Context, dir string, body io.Reader) error {
	err := f.c.subresource("POST", accessv1.ResourceSandboxes, f.sandbox, accessv1.SubresourceFiles).
		Param(accessv1.ParamPath, dir).SetHeader("Content-Type", "application/x-tar").
		Body(body).Do(ctx).Error()
	return wrap(err, "copy into %s:%s", f.sandbox, dir)
}

// GetTar is the tar of the remote file or tree, its top entry named after
// remote's last element; the caller closes it.
func (f *Files) GetTar(ctx context.Context, remote string) (io.ReadCloser, error) {
	rc, err := f.c.subresource("GET", accessv1.ResourceSandboxes, f.sandbox, accessv1.SubresourceFiles).
		Param(accessv1.ParamPath, remote).Stream(ctx)
	return rc, wrap(err, "copy from %s:%s", f.sandbox, remote)
}

// Get copies the remote file or tree to local: into local under its own
// name when local is an existing folder, else at local.
func (f *Files) Get(ctx context.Context, remote, local string) error {
	rc, err := f.GetTar(ctx, remote)
	if err != nil {
		return err
	}
	defer func() { _ = rc.Close() }()
	dest, top := downloadTarget(local)
	return extractTar(rc, dest, top)
}

// Open is the content of the remote file; the caller closes it.
func (f *Files) Open(ctx context.Context, remote string) (io.ReadCloser, error) {
	rc, err := f.GetTar(ctx, remote)
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err == nil && hdr.Typeflag != tar.TypeReg {
		err = fmt.Errorf("%s:%s is not a file", f.sandbox, remote)
	}
	if errors.Is(err, io.EOF) {
		err = fmt.Errorf("%s:%s: the tar is empty", f.sandbox, remote)
	}
	if err != nil {
		_ = rc.Close()
		return nil, err
	}
	return readCloser{Reader: tr, Closer: rc}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}

// uploadTarget is the folder an upload of local into remote extracts into,
// and the name local gets there: remote ending in "/" (or /workspace
// itself) receives local under its own name, any other remote is the
// name local gets.
func uploadTarget(local, remote string) (dir, name string) {
	if strings.HasSuffix(remote, "/") || path.Clean(remote) == "/workspace" {
		return remote, baseName(local)
	}
	return path.Dir(remote), path.Base(remote)
}
