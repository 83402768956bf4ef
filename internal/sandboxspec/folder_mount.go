package sandboxspec

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// A Folder workspace is a directory of the host's own file system: a setuid
// program or a device file a workload leaves there (its uid's setuid bit, a
// FIFO, a node made elsewhere and copied in) is one for the host's users
// too. The root's file system must therefore be mounted nosuid,nodev: then
// the kernel ignores the setuid bits and device files under it, on the host
// and in the sandbox alike (a bind mount keeps the flags of the mount it
// binds).

// unsafeMountFlags names what the flags of a statfs lack of nosuid,nodev;
// "" when they have both.
func unsafeMountFlags(flags int64) string {
	var missing []string
	if flags&unix.ST_NOSUID == 0 {
		missing = append(missing, "nosuid")
	}
	if flags&unix.ST_NODEV == 0 {
		missing = append(missing, "nodev")
	}
	return strings.Join(missing, ",")
}

// CheckRootMount checks that the file system path is on is mounted
// nosuid,nodev. It returns an *InvalidError with reason
// WorkspaceRootUnsafe when it is not, saying how to mount it.
func CheckRootMount(path string) error {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return invalid(afev1.WorkspaceRootUnsafeReason, "The controller's --workspace-root %s cannot be examined: %v", path, err)
	}
	return rootMountError(path, st)
}

// checkFolderMount is CheckRootMount for an open folder: a file system
// mounted below the root has flags of its own.
func checkFolderMount(fd int, path string) error {
	var st unix.Statfs_t
	if err := unix.Fstatfs(fd, &st); err != nil {
		return fmt.Errorf("statfs %s: %w", path, err)
	}
	return rootMountError(path, st)
}

func rootMountError(path string, st unix.Statfs_t) error {
	missing := unsafeMountFlags(st.Flags)
	if missing == "" {
		return nil
	}
	return invalid(afev1.WorkspaceRootUnsafeReason,
		"Folder workspaces are refused: %s is on a file system mounted without %s, so a setuid program or a device file a workload leaves in its folder would work for the host's users; mount the root nosuid,nodev (for instance on itself: mount --bind ROOT ROOT && mount -o remount,bind,nosuid,nodev ROOT), or start the controller with --workspace-root-allow-suid to accept that risk",
		path, missing)
}
