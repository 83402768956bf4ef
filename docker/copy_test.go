package docker

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"afe.dev/sandbox/internal/tarbound"
)

func TestCopyWorkspaceKeepsOwnersAndModesAndLeavesNoHelper(t *testing.T) {
	ctx := context.Background()
	labels := testLabels(t)
	src, dst := uniqueName()+"-src", uniqueName()+"-dst"
	for _, v := range []string{src, dst} {
		if _, err := engine.EnsureVolume(ctx, VolumeSpec{Name: v, Labels: labels}); err != nil {
			t.Fatal(err)
		}
	}
	// Fill the source as root, with owners and modes to keep.
	sh(t, "run", "--rm", "--network", "none", "--label", "afe.test="+labels["afe.test"], "-v", src+":/workspace", testImage, "sh", "-c",
		"mkdir -p /workspace/d && echo hello > /workspace/d/f && chmod 640 /workspace/d/f && chown -R 1000:2000000123 /workspace/d && ln -s d/f /workspace/link && chown 1000:1000 /workspace")

	name := uniqueName() + "-copy"
	n, err := engine.CopyWorkspace(ctx, CopySpec{
		Name: name, Image: testImage, Labels: labels,
		From: Mount{Type: MountVolume, Source: src},
		To:   Mount{Type: MountVolume, Source: dst},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n == 0 {
		t.Fatal("no bytes copied")
	}
	got := sh(t, "run", "--rm", "--network", "none", "--label", "afe.test="+labels["afe.test"], "-v", dst+":/workspace", testImage, "sh", "-c",
		"cat /workspace/d/f; stat -c '%u:%g %a' /workspace /workspace/d/f; readlink /workspace/link")
	if want := "hello\n1000:1000 755\n1000:2000000123 640\nd/f"; got != want {
		t.Fatalf("copy:\n%s\nwant:\n%s", got, want)
	}
	cs, err := engine.ListContainers(ctx, labels)
	if err != nil || len(cs) != 0 {
		t.Fatalf("helpers left: %v %v", cs, err)
	}

	// A missing source fails, and still leaves no helper.
	if _, err := engine.CopyWorkspace(ctx, CopySpec{
		Name: name, Image: testImage, Labels: labels,
		From: Mount{Type: MountBind, Source: "/nonexistent/afe-test"},
		To:   Mount{Type: MountVolume, Source: dst},
	}); err == nil {
		t.Fatal("a copy from a missing folder succeeded")
	}
	if cs, _ := engine.ListContainers(ctx, labels); len(cs) != 0 {
		t.Fatalf("helpers left after a failure: %v", cs)
	}
}

func TestCopyWorkspaceReplacesTheHelpersACrashLeft(t *testing.T) {
	ctx := context.Background()
	labels := testLabels(t)
	src, dst := uniqueName()+"-src", uniqueName()+"-dst"
	for _, v := range []string{src, dst} {
		if _, err := engine.EnsureVolume(ctx, VolumeSpec{Name: v, Labels: labels}); err != nil {
			t.Fatal(err)
		}
	}
	spec := CopySpec{
		Name: uniqueName() + "-copy", Image: testImage, Labels: labels,
		From: Mount{Type: MountVolume, Source: src},
		To:   Mount{Type: MountVolume, Source: dst},
	}
	// What a crash in the middle of a copy leaves: both helpers, created.
	var planted []string
	for _, h := range []string{spec.Name + "-from", spec.Name + "-to"} {
		planted = append(planted, sh(t, "create", "--name", h, "--network", "none", "--label", "afe.test="+labels["afe.test"], testImage, "/afe-never-started"))
	}
	if _, err := engine.CopyWorkspace(ctx, spec); err != nil {
		t.Fatalf("a copy after a crash: %v", err)
	}
	for _, id := range planted {
		if _, err := engine.InspectContainer(ctx, id); !errors.Is(err, ErrNotFound) {
			t.Errorf("the helper %s a crash left is still there (%v)", id, err)
		}
	}
	if cs, err := engine.ListContainers(ctx, labels); err != nil || len(cs) != 0 {
		t.Fatalf("helpers left: %v %v", cs, err)
	}

	// A container of a helper's name that is not this copy's is left alone.
	other := sh(t, "create", "--name", spec.Name+"-to", "--network", "none", "--label", "afe.test="+labels["afe.test"]+"-other", testImage, "/afe-never-started")
	t.Cleanup(func() { _ = engine.RemoveContainer(context.Background(), other) })
	if _, err := engine.CopyWorkspace(ctx, spec); !errors.Is(err, ErrConflict) {
		t.Fatalf("a copy beside another container of a helper's name: %v, want ErrConflict", err)
	}
	if _, err := engine.InspectContainer(ctx, other); err != nil {
		t.Fatalf("the other container was touched: %v", err)
	}
}

// A file the workload made sparse (no disk used, 1 GiB long) is copied
// whole by the engine's archive; the copy stops at the bound before any of
// it is written.
func TestCopyWorkspaceStopsAtItsBound(t *testing.T) {
	ctx := context.Background()
	labels := testLabels(t)
	src, dst := uniqueName()+"-src", uniqueName()+"-dst"
	for _, v := range []string{src, dst} {
		if _, err := engine.EnsureVolume(ctx, VolumeSpec{Name: v, Labels: labels}); err != nil {
			t.Fatal(err)
		}
	}
	sh(t, "run", "--rm", "--network", "none", "--label", "afe.test="+labels["afe.test"], "-v", src+":/workspace", testImage, "sh", "-c",
		"echo small > /workspace/a-small && truncate -s 1G /workspace/b-sparse && du -sk /workspace")
	const bound = 16 << 20
	started := time.Now()
	_, err := engine.CopyWorkspace(ctx, CopySpec{
		Name: uniqueName() + "-copy", Image: testImage, Labels: labels,
		From:     Mount{Type: MountVolume, Source: src},
		To:       Mount{Type: MountVolume, Source: dst},
		MaxBytes: bound,
	})
	if !errors.Is(err, tarbound.ErrTooLarge) {
		t.Fatalf("copy of a 1 GiB sparse file bounded at 16 MiB: %v", err)
	}
	t.Logf("refused after %s: %v", time.Since(started), err)
	got := sh(t, "run", "--rm", "--network", "none", "--label", "afe.test="+labels["afe.test"], "-v", dst+":/workspace", testImage, "sh", "-c",
		"ls /workspace; du -sk /workspace | cut -f1")
	lines := strings.Fields(got)
	kib, convErr := strconv.Atoi(lines[len(lines)-1])
	if convErr != nil || kib > bound>>10 || strings.Contains(got, "b-sparse") {
		t.Fatalf("the destination after a refused copy:\n%s", got)
	}
	if cs, _ := engine.ListContainers(ctx, labels); len(cs) != 0 {
		t.Fatalf("helpers left after a refused copy: %v", cs)
	}
}

// A workspace restored into a sandbox with another user becomes that
// user's: the files of the source's uid and gid change owner, the others'
// (a Run group, root) are kept.
func TestCopyWorkspaceGivesTheFilesOfOneOwnerToAnother(t *testing.T) {
	ctx := context.Background()
	labels := testLabels(t)
	src, dst := uniqueName()+"-src", uniqueName()+"-dst"
	for _, v := range []string{src, dst} {
		if _, err := engine.EnsureVolume(ctx, VolumeSpec{Name: v, Labels: labels}); err != nil {
			t.Fatal(err)
		}
	}
	sh(t, "run", "--rm", "--network", "none", "--label", "afe.test="+labels["afe.test"], "-v", src+":/workspace", testImage, "sh", "-c",
		"mkdir -p /workspace/d && echo hello > /workspace/d/f && chmod 640 /workspace/d/f && echo run > /workspace/d/r && echo root > /workspace/root"+
			" && chown -R 1900000001:1900000001 /workspace/d && chown 1900000001:2000000123 /workspace/d/r && chown 1900000001:1900000001 /workspace")
	_, err := engine.CopyWorkspace(ctx, CopySpec{
		Name: uniqueName() + "-copy", Image: testImage, Labels: labels,
		From:   Mount{Type: MountVolume, Source: src},
		To:     Mount{Type: MountVolume, Source: dst},
		Owners: &OwnerChange{From: Owner{UID: 1900000001, GID: 1900000001}, To: Owner{UID: 1900000002, GID: 1900000002}},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := sh(t, "run", "--rm", "--network", "none", "--label", "afe.test="+labels["afe.test"], "-v", dst+":/workspace", testImage, "sh", "-c",
		"cat /workspace/d/f; stat -c '%u:%g %a %n' /workspace/d /workspace/d/f /workspace/d/r /workspace/root")
	want := "hello\n1900000002:1900000002 755 /workspace/d\n1900000002:1900000002 640 /workspace/d/f\n" +
		"1900000002:2000000123 644 /workspace/d/r\n0:0 644 /workspace/root"
	if got != want {
		t.Fatalf("copy:\n%s\nwant:\n%s", got, want)
	}
}
