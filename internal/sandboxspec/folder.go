package sandboxspec

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// Folder is a Folder workspace's host folder as the controller checked it.
type Folder struct {
	// Path is the folder's absolute path from the resolved --workspace-root
	// down, with no symbolic link on it: the path the engine binds.
	Path string
	// Dev and Ino identify the directory reached from the root without
	// following any link.
	Dev uint64
	Ino uint64
}

// Same is true when dev and ino are the folder's.
func (f Folder) Same(dev, ino uint64) bool { return f.Dev == dev && f.Ino == ino }

// FolderPath checks a Folder workspace's hostPath without opening anything
// below the root: Folder workspaces are enabled, the engine sees the root as
// the controller does, and hostPath is an absolute path without ".", ".."
// or empty components, at least two components below --workspace-root (the
// namespace's folder, then the workspace's). It returns the path written
// from the resolved root, and the namespace whose folder it is under.
func FolderPath(hostPath string, opts Options) (path, namespace string, err error) {
	realRoot, comps, err := splitFolder(hostPath, opts)
	if err != nil {
		return "", "", err
	}
	return joinFolder(realRoot, comps), comps[0], nil
}

// splitFolder does FolderPath's checks and returns the resolved root and
// the components below it.
func splitFolder(hostPath string, opts Options) (realRoot string, comps []string, err error) {
	root := opts.WorkspaceRoot
	if root == "" {
		return "", nil, invalid(afev1.WorkspaceOutsideRootReason, "Folder workspaces are disabled: the controller runs without --workspace-root")
	}
	if opts.EngineRemote && !opts.WorkspaceRootShared {
		return "", nil, invalid(afev1.WorkspaceNotSharedReason,
			"Folder workspaces are refused: the Docker engine is not on a local unix socket, so it may not see --workspace-root %s as the controller does; start the controller with --workspace-root-shared if the engine sees that folder at the same path", root)
	}
	if !filepath.IsAbs(hostPath) {
		return "", nil, invalid(afev1.InvalidSpecReason, "Workspace.hostPath %q must be absolute", hostPath)
	}
	for _, c := range strings.Split(hostPath, "/")[1:] {
		switch c {
		case "..":
			return "", nil, invalid(afev1.WorkspaceOutsideRootReason, "Workspace.hostPath %q must not contain ..", hostPath)
		case ".", "":
			return "", nil, invalid(afev1.InvalidSpecReason, "Workspace.hostPath %q must be written without \".\", \"//\" or a trailing \"/\"", hostPath)
		}
	}
	realRoot, err = filepath.EvalSymlinks(root)
	if err != nil {
		return "", nil, invalid(afev1.WorkspaceOutsideRootReason, "The controller's --workspace-root %q cannot be resolved", root)
	}
	if !opts.WorkspaceRootAllowSuid {
		if err := CheckRootMount(realRoot); err != nil {
			return "", nil, err
		}
	}
	rel, ok := "", false
	for _, r := range []string{filepath.Clean(root), realRoot} {
		if hostPath == r {
			return "", nil, invalid(afev1.WorkspaceOutsideRootReason,
				"Workspace.hostPath %q is the controller's --workspace-root itself; use a folder under %s/<namespace>/", hostPath, root)
		}
		if prefix := strings.TrimSuffix(r, "/") + "/"; strings.HasPrefix(hostPath, prefix) {
			rel, ok = strings.TrimPrefix(hostPath, prefix), true
			break
		}
	}
	if !ok {
		return "", nil, invalid(afev1.WorkspaceOutsideRootReason,
			"Workspace.hostPath %q is not inside the controller's --workspace-root %s", hostPath, root)
	}
	comps = strings.Split(rel, "/")
	if len(comps) < 2 {
		return "", nil, invalid(afev1.WorkspaceOutsideRootReason,
			"Workspace.hostPath %q is the folder of namespace %s itself; use a folder inside it", hostPath, comps[0])
	}
	return realRoot, comps, nil
}

func joinFolder(realRoot string, comps []string) string {
	return strings.TrimSuffix(realRoot, "/") + "/" + strings.Join(comps, "/")
}

// FolderOf checks a Folder workspace's hostPath for a Sandbox of the
// namespace without opening anything below the root: FolderPath's checks,
// and the path must be strictly inside <root>/<namespace>/. It returns the
// path written from the resolved root.
func FolderOf(hostPath, namespace string, opts Options) (string, error) {
	realRoot, comps, err := splitNamespaceFolder(hostPath, namespace, opts)
	if err != nil {
		return "", err
	}
	return joinFolder(realRoot, comps), nil
}

func splitNamespaceFolder(hostPath, namespace string, opts Options) (realRoot string, comps []string, err error) {
	realRoot, comps, err = splitFolder(hostPath, opts)
	if err != nil {
		return "", nil, err
	}
	if comps[0] != namespace {
		return "", nil, invalid(afev1.WorkspaceOutsideRootReason,
			"Workspace.hostPath %q is not inside %s/%s/: a Sandbox of namespace %s may only use folders under its namespace's folder of the controller's --workspace-root",
			hostPath, opts.WorkspaceRoot, namespace, namespace)
	}
	return realRoot, comps, nil
}

// ResolveFolder does FolderOf's checks and opens the folder from the root
// down, one component at a time, without following any symbolic link:
// every component must be a directory. The namespace's folder is created
// (mode 0755) when it is missing; the workspace's folder must exist.
func ResolveFolder(hostPath, namespace string, opts Options) (Folder, error) {
	realRoot, comps, err := splitNamespaceFolder(hostPath, namespace, opts)
	if err != nil {
		return Folder{}, err
	}
	dev, ino, err := walk(realRoot, comps, hostPath, !opts.WorkspaceRootAllowSuid)
	if err != nil {
		return Folder{}, err
	}
	return Folder{Path: joinFolder(realRoot, comps), Dev: dev, Ino: ino}, nil
}

// walk opens the components below root one by one with O_NOFOLLOW, and
// returns the device and inode of the last one. The first component, the
// namespace's folder, is created when missing. With nosuid, the last one
// must be on a file system mounted nosuid,nodev (one mounted below the
// root has flags of its own).
func walk(root string, comps []string, hostPath string, nosuid bool) (dev, ino uint64, err error) {
	fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, 0, invalid(afev1.WorkspaceOutsideRootReason, "The controller's --workspace-root %s cannot be opened: %v", root, err)
	}
	defer func() { _ = unix.Close(fd) }()
	at := root
	for i, c := range comps {
		at = filepath.Join(at, c)
		if i == 0 {
			if err := unix.Mkdirat(fd, c, 0o755); err != nil && !errors.Is(err, unix.EEXIST) {
				return 0, 0, fmt.Errorf("create the namespace folder %s: %w", at, err)
			}
		}
		var st unix.Stat_t
		if err := unix.Fstatat(fd, c, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) {
				return 0, 0, invalid(afev1.WorkspaceMissingReason, "Workspace.hostPath %q does not exist: %s is missing; create the folder", hostPath, at)
			}
			return 0, 0, invalid(afev1.InvalidSpecReason, "Workspace.hostPath %q cannot be checked: %s: %v", hostPath, at, err)
		}
		switch st.Mode & unix.S_IFMT {
		case unix.S_IFLNK:
			return 0, 0, symlinkError(hostPath, at)
		case unix.S_IFDIR:
		default:
			return 0, 0, invalid(afev1.InvalidSpecReason, "Workspace.hostPath %q is not a directory: %s is not one", hostPath, at)
		}
		// O_NOFOLLOW: should the component have become a link since the
		// stat, the open fails rather than follow it.
		next, err := unix.Openat(fd, c, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			if errors.Is(err, unix.ELOOP) || errors.Is(err, unix.ENOTDIR) {
				return 0, 0, symlinkError(hostPath, at)
			}
			return 0, 0, invalid(afev1.InvalidSpecReason, "Workspace.hostPath %q cannot be opened: %s: %v", hostPath, at, err)
		}
		_ = unix.Close(fd)
		fd = next
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return 0, 0, fmt.Errorf("stat %s: %w", at, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return 0, 0, symlinkError(hostPath, at)
	}
	if nosuid {
		if err := checkFolderMount(fd, at); err != nil {
			return 0, 0, err
		}
	}
	return st.Dev, st.Ino, nil
}

func symlinkError(hostPath, at string) error {
	return invalid(afev1.WorkspaceSymlinkReason,
		"Workspace.hostPath %q goes through a symbolic link at %s; a Folder workspace must have no symbolic link from --workspace-root down", hostPath, at)
}

// FoldersConflict is true when two Sandboxes may not have their folders
// (paths as FolderPath writes them) at the same time: when one is inside
// the other, or when they are the same folder and the tickets differ. A
// workload can write every component below its own folder; were another
// sandbox's folder among them, it could swap one for a symbolic link before
// the engine binds that path again.
func FoldersConflict(a, ticketA, b, ticketB string) bool {
	if a == b {
		return ticketA != ticketB
	}
	return strings.HasPrefix(b, strings.TrimSuffix(a, "/")+"/") || strings.HasPrefix(a, strings.TrimSuffix(b, "/")+"/")
}
