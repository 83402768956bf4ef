package main

import (
	"archive/tar"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"afe.dev/sandbox/internal/tarbound"
)

// cpCommand copies a file or a tree into a sandbox's workspace or out of
// it, through the access API:
//
//	kubectl afe cp LOCAL SANDBOX:/workspace/PATH
//	kubectl afe cp SANDBOX:/workspace/PATH LOCAL
//
// Up, PATH ending in "/" (or /workspace itself) is a folder that receives
// LOCAL under its own name; otherwise LOCAL lands at PATH, whose folder
// must exist. Down, the file or tree is written at LOCAL, or into LOCAL
// under its own name when LOCAL is an existing folder.
func cpCommand(cfg *rest.Config, ns string, args []string, _ io.Writer) error {
	if len(args) != 2 {
		return errors.New("cp needs LOCAL SANDBOX:/workspace/PATH, or SANDBOX:/workspace/PATH LOCAL")
	}
	if sandbox, remote, ok := remoteArg(args[1]); ok {
		return upload(cfg, ns, sandbox, args[0], remote)
	}
	if sandbox, remote, ok := remoteArg(args[0]); ok {
		return download(cfg, ns, sandbox, remote, args[1])
	}
	return errors.New("cp needs one of its two paths as SANDBOX:/workspace/PATH")
}

// remoteArg splits SANDBOX:/PATH.
func remoteArg(a string) (sandbox, p string, ok bool) {
	sandbox, p, ok = strings.Cut(a, ":")
	if !ok || sandbox == "" || !strings.HasPrefix(p, "/") || strings.Contains(sandbox, "/") {
		return "", "", false
	}
	return sandbox, p, true
}

func filesURL(cfg *rest.Config, ns, sandbox, p string) (string, *http.Client, error) {
	u, err := accessURL(cfg, ns, "sandboxes", sandbox, "files")
	if err != nil {
		return "", nil, err
	}
	u.RawQuery = url.Values{"path": {p}}.Encode()
	hc, err := rest.HTTPClientFor(cfg)
	return u.String(), hc, err
}

// doOK sends req and returns the answer when it is 200 OK, for the caller
// to read and close; any other answer is an error with its Status's
// message (apiError), its body closed.
func doOK(hc *http.Client, req *http.Request) (*http.Response, error) {
	resp, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusOK {
		defer func() { _ = resp.Body.Close() }()
		return nil, apiError(resp)
	}
	return resp, nil
}

// apiError is the message of a Status answer.
func apiError(resp *http.Response) error {
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	var st metav1.Status
	if json.Unmarshal(body, &st) == nil && st.Message != "" {
		return fmt.Errorf("%s (%d)", st.Message, resp.StatusCode)
	}
	return fmt.Errorf("%s: %s", resp.Status, strings.TrimSpace(string(body)))
}

// upload sends local as a tar into the sandbox.
func upload(cfg *rest.Config, ns, sandbox, local, remote string) error {
	dir, name := uploadTarget(local, remote)
	if _, err := os.Lstat(local); err != nil {
		return err
	}
	u, hc, err := filesURL(cfg, ns, sandbox, dir)
	if err != nil {
		return err
	}
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(writeTar(pw, local, name)) }()
	req, err := http.NewRequestWithContext(context.Background(), http.MethodPost, u, pr)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/x-tar")
	resp, err := doOK(hc, req)
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	return nil
}

// uploadTarget is the folder an upload of local into remote extracts into,
// and the name local gets there: remote ending in "/" (or /workspace
// itself) receives local under its own name, any other remote is the
// name local gets.
func uploadTarget(local, remote string) (dir, name string) {
	if strings.HasSuffix(remote, "/") || path.Clean(remote) == "/workspace" {
		return remote, filepath.Base(local)
	}
	return path.Dir(remote), path.Base(remote)
}

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

// download fetches remote as a tar and writes it at local.
func download(cfg *rest.Config, ns, sandbox, remote, local string) error {
	u, hc, err := filesURL(cfg, ns, sandbox, remote)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, u, nil)
	if err != nil {
		return err
	}
	resp, err := doOK(hc, req)
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	dest, top := downloadTarget(local)
	return extractTar(resp.Body, dest, top)
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
