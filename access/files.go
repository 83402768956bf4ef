package access

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/naming"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/internal/tarbound"
)

// Files: GET sandboxes/NAME/files?path=/workspace/P answers with a tar of P
// (a file or a tree, entries named after P's last element); POST with a tar
// body extracts it into the folder path=/workspace/D. Both go through a
// helper container that is never started and holds nothing but the
// workspace (docker.FilesHelper), so no symlink the workload plants can
// lead outside it; a path crossing a symlink is refused outright. Both are
// spooled to the manager's temporary folder first, bounded by
// MaxFileBytes (the tar's bytes, the bytes written to the spool, and the
// entries' real sizes: a sparse entry is refused, see internal/tarbound),
// so a transfer too large fails before anything is written.
// Uploaded entries become the sandbox's uid:gid, without setuid, setgid or
// sticky bits; devices, fifos and hard links are refused.

// DefaultMaxFileBytes is the default bound of one transfer's tar.
const DefaultMaxFileBytes = 1 << 30

// Audit reasons of file transfers.
const (
	UploadReason   = "Upload"
	DownloadReason = "Download"
)

// workspacePath is p cleaned, when it is /workspace or under it.
func workspacePath(p string) (string, error) {
	if !strings.HasPrefix(p, "/") {
		return "", refusePath("path %q is not absolute: give /workspace/...", p)
	}
	clean := path.Clean(p)
	if clean != sandboxspec.WorkspacePath && !strings.HasPrefix(clean, sandboxspec.WorkspacePath+"/") {
		return "", refusePath("path %q is outside %s", p, sandboxspec.WorkspacePath)
	}
	return clean, nil
}

func badRequest(format string, args ...any) error {
	return badRequestFor(accessv1.ReasonInvalidRequest, format, args...)
}

// refusePath refuses a transfer's path.
func refusePath(format string, args ...any) error {
	return badRequestFor(accessv1.ReasonPathRefused, format, args...)
}

// refuseTar refuses an upload's tar.
func refuseTar(format string, args ...any) error {
	return badRequestFor(accessv1.ReasonTarRefused, format, args...)
}

func badRequestFor(cause accessv1.Reason, format string, args ...any) error {
	return &statusError{http.StatusBadRequest, metav1.StatusReasonBadRequest, cause, fmt.Sprintf(format, args...)}
}

func tooLarge(limit int64) error {
	return &statusError{http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, accessv1.ReasonTransferTooLarge,
		fmt.Sprintf("the transfer is larger than the manager's bound of %d bytes (--access-max-file-bytes)", limit)}
}

// openHelper makes the files helper of the target's workspace: the mount
// the verified sandbox container has at /workspace.
func (s *Server) openHelper(ctx context.Context, t *target) (*docker.FilesHelper, error) {
	var ws *docker.Mount
	for _, m := range t.mounts {
		if m.Destination != sandboxspec.WorkspacePath {
			continue
		}
		switch m.Type {
		case docker.MountVolume:
			ws = &docker.Mount{Type: docker.MountVolume, Source: m.Name}
		case docker.MountBind:
			ws = &docker.Mount{Type: docker.MountBind, Source: m.Source}
		}
	}
	if ws == nil {
		return nil, notReady("sandbox %s has no workspace mounted", t.sbx.Name)
	}
	id := sandboxspec.IdentityOf(t.sbx, s.opts.Instance)
	labels := id.Labels(RoleFiles)
	return s.engine.OpenFilesHelper(ctx, docker.FilesHelperSpec{
		Name:      naming.Container(id.Key) + "_files-" + rand.String(8),
		Labels:    labels,
		Workspace: *ws,
	})
}

// RoleFiles is the afe.role of a files helper container.
const RoleFiles = "files"

// noSymlinks refuses p when it, or a folder on its way from /workspace,
// is a symlink; with mustBeDir, p must be a folder.
func noSymlinks(ctx context.Context, h *docker.FilesHelper, p string, mustBeDir bool) error {
	rel := strings.TrimPrefix(strings.TrimPrefix(p, sandboxspec.WorkspacePath), "/")
	cur := sandboxspec.WorkspacePath
	parts := []string{}
	if rel != "" {
		parts = strings.Split(rel, "/")
	}
	for i := -1; i < len(parts); i++ {
		if i >= 0 {
			cur = cur + "/" + parts[i]
		}
		info, err := h.Stat(ctx, cur)
		if errors.Is(err, docker.ErrNotFound) {
			return &statusError{http.StatusNotFound, metav1.StatusReasonNotFound, accessv1.ReasonPathNotFound, fmt.Sprintf("%s does not exist in the workspace", cur)}
		}
		if err != nil {
			return err
		}
		if info.Mode&os.ModeSymlink != 0 {
			return refusePath("%s is a symlink: refused (transfers never follow the workspace's symlinks)", cur)
		}
		if i < len(parts)-1 && !info.Mode.IsDir() || mustBeDir && i == len(parts)-1 && !info.Mode.IsDir() {
			return refusePath("%s is not a folder", cur)
		}
	}
	return nil
}

// transfer is what a file transfer moved: the bytes of its tar, and the
// bytes of files in it (what extracting it writes).
type transfer struct {
	tar, files int64
	written    bool
}

// serveDownload answers with the tar of path.
func (s *Server) serveDownload(w http.ResponseWriter, r *http.Request, req *request) {
	_, _, err := s.runTransfer(r, req, DownloadReason, func(ctx context.Context, t *target, p string) (transfer, error) {
		return s.download(ctx, w, t, p)
	})
	if err != nil {
		writeError(w, err)
	}
}

// runTransfer runs move on the request's sandbox and the workspace path its
// query names, once both are found, and audits it under reason (also when
// it failed before move). It returns the path and what move moved.
func (s *Server) runTransfer(r *http.Request, req *request, reason string, move func(context.Context, *target, string) (transfer, error)) (string, transfer, error) {
	ctx := r.Context()
	p, err := workspacePath(r.URL.Query().Get("path"))
	var t *target
	var tr transfer
	if err == nil {
		t, err = s.target(ctx, req.namespace, req.name)
	}
	if err == nil {
		tr, err = move(ctx, t, p)
	}
	s.auditFiles(ctx, req, t, reason, p, tr, err)
	return p, tr, err
}

// download writes the tar of p to w once it is whole and within the bound
// (its bytes and its entries, see tarbound); nothing is written to w on
// failure.
func (s *Server) download(ctx context.Context, w http.ResponseWriter, t *target, p string) (transfer, error) {
	h, err := s.openHelper(ctx, t)
	if err != nil {
		return transfer{}, err
	}
	defer func() { _ = h.Close() }()
	if err := noSymlinks(ctx, h, p, false); err != nil {
		return transfer{}, err
	}
	rc, err := h.Read(ctx, p)
	if err != nil {
		return transfer{}, err
	}
	defer func() { _ = rc.Close() }()
	spool, err := os.CreateTemp(s.opts.SpoolDir, "afe-download-*.tar")
	if err != nil {
		return transfer{}, err
	}
	defer func() { _ = spool.Close(); _ = os.Remove(spool.Name()) }()
	b := &tarbound.Bound{Max: s.maxFileBytes()}
	n, err := tarbound.Pass(spool, io.LimitReader(rc, s.maxFileBytes()+1), b)
	tr := transfer{tar: n, files: b.Data}
	if err := s.tarError(n, err); err != nil {
		return tr, fmt.Errorf("read %s: %w", p, err)
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return tr, err
	}
	w.Header().Set("Content-Type", "application/x-tar")
	w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
	w.WriteHeader(http.StatusOK)
	tr.written = true
	_, err = io.Copy(w, spool)
	return tr, err
}

// tarError is the answer to a tar of n bytes that tarbound refused with
// err: 413 past the bound (also when the bytes alone pass it), 400 for a
// sparse entry or what is not a tar.
func (s *Server) tarError(n int64, err error) error {
	var se *statusError
	switch {
	case n > s.maxFileBytes() || errors.Is(err, tarbound.ErrTooLarge):
		return tooLarge(s.maxFileBytes())
	case err == nil:
		return nil
	case errors.As(err, &se):
		return err
	case errors.Is(err, tarbound.ErrSparse):
		return refuseTar("%v (archive/tar would write its holes as zeros): send the file whole", err)
	case errors.Is(err, tarbound.ErrNotTar), errors.Is(err, io.ErrUnexpectedEOF):
		return refuseTar("the tar does not read: %v", err)
	}
	return err
}

// serveUpload extracts the request's tar into the folder path.
func (s *Server) serveUpload(w http.ResponseWriter, r *http.Request, req *request) {
	p, tr, err := s.runTransfer(r, req, UploadReason, func(ctx context.Context, t *target, p string) (transfer, error) {
		return s.upload(ctx, r.Body, t, p)
	})
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess,
		Message: fmt.Sprintf("%d bytes of files (%d bytes of tar) extracted into %s", tr.files, tr.tar, p)})
}

// upload spools body, checks and rewrites its entries, and only then
// extracts them into dir. The bound holds for the bytes read, for the
// entries (a sparse one is refused, every other counts its real size)
// and for the bytes written to the spool; past it nothing is extracted.
func (s *Server) upload(ctx context.Context, body io.Reader, t *target, dir string) (transfer, error) {
	spool, err := os.CreateTemp(s.opts.SpoolDir, "afe-upload-*.tar")
	if err != nil {
		return transfer{}, err
	}
	defer func() { _ = spool.Close(); _ = os.Remove(spool.Name()) }()
	limit := s.maxFileBytes()
	b := &tarbound.Bound{Max: limit}
	n, err := tarbound.Copy(tarbound.LimitWriter(spool, limit), io.LimitReader(body, limit+1), b, ownedBy(t.uid, t.gid))
	tr := transfer{tar: n, files: b.Data}
	if err := s.tarError(n, err); err != nil {
		return tr, err
	}
	if _, err := spool.Seek(0, io.SeekStart); err != nil {
		return tr, err
	}
	h, err := s.openHelper(ctx, t)
	if err != nil {
		return tr, err
	}
	defer func() { _ = h.Close() }()
	if err := noSymlinks(ctx, h, dir, true); err != nil {
		return tr, err
	}
	tr.written = true
	return tr, h.Write(ctx, dir, spool)
}

// ownedBy rewrites each uploaded entry: owned by uid:gid, without
// setuid, setgid and sticky bits; entries that are not files, folders or
// symlinks, or whose names are absolute or climb out with "..", are
// refused.
func ownedBy(uid, gid int) func(*tar.Header) (*tar.Header, error) {
	return func(hdr *tar.Header) (*tar.Header, error) {
		name := path.Clean(hdr.Name)
		if path.IsAbs(hdr.Name) || name == ".." || strings.HasPrefix(name, "../") {
			return nil, refuseTar("tar entry %q leaves the destination", hdr.Name)
		}
		size := int64(0)
		switch hdr.Typeflag {
		case tar.TypeReg:
			size = hdr.Size
		case tar.TypeDir, tar.TypeSymlink:
		default:
			return nil, refuseTar("tar entry %q is of a type uploads refuse (only files, folders and symlinks)", hdr.Name)
		}
		return &tar.Header{
			Typeflag: hdr.Typeflag, Name: hdr.Name, Linkname: hdr.Linkname, Size: size,
			Mode: hdr.Mode &^ 0o7000, Uid: uid, Gid: gid, ModTime: hdr.ModTime, Format: tar.FormatPAX,
		}, nil
	}
}

// maxFileBytes is the bound of a transfer.
func (s *Server) maxFileBytes() int64 {
	if s.opts.MaxFileBytes > 0 {
		return s.opts.MaxFileBytes
	}
	return DefaultMaxFileBytes
}
