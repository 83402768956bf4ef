package sandboxspec

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// folderTree is a --workspace-root with a folder of namespace ns holding
//
//	ns/a/b/c             folders
//	ns/file              a file
//	ns/link-top -> a     a link to a folder of the namespace
//	ns/a/link-mid -> b   a link one level down
//	ns/a/b/link-end -> / a link to the host's root as the last component
//	other/x              another namespace's folder
//
// and, beside it, rootlink -> root and nslink -> ns (a namespace folder
// reached through a link).
func folderTree(t *testing.T) (root, rootLink string) {
	t.Helper()
	base := t.TempDir()
	root = filepath.Join(base, "root")
	must(t, os.MkdirAll(filepath.Join(root, "ns", "a", "b", "c"), 0o755))
	must(t, os.MkdirAll(filepath.Join(root, "other", "x"), 0o755))
	must(t, os.WriteFile(filepath.Join(root, "ns", "file"), nil, 0o644))
	must(t, os.Symlink("a", filepath.Join(root, "ns", "link-top")))
	must(t, os.Symlink("b", filepath.Join(root, "ns", "a", "link-mid")))
	must(t, os.Symlink("/", filepath.Join(root, "ns", "a", "b", "link-end")))
	rootLink = filepath.Join(base, "rootlink")
	must(t, os.Symlink(root, rootLink))
	return root, rootLink
}

func TestResolveFolder(t *testing.T) {
	root, rootLink := folderTree(t)
	// A namespace whose folder is a link to another namespace's.
	must(t, os.Symlink(filepath.Join(root, "other"), filepath.Join(root, "nslink")))
	opts := Options{WorkspaceRoot: root, WorkspaceRootAllowSuid: true}

	tests := map[string]struct {
		hostPath   string
		namespace  string
		opts       *Options
		wantPath   string
		wantReason string
	}{
		"a folder of the namespace":          {hostPath: root + "/ns/a", wantPath: root + "/ns/a"},
		"a deep folder":                      {hostPath: root + "/ns/a/b/c", wantPath: root + "/ns/a/b/c"},
		"written from the root's link":       {hostPath: rootLink + "/ns/a", opts: &Options{WorkspaceRoot: rootLink, WorkspaceRootAllowSuid: true}, wantPath: root + "/ns/a"},
		"written from the root's real path":  {hostPath: root + "/ns/a", opts: &Options{WorkspaceRoot: rootLink, WorkspaceRootAllowSuid: true}, wantPath: root + "/ns/a"},
		"a link at the first level":          {hostPath: root + "/ns/link-top", wantReason: afev1.WorkspaceSymlinkReason},
		"a link at the first level, beyond":  {hostPath: root + "/ns/link-top/b", wantReason: afev1.WorkspaceSymlinkReason},
		"a link in the middle":               {hostPath: root + "/ns/a/link-mid/c", wantReason: afev1.WorkspaceSymlinkReason},
		"a link as the last component":       {hostPath: root + "/ns/a/b/link-end", wantReason: afev1.WorkspaceSymlinkReason},
		"through the link, beyond it":        {hostPath: root + "/ns/a/b/link-end/etc", wantReason: afev1.WorkspaceSymlinkReason},
		"a namespace folder that is a link":  {hostPath: root + "/nslink/x", namespace: "nslink", wantReason: afev1.WorkspaceSymlinkReason},
		"the namespace folder itself":        {hostPath: root + "/ns", wantReason: afev1.WorkspaceOutsideRootReason},
		"another namespace's folder":         {hostPath: root + "/other/x", wantReason: afev1.WorkspaceOutsideRootReason},
		"the root itself":                    {hostPath: root, wantReason: afev1.WorkspaceOutsideRootReason},
		"the root's link itself":             {hostPath: rootLink, opts: &Options{WorkspaceRoot: rootLink, WorkspaceRootAllowSuid: true}, wantReason: afev1.WorkspaceOutsideRootReason},
		"outside the root":                   {hostPath: filepath.Dir(root) + "/ns/a", wantReason: afev1.WorkspaceOutsideRootReason},
		"a sibling with the root as prefix":  {hostPath: root + "x/ns/a", wantReason: afev1.WorkspaceOutsideRootReason},
		"the host's /etc":                    {hostPath: "/etc", wantReason: afev1.WorkspaceOutsideRootReason},
		"the Docker socket":                  {hostPath: "/var/run/docker.sock", wantReason: afev1.WorkspaceOutsideRootReason},
		"climbing out with ..":               {hostPath: root + "/ns/a/../../other/x", wantReason: afev1.WorkspaceOutsideRootReason},
		"climbing out of the root with ..":   {hostPath: root + "/ns/../../etc", wantReason: afev1.WorkspaceOutsideRootReason},
		"a . component":                      {hostPath: root + "/ns/./a", wantReason: afev1.InvalidSpecReason},
		"a double slash":                     {hostPath: root + "/ns//a", wantReason: afev1.InvalidSpecReason},
		"a trailing slash":                   {hostPath: root + "/ns/a/", wantReason: afev1.InvalidSpecReason},
		"relative":                           {hostPath: "ns/a", wantReason: afev1.InvalidSpecReason},
		"a file instead of a folder":         {hostPath: root + "/ns/file", wantReason: afev1.InvalidSpecReason},
		"a file in the middle":               {hostPath: root + "/ns/file/x", wantReason: afev1.InvalidSpecReason},
		"missing":                            {hostPath: root + "/ns/nope", wantReason: afev1.WorkspaceMissingReason},
		"disabled":                           {hostPath: root + "/ns/a", opts: &Options{}, wantReason: afev1.WorkspaceOutsideRootReason},
		"a remote engine":                    {hostPath: root + "/ns/a", opts: &Options{WorkspaceRoot: root, WorkspaceRootAllowSuid: true, EngineRemote: true}, wantReason: afev1.WorkspaceNotSharedReason},
		"a remote engine sharing the root":   {hostPath: root + "/ns/a", opts: &Options{WorkspaceRoot: root, WorkspaceRootAllowSuid: true, EngineRemote: true, WorkspaceRootShared: true}, wantPath: root + "/ns/a"},
		"a remote engine, outside the root":  {hostPath: "/etc", opts: &Options{WorkspaceRoot: root, WorkspaceRootAllowSuid: true, EngineRemote: true, WorkspaceRootShared: true}, wantReason: afev1.WorkspaceOutsideRootReason},
		"a namespace whose folder is absent": {hostPath: root + "/fresh/a", namespace: "fresh", wantReason: afev1.WorkspaceMissingReason},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			o := opts
			if tc.opts != nil {
				o = *tc.opts
			}
			ns := tc.namespace
			if ns == "" {
				ns = "ns"
			}
			got, err := ResolveFolder(tc.hostPath, ns, o)
			reason := ""
			if err != nil {
				ie, ok := AsInvalid(err)
				if !ok {
					t.Fatalf("not an InvalidError: %v", err)
				}
				reason = ie.Reason
				if ie.Message == "" || strings.ToUpper(ie.Message[:1]) != ie.Message[:1] {
					t.Fatalf("message should be capitalised: %q", ie.Message)
				}
			}
			if diff := cmp.Diff(tc.wantReason, reason); diff != "" {
				t.Fatalf("reason (-want +got):\n%s\nerror: %v", diff, err)
			}
			if diff := cmp.Diff(tc.wantPath, got.Path); diff != "" {
				t.Fatalf("path (-want +got):\n%s", diff)
			}
			if err != nil {
				return
			}
			var st syscall.Stat_t
			must(t, syscall.Stat(tc.wantPath, &st))
			if !got.Same(st.Dev, st.Ino) {
				t.Fatalf("dev/ino %d/%d, the folder is %d/%d", got.Dev, got.Ino, st.Dev, st.Ino)
			}
		})
	}
}

func TestResolveFolderCreatesTheNamespaceFolder(t *testing.T) {
	root := t.TempDir()
	_, err := ResolveFolder(root+"/fresh/a", "fresh", Options{WorkspaceRoot: root, WorkspaceRootAllowSuid: true})
	if ie, ok := AsInvalid(err); !ok || ie.Reason != afev1.WorkspaceMissingReason || !strings.Contains(ie.Message, "does not exist") {
		t.Fatalf("a missing workspace folder: %v", err)
	}
	fi, err := os.Lstat(filepath.Join(root, "fresh"))
	if err != nil {
		t.Fatal(err)
	}
	if !fi.IsDir() || fi.Mode().Perm() != 0o755&^umask() {
		t.Fatalf("namespace folder: %v", fi.Mode())
	}
	must(t, os.Mkdir(filepath.Join(root, "fresh", "a"), 0o700))
	if _, err := ResolveFolder(root+"/fresh/a", "fresh", Options{WorkspaceRoot: root, WorkspaceRootAllowSuid: true}); err != nil {
		t.Fatal(err)
	}
}

func umask() os.FileMode {
	m := syscall.Umask(0)
	syscall.Umask(m)
	return os.FileMode(m)
}

// A link swapped in after a folder was resolved is found when it is
// resolved again, and the directory reached first keeps its identity.
func TestResolveFolderSeesASwap(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "ns", "a", "sub")
	must(t, os.MkdirAll(dir, 0o755))
	opts := Options{WorkspaceRoot: root, WorkspaceRootAllowSuid: true}
	first, err := ResolveFolder(dir, "ns", opts)
	must(t, err)
	must(t, os.Rename(dir, dir+".d"))
	must(t, os.Symlink("/", dir))
	if _, err := ResolveFolder(dir, "ns", opts); err == nil {
		t.Fatal("a swapped-in link was followed")
	}
	must(t, os.Remove(dir))
	must(t, os.Mkdir(dir, 0o755))
	again, err := ResolveFolder(dir, "ns", opts)
	must(t, err)
	if again.Same(first.Dev, first.Ino) {
		t.Fatal("a new directory under the same path has the old one's identity")
	}
}

func TestFoldersConflict(t *testing.T) {
	tests := map[string]struct {
		a, ta, b, tb string
		want         bool
	}{
		"same folder, same ticket":        {"/r/ns/a", "tk", "/r/ns/a", "tk", false},
		"same folder, other ticket":       {"/r/ns/a", "tk", "/r/ns/a", "tk2", true},
		"nested, same ticket":             {"/r/ns/a", "tk", "/r/ns/a/sub", "tk", true},
		"nested, other ticket":            {"/r/ns/a/sub", "tk", "/r/ns/a", "tk2", true},
		"deeply nested":                   {"/r/ns/a", "tk", "/r/ns/a/b/c/d", "tk2", true},
		"siblings":                        {"/r/ns/a", "tk", "/r/ns/b", "tk2", false},
		"a shared prefix is not nesting":  {"/r/ns/a", "tk", "/r/ns/ab", "tk2", false},
		"a shared prefix, the other way":  {"/r/ns/ab/c", "tk", "/r/ns/a", "tk2", false},
		"other namespaces' folders apart": {"/r/ns/a", "tk", "/r/ns2/a", "tk", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := FoldersConflict(tc.a, tc.ta, tc.b, tc.tb); got != tc.want {
				t.Fatalf("FoldersConflict(%s, %s, %s, %s) = %v", tc.a, tc.ta, tc.b, tc.tb, got)
			}
			if got := FoldersConflict(tc.b, tc.tb, tc.a, tc.ta); got != tc.want {
				t.Fatal("not symmetric")
			}
		})
	}
}
