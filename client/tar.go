package client

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"afe.dev/sandbox/internal/tarbound"
)

// baseName is the last element of a local path.
func baseName(local string) string { return filepath.Base(local) }

// writeTar writes the file or tree at local as a tar whose top entry is
// name.
func writeTar(w io.Writer, local, name string) error {
	tw := tar.NewWriter(w)
	err := filepath.WalkDir(local, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(local, p)
		if err != nil {
			return err
		}
		link := ""
		if info.Mode()&os.ModeSymlink != 0 {
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		}
		hdr, err := tar.FileInfoHeader(info, link)
		if err != nil {
			return err
		}
		hdr.Name = path.Join(name, filepath.ToSlash(rel))
		if info.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname = "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !info.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return err
	}
	return tw.Close()
}

// downloadTarget is the folder a download to local extracts into, and the
// name its top entry gets there: into local under its own name when local
// is an existing folder (top empty), else at local.
func downloadTarget(local string) (dest, top string) {
	if info, err := os.Stat(local); err == nil && info.IsDir() {
		return local, ""
	}
	return filepath.Dir(local), filepath.Base(local)
}

// extractTar writes the tar's entries under dest, its top entry renamed
// top (kept when empty). Entries that would land outside dest, or go
// through a symlink, are refused: the tar comes from a workspace the
// workload controls. So are sparse entries (the engine never makes one),
// which archive/tar would expand to their real size: what is written is
// then never more than what was received.
func extractTar(r io.Reader, dest, top string) error {
	root, err := os.OpenRoot(dest)
	if err != nil {
		return err
	}
	defer func() { _ = root.Close() }()
	tr := tar.NewReader(r)
	bound := &tarbound.Bound{}
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		if err := bound.Check(hdr); err != nil {
			return fmt.Errorf("refused: %w", err)
		}
		name := path.Clean(hdr.Name)
		if path.IsAbs(name) || name == ".." || strings.HasPrefix(name, "../") {
			return fmt.Errorf("refused: tar entry %q leaves %s", hdr.Name, dest)
		}
		if top != "" {
			_, rest, _ := strings.Cut(name, "/")
			name = path.Join(top, rest)
		}
		mode := fs.FileMode(hdr.Mode).Perm()
		switch hdr.Typeflag {
		case tar.TypeDir:
			if err := root.MkdirAll(name, mode|0o700); err != nil {
				return err
			}
		case tar.TypeReg:
			f, err := root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
			if err != nil {
				return err
			}
			if _, err := io.Copy(f, tr); err != nil {
				_ = f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
		case tar.TypeSymlink:
			if err := root.Symlink(hdr.Linkname, name); err != nil {
				return err
			}
		default:
			return fmt.Errorf("refused: tar entry %q is neither a file, a folder nor a symlink", hdr.Name)
		}
	}
}
