package runlog

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// The logs of a ticket moved to another node (per-node mode) follow its
// sandboxes: the node they leave exports them as a tar of
// <Run UID>/<attempt>.log and <attempt>.done, and the node they arrive on
// imports the Runs it was asked for, each bounded as its own logs are.

// logFile is the name of a file of a Run's folder.
var logFile = regexp.MustCompile(`^[0-9]{1,9}\.(log|done)$`)

// Export writes the logs of the Runs uids, those it has, as a tar.
func (s *Store) Export(w io.Writer, uids []types.UID) error {
	tw := tar.NewWriter(w)
	for _, uid := range uids {
		dir, err := s.runDir(uid)
		if err != nil {
			return err
		}
		entries, err := os.ReadDir(dir)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		for _, e := range entries {
			if !e.Type().IsRegular() || !logFile.MatchString(e.Name()) {
				continue
			}
			if err := exportFile(tw, filepath.Join(dir, e.Name()), string(uid)+"/"+e.Name()); err != nil {
				return err
			}
		}
	}
	return tw.Close()
}

func exportFile(tw *tar.Writer, file, name string) error {
	f, err := os.Open(file)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	info, err := f.Stat()
	if err != nil {
		return err
	}
	if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o600, Size: info.Size(), ModTime: info.ModTime()}); err != nil {
		return err
	}
	_, err = io.CopyN(tw, f, info.Size())
	return err
}

// Import writes the logs of the tar into the store, for the Runs of uids
// only, each Run's files within the store's bound together; a Run's logs
// already kept here are replaced. An entry of another name or Run is
// refused.
func (s *Store) Import(r io.Reader, uids []types.UID) error {
	want := map[string]bool{}
	for _, uid := range uids {
		want[string(uid)] = true
	}
	used := map[string]int64{}
	cleared := map[string]bool{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		uid, file, ok := strings.Cut(h.Name, "/")
		if !ok || !want[uid] || !logFile.MatchString(file) || path.Clean(h.Name) != h.Name || h.Typeflag != tar.TypeReg {
			return fmt.Errorf("run log import: unexpected entry %q", h.Name)
		}
		if used[uid]+h.Size > s.max()+int64(len(Marker(s.max()))) {
			return fmt.Errorf("run log import: the logs of Run %s pass the bound (%d bytes)", uid, s.max())
		}
		used[uid] += h.Size
		dir, err := s.runDir(types.UID(uid))
		if err != nil {
			return err
		}
		if !cleared[uid] {
			if err := os.RemoveAll(dir); err != nil {
				return err
			}
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			cleared[uid] = true
		}
		if err := importFile(filepath.Join(dir, file), tr, h.Size); err != nil {
			return err
		}
	}
}

func importFile(file string, r io.Reader, size int64) error {
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.CopyN(f, r, size); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}
