package client

import (
	"archive/tar"
	"bytes"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"afe.dev/sandbox/test/tartest"
)

func TestUploadTarget(t *testing.T) {
	tests := map[string]struct {
		local, remote string
		dir, name     string
	}{
		"into /workspace":             {local: "/tmp/x/a.txt", remote: "/workspace", dir: "/workspace", name: "a.txt"},
		"into /workspace/":            {local: "/tmp/x/a.txt", remote: "/workspace/", dir: "/workspace/", name: "a.txt"},
		"into a folder given with /":  {local: "tree", remote: "/workspace/src/", dir: "/workspace/src/", name: "tree"},
		"at a path of its own":        {local: "/tmp/x/a.txt", remote: "/workspace/src/b.txt", dir: "/workspace/src", name: "b.txt"},
		"a tree at a path of its own": {local: "tree", remote: "/workspace/copy", dir: "/workspace", name: "copy"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			dir, n := uploadTarget(tc.local, tc.remote)
			if d := cmp.Diff([]string{tc.dir, tc.name}, []string{dir, n}); d != "" {
				t.Error(d)
			}
		})
	}
}

func TestDownloadTarget(t *testing.T) {
	dir := t.TempDir()
	existing := filepath.Join(dir, "existing")
	if err := os.Mkdir(existing, 0o755); err != nil {
		t.Fatal(err)
	}
	dest, top := downloadTarget(existing)
	if dest != existing || top != "" {
		t.Errorf("into an existing folder: %q %q, want %q and its own name", dest, top, existing)
	}
	dest, top = downloadTarget(filepath.Join(dir, "new.bin"))
	if dest != dir || top != "new.bin" {
		t.Errorf("at a new path: %q %q, want %q %q", dest, top, dir, "new.bin")
	}
}

// makeTree writes a tree of folders, files and a symlink under dir, with
// bytes that are not text.
func makeTree(t *testing.T, dir string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	blob := make([]byte, 300<<10)
	for i := range blob {
		blob[i] = byte(rng.UintN(256))
	}
	for _, d := range []string{"sub/deeper", "empty"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]struct {
		data []byte
		mode fs.FileMode
	}{
		"a.txt":             {[]byte("hello\r\n\x00\xff"), 0o644},
		"sub/b.bin":         {blob, 0o755},
		"sub/deeper/c.bin":  {blob[:1], 0o600},
		"sub/deeper/.empty": {nil, 0o644},
	}
	for name, f := range files {
		if err := os.WriteFile(filepath.Join(dir, name), f.data, f.mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, name), f.mode); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink("a.txt", filepath.Join(dir, "sub", "link")); err != nil {
		t.Fatal(err)
	}
}

// treeOf describes every entry under dir: its type, permissions, and its
// content or symlink target.
func treeOf(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			out[rel] = "symlink to " + target
			return err
		case info.IsDir():
			out[rel] = "dir"
		default:
			data, err := os.ReadFile(p)
			out[rel] = info.Mode().String() + " " + string(data)
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestTarOfATreeExtractsToTheSameTree(t *testing.T) {
	src := filepath.Join(t.TempDir(), "tree")
	makeTree(t, src)
	var buf bytes.Buffer
	if err := writeTar(&buf, src, "renamed"); err != nil {
		t.Fatal(err)
	}

	var names []string
	tr := tar.NewReader(bytes.NewReader(buf.Bytes()))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, hdr.Name)
		if hdr.Uname != "" || hdr.Gname != "" {
			t.Errorf("%s names its owner %q:%q: the sandbox's user owns uploads", hdr.Name, hdr.Uname, hdr.Gname)
		}
		if hdr.Name == "renamed/sub/link" && (hdr.Typeflag != tar.TypeSymlink || hdr.Linkname != "a.txt") {
			t.Errorf("the symlink is written as type %q to %q", hdr.Typeflag, hdr.Linkname)
		}
	}
	sort.Strings(names)
	want := []string{"renamed/", "renamed/a.txt", "renamed/empty/", "renamed/sub/", "renamed/sub/b.bin",
		"renamed/sub/deeper/", "renamed/sub/deeper/.empty", "renamed/sub/deeper/c.bin", "renamed/sub/link"}
	if d := cmp.Diff(want, names); d != "" {
		t.Fatalf("entries (-want +got):\n%s", d)
	}

	// Down into an existing folder, under the tar's own top name; and at a
	// path of its own.
	into := t.TempDir()
	if err := extractTar(bytes.NewReader(buf.Bytes()), into, ""); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(treeOf(t, src), treeOf(t, filepath.Join(into, "renamed"))); d != "" {
		t.Errorf("extracted under its own name (-want +got):\n%s", d)
	}
	at := t.TempDir()
	if err := extractTar(bytes.NewReader(buf.Bytes()), at, "back"); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(treeOf(t, src), treeOf(t, filepath.Join(at, "back"))); d != "" {
		t.Errorf("extracted as back (-want +got):\n%s", d)
	}
}

func TestTarOfAFileExtractsToTheSameFile(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "data.bin")
	data := bytes.Repeat([]byte{0, 1, 2, 0xfe, 0xff, '\n'}, 100_000)
	if err := os.WriteFile(src, data, 0o640); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(src, 0o640); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := writeTar(&buf, src, "up.bin"); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if err := extractTar(&buf, out, "down.bin"); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{".": "dir", "down.bin": "-rw-r----- " + string(data)}, treeOf(t, out)); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
}

// entry is one entry of a tar the test writes.
type entry struct {
	name, link string
	typ        byte
	data       string
	mode       int64
}

func tarOf(t *testing.T, entries ...entry) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		mode := e.mode
		if mode == 0 {
			mode = 0o644
		}
		hdr := &tar.Header{Name: e.name, Linkname: e.link, Typeflag: e.typ, Mode: mode, Size: int64(len(e.data))}
		if e.typ != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e.data)); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// A tar from the server comes from a workspace the workload controls:
// whatever it holds, nothing is written outside the destination.
func TestExtractTarStaysInsideTheDestination(t *testing.T) {
	base := t.TempDir()
	outside := filepath.Join(base, "outside")
	dest := filepath.Join(base, "dest")
	if err := os.Mkdir(dest, 0o755); err != nil {
		t.Fatal(err)
	}
	sentinel := filepath.Join(outside, "sentinel")
	file := func(name string) entry { return entry{name: name, typ: tar.TypeReg, data: "planted"} }
	symlink := func(name, to string) entry { return entry{name: name, link: to, typ: tar.TypeSymlink} }
	topDir := entry{name: "top/", typ: tar.TypeDir, mode: 0o755}
	tests := map[string][]entry{
		"a ../ entry":                      {file("../../outside/planted")},
		"a ../ entry within a tree":        {topDir, file("top/../../../outside/planted")},
		"an absolute path":                 {file(filepath.Join(outside, "planted"))},
		"an absolute path within a tree":   {topDir, file("/" + filepath.Join(outside, "planted"))},
		"a file through an absolute link":  {topDir, symlink("top/link", outside), file("top/link/planted")},
		"a file through a relative link":   {topDir, symlink("top/link", "../../../outside"), file("top/link/planted")},
		"a folder through a link":          {topDir, symlink("top/link", outside), {name: "top/link/d/", typ: tar.TypeDir, mode: 0o755}},
		"the top entry a link":             {symlink("top", outside), file("top/planted")},
		"a file written over a link":       {topDir, symlink("top/link", sentinel), file("top/link")},
		"a hard link to a file outside":    {topDir, {name: "top/hard", link: sentinel, typ: tar.TypeLink}},
		"a device":                         {topDir, {name: "top/dev", typ: tar.TypeChar}},
		"a link first, then a tree inside": {topDir, symlink("top/sub", outside), {name: "top/sub/deeper/", typ: tar.TypeDir, mode: 0o755}, file("top/sub/deeper/planted")},
	}
	for name, entries := range tests {
		for _, top := range []string{"", "renamed"} {
			t.Run(name+" (top "+top+")", func(t *testing.T) {
				// The folder outside as it was, whatever an earlier case did.
				if err := os.RemoveAll(outside); err != nil {
					t.Fatal(err)
				}
				if err := os.Mkdir(outside, 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(sentinel, []byte("kept"), 0o644); err != nil {
					t.Fatal(err)
				}
				d, err := os.MkdirTemp(dest, "x")
				if err != nil {
					t.Fatal(err)
				}
				err = extractTar(bytes.NewReader(tarOf(t, entries...)), d, top)
				if err == nil {
					t.Error("extracted without an error")
				}
				if got := treeOf(t, outside); !cmp.Equal(got, map[string]string{".": "dir", "sentinel": "-rw-r--r-- kept"}) {
					t.Errorf("the folder outside the destination changed: %v", got)
				}
				if _, err := os.Lstat(filepath.Join(base, "planted")); err == nil {
					t.Error("a file was planted next to the destination")
				}
			})
		}
	}
}

func TestExtractTarDropsSetuidBits(t *testing.T) {
	dir := t.TempDir()
	data := tarOf(t, entry{name: "tool", typ: tar.TypeReg, data: "#!/bin/sh\n", mode: 0o6755})
	if err := extractTar(bytes.NewReader(data), dir, ""); err != nil {
		t.Fatal(err)
	}
	info, err := os.Stat(filepath.Join(dir, "tool"))
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode()&(fs.ModeSetuid|fs.ModeSetgid) != 0 || info.Mode().Perm()&0o100 == 0 {
		t.Errorf("extracted with mode %v, want the permissions without setuid or setgid", info.Mode())
	}
}

func TestExtractTarRefusesSparseEntries(t *testing.T) {
	for name, data := range map[string][]byte{
		"PAX 1.0": tartest.SparsePAX("big.bin", 256<<20, []byte("a")),
		"PAX 0.1": tartest.SparsePAXMap("big.bin", 256<<20, []byte("a")),
		"GNU S":   tartest.SparseGNU("big.bin", 256<<20, []byte("a")),
	} {
		out := t.TempDir()
		err := extractTar(bytes.NewReader(data), out, "")
		if err == nil || !strings.Contains(err.Error(), "sparse") {
			t.Errorf("%s: %v, want a refusal of the sparse entry", name, err)
		}
		if d := cmp.Diff(map[string]string{".": "dir"}, treeOf(t, out)); d != "" {
			t.Errorf("%s: written (-want +got):\n%s", name, d)
		}
	}
}
