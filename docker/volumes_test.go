package docker

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// volumeImage builds an image of the test image that declares VOLUME
// paths, removed when the test ends.
func volumeImage(t *testing.T, volumes ...string) string {
	t.Helper()
	image := "afe/volume-test:" + uniqueName()
	dir := t.TempDir()
	df := "FROM " + testImage + "\n"
	for _, v := range volumes {
		df += "VOLUME " + v + "\n"
	}
	if err := os.WriteFile(filepath.Join(dir, "Dockerfile"), []byte(df), 0o644); err != nil {
		t.Fatal(err)
	}
	build := exec.Command("docker", "build", "-q", "-t", image, dir)
	build.Env = append(os.Environ(), "DOCKER_BUILDKIT=0")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", image).Run() })
	return image
}

// Every VOLUME of an image gets the volume the spec names, with its labels,
// so that the engine makes no anonymous volume: one removed by hand with
// its container is found by its labels. A path the spec mounts itself is
// left to that mount.
func TestRunContainerNamesAndLabelsImageVolumes(t *testing.T) {
	ctx := context.Background()
	labels := testLabels(t)
	name := uniqueName()
	image := volumeImage(t, "/data", "/var/cache/x", "/workspace")
	named := map[string]string{"/data": name + "_vol-data", "/var/cache/x": name + "_vol-cache"}
	c, err := engine.RunContainer(ctx, ContainerSpec{
		Name: name, Image: image, Labels: labels, Network: "none", Command: []string{"sleep", "600"},
		Mounts:       []Mount{{Type: MountVolume, Source: name + "_ws", Target: "/workspace", Labels: labels}},
		ImageVolumes: &ImageVolumes{Name: func(p string) string { return named[p] }, Labels: labels},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, m := range c.Mounts {
		got[m.Destination] = m.Name
	}
	want := map[string]string{"/data": named["/data"], "/var/cache/x": named["/var/cache/x"], "/workspace": name + "_ws"}
	if len(got) != len(want) {
		t.Fatalf("mounts %v, want %v", got, want)
	}
	for dst, v := range want {
		if got[dst] != v {
			t.Fatalf("mount at %s is volume %q, want %q (all: %v)", dst, got[dst], v, got)
		}
	}
	// Removed by hand, as a user with engine access would: the volumes stay,
	// labelled, for the controller to find.
	sh(t, "rm", "-f", name)
	vs, err := engine.ListVolumes(ctx, labels)
	if err != nil || len(vs) != 3 {
		t.Fatalf("labelled volumes after docker rm -f: %v %+v", err, vs)
	}
	// A volume of the name with other labels is never mounted.
	other := map[string]string{"afe.test": labels["afe.test"], "afe.sandbox-uid": "someone-else"}
	_, err = engine.RunContainer(ctx, ContainerSpec{
		Name: name, Image: image, Labels: other, Network: "none", Command: []string{"sleep", "600"},
		ImageVolumes: &ImageVolumes{Name: func(p string) string { return named[p] }, Labels: other},
	})
	if !errors.Is(err, ErrConflict) {
		t.Fatalf("a volume of another's labels: err = %v, want ErrConflict", err)
	}
}
