package docker

import (
	"context"
	"testing"
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
