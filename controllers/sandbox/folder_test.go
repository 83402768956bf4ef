package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/controllers/config"
	"afe.dev/sandbox/internal/sandboxspec"
	"afe.dev/sandbox/test/dockertest"
	"afe.dev/sandbox/test/wsroot"
)

// The check made after a Folder sandbox's container starts, against the
// real engine: it passes for the folder that was checked, and fails when
// the path was swapped and left, and when it was swapped and undone (the
// engine mounted a directory the path no longer leads to).
func TestVerifyFolderMount(t *testing.T) {
	engine, skip, err := dockertest.Require()
	if err != nil {
		t.Fatal(err)
	}
	if skip != "" {
		t.Skip(skip)
	}
	defer func() { _ = engine.Close() }()
	ctx := context.Background()
	inst := fmt.Sprintf("verify-%d", os.Getpid())
	t.Cleanup(func() { dockertest.RemoveAll(afev1.LabelController + "=" + inst) })

	// A namespace of this process's own: the container's name is derived
	// from it, and other test processes share the engine.
	ns := inst
	root := wsroot.Temp(t, true)
	a := filepath.Join(root, ns, "a")
	if err := os.MkdirAll(a, 0o755); err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Engine: engine, Config: config.Config{Options: config.Options{WorkspaceRoot: root, Instance: inst}}}
	sbx := &afev1.Sandbox{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "verify", UID: types.UID("uid-" + inst)},
		Spec: afev1.SandboxSpec{SandboxTemplateSpec: afev1.SandboxTemplateSpec{
			Image: dockertest.TestImage, User: "1000:1000",
			Resources: afev1.SandboxResources{CPU: ptr.To(resource.MustParse("100m")), Memory: ptr.To(resource.MustParse("64Mi")), Pids: 32},
			Workspace: afev1.WorkspaceSpec{Type: afev1.WorkspaceFolder, HostPath: a},
		}},
	}
	s := &sandboxScope{sbx: sbx, id: sandboxspec.IdentityOf(sbx, inst)}
	checked, err := sandboxspec.ResolveFolder(a, ns, r.Config.Workspaces())
	if err != nil {
		t.Fatal(err)
	}
	c, err := engine.RunContainer(ctx, sandboxspec.Container(sbx, s.id, sandboxspec.Resolved{Workspace: checked.Path}))
	if err != nil {
		t.Fatal(err)
	}

	if err := r.verifyFolderMount(ctx, s, c, checked); err != nil {
		t.Fatalf("the folder as checked: %v", err)
	}
	if _, _, ok := mountedWorkspace(c); !ok {
		if os.Geteuid() == 0 {
			t.Fatal("root on the engine's host cannot see the container's /workspace")
		}
		t.Skip("the container's processes are not visible here; the rest needs them")
	}

	// The path is swapped after the engine bound it: a is another directory.
	if err := os.Rename(a, a+".old"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(a, 0o755); err != nil {
		t.Fatal(err)
	}
	err = r.verifyFolderMount(ctx, s, c, checked)
	if !errors.Is(err, errMountMismatch) || !strings.Contains(err.Error(), "now another directory") {
		t.Fatalf("a swap left in place: %v", err)
	}
	// The controller checked the new a, the engine has the old one: only
	// the look into the container's mount namespace can tell.
	now, err := sandboxspec.ResolveFolder(a, ns, r.Config.Workspaces())
	if err != nil {
		t.Fatal(err)
	}
	err = r.verifyFolderMount(ctx, s, c, now)
	if !errors.Is(err, errMountMismatch) || !strings.Contains(err.Error(), "/workspace in the container is") {
		t.Fatalf("a mount of another directory than the one checked: %v", err)
	}
	// The engine reports another source than the path checked.
	other := now
	other.Path = a + ".old"
	if err := r.verifyFolderMount(ctx, s, c, other); !errors.Is(err, errMountMismatch) {
		t.Fatalf("another source: %v", err)
	}
}
