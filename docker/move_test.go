package docker

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"afe.dev/sandbox/internal/tarbound"
)

// A workspace moved to another engine: exported from one volume as a tar
// stream and filled into another, modes and links kept, owners changed,
// bounded, and no helper left on either side.
func TestExportFillWorkspaceRoundTrip(t *testing.T) {
	ctx := context.Background()
	labels := testLabels(t)
	src, dst := uniqueName()+"-src", uniqueName()+"-dst"
	for _, v := range []string{src, dst} {
		if _, err := engine.EnsureVolume(ctx, VolumeSpec{Name: v, Labels: labels}); err != nil {
			t.Fatal(err)
		}
	}
	sh(t, "run", "--rm", "--network", "none", "--label", "afe.test="+labels["afe.test"], "-v", src+":/workspace", testImage, "sh", "-c",
		"mkdir -p /workspace/d && echo hello > /workspace/d/f && chmod 640 /workspace/d/f && head -c 1048576 /dev/urandom > /workspace/blob && "+
			"ln -s d/f /workspace/link && chown -R 2000100:2000100 /workspace && sha256sum /workspace/blob > /workspace/blob.sum")

	tree, err := engine.ExportWorkspace(ctx, uniqueName()+"-out", labels, Mount{Type: MountVolume, Source: src})
	if err != nil {
		t.Fatal(err)
	}
	var sent bytes.Buffer
	if _, err := io.Copy(&sent, tree); err != nil {
		t.Fatal(err)
	}
	if err := tree.Close(); err != nil {
		t.Fatal(err)
	}
	if cs, _ := engine.ListContainers(ctx, labels); len(cs) != 0 {
		t.Fatalf("export helpers left: %v", cs)
	}

	n, err := engine.FillWorkspace(ctx, FillSpec{
		Name: uniqueName() + "-in", Labels: labels,
		To:       Mount{Type: MountVolume, Source: dst},
		Tree:     bytes.NewReader(sent.Bytes()),
		MaxBytes: 4 << 20,
		Owners:   &OwnerChange{From: Owner{UID: 2000100, GID: 2000100}, To: Owner{UID: 2000200, GID: 2000200}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(sent.Len()) {
		t.Errorf("FillWorkspace read %d bytes of %d", n, sent.Len())
	}
	got := sh(t, "run", "--rm", "--network", "none", "--label", "afe.test="+labels["afe.test"], "-v", dst+":/workspace", testImage, "sh", "-c",
		"cd /workspace && sha256sum -c blob.sum >/dev/null && echo whole; cat d/f; stat -c '%u:%g %a' . d/f blob; readlink link")
	if want := "whole\nhello\n2000200:2000200 755\n2000200:2000200 640\n2000200:2000200 644\nd/f"; got != want {
		t.Fatalf("filled:\n%s\nwant:\n%s", got, want)
	}
	if cs, _ := engine.ListContainers(ctx, labels); len(cs) != 0 {
		t.Fatalf("fill helpers left: %v", cs)
	}

	// Past the bound, the fill fails, and leaves no helper.
	_, err = engine.FillWorkspace(ctx, FillSpec{
		Name: uniqueName() + "-in", Labels: labels,
		To:       Mount{Type: MountVolume, Source: dst},
		Tree:     bytes.NewReader(sent.Bytes()),
		MaxBytes: 512 << 10,
	})
	if !errors.Is(err, tarbound.ErrTooLarge) {
		t.Fatalf("a tree past the bound: %v, want ErrTooLarge", err)
	}
	if cs, _ := engine.ListContainers(ctx, labels); len(cs) != 0 {
		t.Fatalf("fill helpers left after a failure: %v", cs)
	}
}
