// Package hostgroups finds the groups of the engine's host that a sandbox's
// user must never have: the group that owns the engine's socket, the
// well-known privileged groups, and those the operator names. A process in
// one of them reaches, through a Folder workspace, whatever that group may
// open on the host: the engine's socket is root on the host.
package hostgroups

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"afe.dev/sandbox/internal/runexec"
)

// Privileged are the names of groups that hand out root, the engine, disks,
// memory, logs, password hashes or terminals on common distributions. Those
// the host's group file holds are denied by default.
var Privileged = []string{
	"root", "sudo", "wheel", "admin", "adm", "disk", "kmem", "shadow",
	"docker", "lxd", "kvm", "systemd-journal", "staff", "tty",
}

// maxGID is the largest gid a sandbox's user may name.
const maxGID = 1<<31 - 2

// Read parses a group file (name:password:gid:members lines) into gids by
// name. A missing file is an empty one: the controller may run where the
// host's groups are not visible (then only numeric gids can be denied).
func Read(path string) (map[string]int, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]int{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read group file: %w", err)
	}
	defer func() { _ = f.Close() }()
	out := map[string]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		fields := strings.Split(sc.Text(), ":")
		if len(fields) < 3 || fields[0] == "" || strings.HasPrefix(fields[0], "#") || strings.HasPrefix(fields[0], "+") || strings.HasPrefix(fields[0], "-") {
			continue
		}
		gid, err := strconv.Atoi(fields[2])
		if err != nil || gid < 0 {
			continue
		}
		if _, seen := out[fields[0]]; !seen {
			out[fields[0]] = gid
		}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read group file %s: %w", path, err)
	}
	return out, nil
}

// SocketPath is the path of the engine's unix socket for a Docker host
// address ("unix:///var/run/docker.sock"), or "" when the engine is reached
// otherwise (tcp://, ssh://).
func SocketPath(host string) string {
	if p, ok := strings.CutPrefix(host, "unix://"); ok {
		return p
	}
	return ""
}

// SocketGID is the group that owns the file at path.
func SocketGID(path string) (int, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return 0, fmt.Errorf("find the group of the engine's socket: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, fmt.Errorf("find the group of the engine's socket %s: no owner information", path)
	}
	return int(st.Gid), nil
}

// Defaults are the gids denied whatever the flags say: the group that owns
// the engine's socket (when socketPath is set) and the Privileged groups the
// group file holds, sorted. The socket must exist when its path is given.
func Defaults(socketPath, groupFile string) ([]int, error) {
	groups, err := Read(groupFile)
	if err != nil {
		return nil, err
	}
	var out []int
	if socketPath != "" {
		gid, err := SocketGID(socketPath)
		if err != nil {
			return nil, err
		}
		out = append(out, gid)
	}
	for _, name := range Privileged {
		if gid, ok := groups[name]; ok {
			out = append(out, gid)
		}
	}
	return normalize(out)
}

// DenyGIDs is the controller's deny list: Defaults plus the entries of
// flag, a comma-separated list of gids and group names (resolved in the
// group file; an unknown name is an error). A denied gid among the
// controller's Run groups (runexec.GIDMin to GIDMax) is an error: a Run's
// commands would have it.
func DenyGIDs(flag, socketPath, groupFile string) ([]int, error) {
	out, err := Defaults(socketPath, groupFile)
	if err != nil {
		return nil, err
	}
	groups, err := Read(groupFile)
	if err != nil {
		return nil, err
	}
	for _, f := range strings.Split(flag, ",") {
		f = strings.TrimSpace(f)
		if f == "" {
			continue
		}
		if strings.TrimLeft(f, "0123456789") == "" {
			gid, err := strconv.Atoi(f)
			if err != nil || gid > maxGID {
				return nil, fmt.Errorf("--deny-gids: %q is not a gid (0 to %d)", f, maxGID)
			}
			out = append(out, gid)
			continue
		}
		gid, ok := groups[f]
		if !ok {
			return nil, fmt.Errorf("--deny-gids: no group %q in %s", f, groupFile)
		}
		out = append(out, gid)
	}
	return normalize(out)
}

// normalize sorts and deduplicates gids and refuses those among the Run
// groups.
func normalize(gids []int) ([]int, error) {
	slices.Sort(gids)
	gids = slices.Compact(gids)
	for _, g := range gids {
		if g >= runexec.GIDMin && g <= runexec.GIDMax {
			return nil, fmt.Errorf("gid %d is denied (a privileged group of the host, or in --deny-gids) but lies in %d-%d, the groups the controller gives the commands of Runs: move that group on the host", g, runexec.GIDMin, runexec.GIDMax)
		}
	}
	return gids, nil
}

// DenyList is the controller's deny list once the manager runs: the gids of
// DenyGIDs without the socket's group, and that group looked up when first
// asked for. A manager can then start while its engine, and the engine's
// socket, is away; until the socket is found no sandbox user passes (GIDs
// fails), as no sandbox can start anyway.
type DenyList struct {
	fixed  []int
	socket string

	mu       sync.Mutex
	gids     []int
	resolved bool
}

// NewDenyList is the deny list of the flag (as DenyGIDs takes it), the
// privileged groups of groupFile, and the group owning socketPath ("" when
// the engine is not reached through a local socket).
func NewDenyList(flag, socketPath, groupFile string) (*DenyList, error) {
	fixed, err := DenyGIDs(flag, "", groupFile)
	if err != nil {
		return nil, err
	}
	d := &DenyList{fixed: fixed, socket: socketPath}
	if socketPath == "" {
		d.gids, d.resolved = fixed, true
	}
	return d, nil
}

// FixedDenyList is a deny list of the given gids only.
func FixedDenyList(gids ...int) (*DenyList, error) {
	gids, err := normalize(slices.Clone(gids))
	if err != nil {
		return nil, err
	}
	return &DenyList{fixed: gids, gids: gids, resolved: true}, nil
}

// GIDs is the whole deny list, sorted. It fails while the engine's socket
// cannot be found; once found, its group is kept for the process's life.
// A nil DenyList denies nothing.
func (d *DenyList) GIDs() ([]int, error) {
	if d == nil {
		return nil, nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.resolved {
		return d.gids, nil
	}
	gid, err := SocketGID(d.socket)
	if err != nil {
		return nil, err
	}
	gids, err := normalize(append(slices.Clone(d.fixed), gid))
	if err != nil {
		return nil, err
	}
	d.gids, d.resolved = gids, true
	return gids, nil
}

// String names the list for logs: the gids known so far, and the socket
// whose group is still to be looked up.
func (d *DenyList) String() string {
	if d == nil {
		return "[]"
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.resolved {
		return fmt.Sprint(d.gids)
	}
	return fmt.Sprintf("%v and the group of %s (not found yet)", d.fixed, d.socket)
}
