package sandboxspec

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/internal/nosuidroot"
	"afe.dev/sandbox/test/wsroot"
)

// A Folder workspace lives on the host's file system: its root must be
// mounted nosuid,nodev, or the controller must have been told
// (--workspace-root-allow-suid) that the operator accepts the risk. A
// folder that is a mount of its own below a safe root is judged by its
// own flags.
func TestFolderRootMustBeNosuidNodev(t *testing.T) {
	safe, unsafe := wsroot.Temp(t, true), wsroot.Temp(t, false)
	for _, root := range []string{safe, unsafe} {
		must(t, os.MkdirAll(filepath.Join(root, "ns", "a"), 0o755))
	}
	// A folder under the safe root with a suid mount of its own.
	must(t, os.MkdirAll(filepath.Join(safe, "ns", "mounted"), 0o755))
	unmount, err := nosuidroot.MountAllowingSuid(filepath.Join(safe, "ns", "mounted"))
	must(t, err)
	t.Cleanup(func() { must(t, unmount()) })

	tests := map[string]struct {
		root      string
		folder    string
		allowSuid bool
		wantErr   bool
	}{
		"a nosuid,nodev root":                  {root: safe, folder: "a"},
		"a root mounted without them":          {root: unsafe, folder: "a", wantErr: true},
		"that root with the operator's leave":  {root: unsafe, folder: "a", allowSuid: true},
		"a suid mount below a safe root":       {root: safe, folder: "mounted", wantErr: true},
		"that mount with the operator's leave": {root: safe, folder: "mounted", allowSuid: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			opts := Options{WorkspaceRoot: tc.root, WorkspaceRootAllowSuid: tc.allowSuid}
			hostPath := filepath.Join(tc.root, "ns", tc.folder)
			_, err := ResolveFolder(hostPath, "ns", opts)
			if !tc.wantErr {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			ie, ok := AsInvalid(err)
			if !ok || ie.Reason != afev1.WorkspaceRootUnsafeReason {
				t.Fatalf("got %v, want reason %s", err, afev1.WorkspaceRootUnsafeReason)
			}
			for _, want := range []string{"nosuid,nodev", "mount -o remount,bind,nosuid,nodev", "--workspace-root-allow-suid"} {
				if !strings.Contains(ie.Message, want) {
					t.Fatalf("the message does not say %q: %s", want, ie.Message)
				}
			}
		})
	}
	// Validation (no folder opened) refuses an unsafe root as well.
	spec := validSpec()
	spec.Workspace = afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: filepath.Join(unsafe, "ns", "a")}
	if ie, ok := AsInvalid(Validate(&spec, Options{WorkspaceRoot: unsafe})); !ok || ie.Reason != afev1.WorkspaceRootUnsafeReason {
		t.Fatalf("Validate on an unsafe root: %v", ie)
	}
	spec.Workspace.HostPath = filepath.Join(safe, "ns", "a")
	must(t, Validate(&spec, Options{WorkspaceRoot: safe}))
}
