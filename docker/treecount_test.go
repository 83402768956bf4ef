package docker

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// One walk counts a tree's bytes as the engine does (directories not
// sized, a hard-linked file once) and its inodes (every entry under the
// root, a hard-linked file once); it never follows a link, and a path
// longer than the host allows makes the tree unmeasurable, as for the
// engine's own walk.
func TestCountTree(t *testing.T) {
	root := t.TempDir()
	write := func(rel string, n int) {
		t.Helper()
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, make([]byte, n), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("a", 100)
	write("d/b", 20)
	write("d/e/empty", 0)
	if err := os.Link(filepath.Join(root, "a"), filepath.Join(root, "d/a-again")); err != nil {
		t.Fatal(err)
	}
	// A link to a large tree outside, never followed: it is an inode of its
	// own, of the size of its target's name.
	if err := os.Symlink("/usr", filepath.Join(root, "usr")); err != nil {
		t.Fatal(err)
	}
	bytes, inodes, err := countTree(root)
	if err != nil {
		t.Fatal(err)
	}
	// a, d, d/b, d/e, d/e/empty, usr; d/a-again is a.
	if inodes != 6 || bytes != 100+20+int64(len("/usr")) {
		t.Errorf("countTree = %d bytes, %d inodes; want %d bytes, 6 inodes", bytes, inodes, 100+20+len("/usr"))
	}

	// A chain of directories whose path passes PATH_MAX, made from its end
	// up as a workload would (no path it uses is long).
	deep := t.TempDir()
	name := strings.Repeat("d", 200)
	for range 21 {
		if err := os.Rename(deep, deep+".tmp"); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(deep, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(deep+".tmp", filepath.Join(deep, name)); err != nil {
			t.Fatal(err)
		}
	}
	if _, _, err := countTree(deep); err == nil {
		t.Errorf("a tree with a path of %d bytes was measured; want it unmeasurable", len(deep)+21*201)
	}
	if err := os.RemoveAll(deep); err != nil {
		t.Log(err)
	}
}
