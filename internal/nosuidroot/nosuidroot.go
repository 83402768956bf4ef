// Package nosuidroot makes a folder a Folder workspace root the manager
// accepts: a bind mount of the folder on itself, mounted nosuid,nodev, as an
// operator would with
//
//	mount --bind DIR DIR && mount -o remount,bind,nosuid,nodev DIR
//
// `make run` (through hack/localcp) and the tests use it; it needs the
// right to mount (root).
package nosuidroot

import (
	"errors"
	"fmt"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Safe is true when dir is on a file system mounted nosuid and nodev.
func Safe(dir string) (bool, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return false, fmt.Errorf("statfs %s: %w", dir, err)
	}
	const both = unix.ST_NOSUID | unix.ST_NODEV
	return st.Flags&both == both, nil
}

// Mount makes dir, which must exist, a mount of itself with nosuid and
// nodev, and returns a function that undoes it. A dir already on a file
// system mounted nosuid,nodev (a mount left by a run that crashed, or the
// operator's own) is used as it is: nothing is mounted, and the function
// does nothing.
func Mount(dir string) (unmount func() error, err error) {
	dir, err = resolve(dir)
	if err != nil {
		return nil, err
	}
	if ok, err := Safe(dir); err != nil || ok {
		return func() error { return nil }, err
	}
	unmount, err = bindSelf(dir, unix.MS_NOSUID|unix.MS_NODEV)
	if err != nil {
		return nil, err
	}
	if ok, err := Safe(dir); err != nil || !ok {
		return nil, errors.Join(fmt.Errorf("%s is still not nosuid,nodev after its remount", dir), err, unmount())
	}
	return unmount, nil
}

// MountAllowingSuid makes dir a mount of itself without nosuid and nodev,
// whatever the file system under it: the root a careless operator gives,
// which the manager refuses. For tests.
func MountAllowingSuid(dir string) (unmount func() error, err error) {
	dir, err = resolve(dir)
	if err != nil {
		return nil, err
	}
	return bindSelf(dir, 0)
}

func resolve(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(dir)
}

// bindSelf bind-mounts dir on itself and remounts the bind with flags: the
// kernel ignores the other flags of the first MS_BIND call.
func bindSelf(dir string, flags uintptr) (unmount func() error, err error) {
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		return nil, fmt.Errorf("bind mount %s on itself: %w", dir, err)
	}
	unmount = func() error {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("unmount %s: %w", dir, err)
		}
		return nil
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_BIND|flags, ""); err != nil {
		return nil, errors.Join(fmt.Errorf("remount %s: %w", dir, err), unmount())
	}
	return unmount, nil
}
