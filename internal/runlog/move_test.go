package runlog

import (
	"archive/tar"
	"bytes"
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// The logs of a moved ticket's Runs arrive as they were, ended attempts
// still ended, and only the Runs asked for.
func TestExportImportMovesTheRunsAskedFor(t *testing.T) {
	from := &Store{Dir: t.TempDir(), Max: 1 << 20}
	write := func(uid types.UID, attempt int32, out string) {
		t.Helper()
		w, err := from.Create(uid, attempt)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := w.Write([]byte(out)); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	write("run-a", 1, "first\n")
	write("run-a", 2, "second\n")
	write("run-b", 1, "b's\n")
	write("run-other", 1, "another sandbox's\n")

	var tree bytes.Buffer
	if err := from.Export(&tree, []types.UID{"run-a", "run-b", "run-none"}); err != nil {
		t.Fatal(err)
	}
	to := &Store{Dir: t.TempDir(), Max: 1 << 20}
	if err := to.Import(bytes.NewReader(tree.Bytes()), []types.UID{"run-a", "run-b"}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		uid     types.UID
		attempt int32
		want    string
	}{{"run-a", 1, "first\n"}, {"run-a", 2, "second\n"}, {"run-b", 1, "b's\n"}} {
		var got bytes.Buffer
		// follow: an attempt not marked ended would wait here.
		if err := to.Copy(context.Background(), &got, nil, c.uid, c.attempt, true, nil); err != nil {
			t.Fatal(err)
		}
		if got.String() != c.want {
			t.Errorf("%s#%d = %q, want %q", c.uid, c.attempt, got.String(), c.want)
		}
	}
	if latest, err := to.Latest("run-a"); err != nil || latest != 2 {
		t.Errorf("Latest(run-a) = %d, %v, want 2", latest, err)
	}
	if latest, _ := to.Latest("run-other"); latest != 0 {
		t.Errorf("a Run not exported arrived (attempt %d)", latest)
	}
}

// A tar naming another Run, a path out of its folder, a link or a file
// past the bound is refused.
func TestImportRefusesWhatWasNotAsked(t *testing.T) {
	entry := func(name string, typ byte, body string) []byte {
		var buf bytes.Buffer
		tw := tar.NewWriter(&buf)
		if err := tw.WriteHeader(&tar.Header{Name: name, Typeflag: typ, Mode: 0o600, Size: int64(len(body)), Linkname: "/etc/passwd"}); err != nil {
			t.Fatal(err)
		}
		if typ == tar.TypeReg {
			_, _ = tw.Write([]byte(body))
		}
		_ = tw.Close()
		return buf.Bytes()
	}
	tests := map[string][]byte{
		"another Run":        entry("run-x/1.log", tar.TypeReg, "x"),
		"out of its folder":  entry("run-a/../run-x/1.log", tar.TypeReg, "x"),
		"another file name":  entry("run-a/config", tar.TypeReg, "x"),
		"a symbolic link":    entry("run-a/1.log", tar.TypeSymlink, ""),
		"past the Run bound": entry("run-a/1.log", tar.TypeReg, strings.Repeat("x", 200)),
	}
	for name, tree := range tests {
		t.Run(name, func(t *testing.T) {
			s := &Store{Dir: t.TempDir(), Max: 64}
			if err := s.Import(bytes.NewReader(tree), []types.UID{"run-a"}); err == nil {
				t.Fatal("imported")
			}
		})
	}
}
