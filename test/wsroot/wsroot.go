// Package wsroot makes Folder workspace roots for tests: a fresh folder
// that is a mount of itself, nosuid,nodev as the manager asks of
// --workspace-root, or without those options (a root it refuses), whatever
// the file system the folder is made on. Mounting needs root: without it a
// test is skipped, unless CI or AFE_REQUIRE_DOCKER is set, where it fails.
package wsroot

import (
	"errors"
	"fmt"
	"os"
	"testing"

	"afe.dev/sandbox/internal/nosuidroot"
)

// Make makes a fresh folder (mode 0755, so that any host user may walk into
// it) mounted nosuid,nodev when safe, or mounted without them, and returns
// it with a function that unmounts and removes it.
func Make(safe bool) (dir string, cleanup func() error, err error) {
	if os.Geteuid() != 0 {
		return "", nil, errors.New("a workspace root mount needs root")
	}
	dir, err = os.MkdirTemp("", "afe-ws-root-")
	if err != nil {
		return "", nil, err
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		return "", nil, errors.Join(err, os.RemoveAll(dir))
	}
	mount := nosuidroot.MountAllowingSuid
	if safe {
		mount = mountAlways
	}
	unmount, err := mount(dir)
	if err != nil {
		return "", nil, errors.Join(err, os.RemoveAll(dir))
	}
	return dir, func() error { return errors.Join(unmount(), os.RemoveAll(dir)) }, nil
}

// mountAlways mounts dir nosuid,nodev even where its file system already
// is (a nosuid /tmp), so that each test's root is a mount of its own.
func mountAlways(dir string) (func() error, error) {
	unsafe, err := nosuidroot.MountAllowingSuid(dir)
	if err != nil {
		return nil, err
	}
	safe, err := nosuidroot.Mount(dir)
	if err != nil {
		return nil, errors.Join(err, unsafe())
	}
	return func() error { return errors.Join(safe(), unsafe()) }, nil
}

// Temp is Make for a test: the root is unmounted and removed at its end.
func Temp(t testing.TB, safe bool) string {
	t.Helper()
	if os.Geteuid() != 0 && os.Getenv("CI") == "" && os.Getenv("AFE_REQUIRE_DOCKER") == "" {
		t.Skip("a workspace root mount needs root")
	}
	dir, cleanup, err := Make(safe)
	if err != nil {
		t.Fatal(fmt.Errorf("workspace root: %w", err))
	}
	t.Cleanup(func() {
		if err := cleanup(); err != nil {
			t.Error(err)
		}
	})
	return dir
}
