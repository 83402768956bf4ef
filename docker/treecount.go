package docker

import (
	"errors"
	"fmt"
	"io"
	"os"

	"golang.org/x/sys/unix"
)

// Bounds of a walk of a tree a workload wrote: a path the host could not
// name (PATH_MAX, the engine's own walk fails there too) or a chain of
// directories deeper than any real tree (each level holds a descriptor
// open) makes the tree unmeasured.
const (
	hostPathMax  = 4096
	treeMaxDepth = 512
)

// errTreeUnmeasurable is a tree that cannot be measured.
var errTreeUnmeasurable = errors.New("the tree holds a path longer than the host allows, or directories nested deeper than can be walked")

// treeCount is what one walk of a tree found.
type treeCount struct {
	// bytes are counted as the engine counts a volume or a writable layer:
	// the apparent size of everything but directories, a hard-linked file
	// once.
	bytes int64
	// inodes are the entries under the root, a hard-linked file once.
	inodes int64
	links  map[uint64]bool
}

// countTree measures the tree under root in one walk: its bytes and its
// inodes. The walk never follows a symbolic link: each directory is opened
// relative to its parent's descriptor with O_NOFOLLOW, so a workload that
// swaps a directory for a link while it is walked cannot lead it elsewhere.
func countTree(root string) (bytes, inodes int64, err error) {
	fd, err := unix.Open(root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, fmt.Errorf("open %s: %w", root, err)
	}
	t := &treeCount{links: map[uint64]bool{}}
	if err := t.dir(fd, len(root), 1); err != nil {
		return 0, 0, fmt.Errorf("walk %s: %w", root, err)
	}
	return t.bytes, t.inodes, nil
}

// dir counts the entries of the directory open as fd (closed on return),
// whose path is pathLen long, depth levels below the root.
func (t *treeCount) dir(fd, pathLen, depth int) error {
	if depth > treeMaxDepth {
		_ = unix.Close(fd)
		return errTreeUnmeasurable
	}
	f := os.NewFile(uintptr(fd), "")
	defer func() { _ = f.Close() }()
	for {
		names, err := f.Readdirnames(1024)
		for _, name := range names {
			if err := t.entry(fd, name, pathLen+1+len(name), depth); err != nil {
				return err
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// entry counts the entry name of the directory parent, and what is under
// it. An entry removed or replaced while it is walked is skipped.
func (t *treeCount) entry(parent int, name string, pathLen, depth int) error {
	if pathLen >= hostPathMax {
		return errTreeUnmeasurable
	}
	var st unix.Stat_t
	if err := unix.Fstatat(parent, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return fmt.Errorf("stat %s: %w", name, err)
	}
	if st.Mode&unix.S_IFMT == unix.S_IFDIR {
		t.inodes++
		fd, err := unix.Openat(parent, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		switch {
		case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP):
			return nil
		case err != nil:
			return fmt.Errorf("open %s: %w", name, err)
		}
		return t.dir(fd, pathLen, depth+1)
	}
	if st.Nlink > 1 {
		if t.links[st.Ino] {
			return nil
		}
		t.links[st.Ino] = true
	}
	t.inodes++
	if st.Size > 0 {
		t.bytes += st.Size
	}
	return nil
}
