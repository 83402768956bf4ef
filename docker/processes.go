package docker

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Process is one process of a container, as the engine's host sees it.
type Process struct {
	// PID is the process ID on the engine's host.
	PID int
	// RGID, EGID and SGID are its real, effective and saved group IDs.
	RGID, EGID, SGID int
	// State is ps's STAT column: "Z..." for a zombie.
	State string
}

// HasGroup is true when any of the process's group IDs is gid.
func (p Process) HasGroup(gid int) bool { return p.RGID == gid || p.EGID == gid || p.SGID == gid }

// Zombie is true when the process has exited and waits to be reaped.
func (p Process) Zombie() bool { return strings.HasPrefix(p.State, "Z") }

// topColumns are the ps columns Processes asks the engine for.
var topColumns = []string{"pid", "rgid", "egid", "sgid", "stat"}

// Processes lists the processes of a running container from outside the
// workload's reach, so that it cannot hide from the list or stop it: the
// engine's `docker top` (nothing runs inside the container), or, for a
// container under a user-space kernel, that kernel's own list (see
// kernelProcesses). A container whose runtime the engine no longer has is
// an error: which list is true cannot be told.
func (c *Client) Processes(ctx context.Context, container string) ([]Process, error) {
	return c.processes(ctx, container, -1)
}

// GroupProcesses lists, as Processes does, the processes of a running
// container that have the group gid (real, effective or saved): under a
// user-space kernel, much faster than the whole list.
func (c *Client) GroupProcesses(ctx context.Context, container string, gid int) ([]Process, error) {
	if gid < 0 {
		return nil, fmt.Errorf("list the processes of %s: group %d", container, gid)
	}
	return c.processes(ctx, container, gid)
}

// processes lists the container's processes, those of the group only when
// group >= 0.
func (c *Client) processes(ctx context.Context, container string, group int) ([]Process, error) {
	have, err := c.InspectContainer(ctx, container)
	if err != nil {
		return nil, err
	}
	if have.Runtime != "" {
		rt, err := c.Runtime(ctx, have.Runtime)
		if err != nil {
			return nil, fmt.Errorf("list the processes of %s: its runtime: %w", container, err)
		}
		if rt.UserSpaceKernel() {
			return c.kernelProcesses(ctx, have.ID, group)
		}
	}
	c.count("container_top")
	top, err := c.api.ContainerTop(ctx, have.ID, []string{"-o", strings.Join(topColumns, ",")})
	if err != nil {
		return nil, wrap(err, "list the processes of "+container)
	}
	ps, err := parseTop(top.Titles, top.Processes)
	if err != nil || group < 0 {
		return ps, err
	}
	return ofGroup(ps, group), nil
}

// kernelProcessesScript prints the Pid, State and Gid lines of every
// process's status file, as the user-space kernel serves them, with
// nothing but the shell's builtins. It reads /proc kernelProcessesPasses
// times: a scan is slow under gVisor, and a process that forks and exits
// (a fork-hopper) is often gone by the time its entry, listed when the
// scan began, is read, while its child was not listed yet; a controller
// that took one such miss, twice, for "no process left" ended a Run at its
// deadline with the hopper still running (the spec "ends a fork-hopper"
// under runsc). Each pass misses it at random, so the passes together
// seldom do. A status file is read only up to its Gid line (the shell reads
// it a byte at a time, each byte a system call of gVisor's kernel), and a process is read only when $1 says so (see
// kernelGroupScan); the script's own shell is never listed.
const kernelProcessesScript = `for pass in ` + kernelProcessesPasses + `; do for d in /proc/[0-9]*; do ` +
	`[ "$d" = "/proc/$$" ] && continue; ` +
	`if [ "$1" = all ] || [ -G "$d" ] || [ -O "$d" ]; then n=0; ` +
	`while IFS= read -r l; do case "$l" in Pid:*|State:*|Gid:*) echo "$l"; n=$((n+1));; esac; [ "$n" = 3 ] && break; ` +
	`done < "$d/status" 2>/dev/null; echo; fi; done; done`

// kernelGroupScan is the argument of kernelProcessesScript that reads only
// the processes that may have the group the script runs with: those whose
// /proc directory has that group (the kernel gives a process's directory
// its effective uid and gid) and those whose directory is root's (the
// kernel gives a process that made itself undumpable root's, and root's
// own are the engine's execs). A process of the group cannot be another
// owner's: without capabilities and under no-new-privileges its three
// groups stay the one it was started with. The test of an owner is one
// system call, so the scan no longer reads every process's status.
const kernelGroupScan = "group"

// kernelProcessesPasses are the passes of kernelProcessesScript over /proc.
const kernelProcessesPasses = "1 2 3"

// kernelProcessesTimeout bounds how long the kernel's list may take when
// its caller gives no deadline of its own. The scan of a group takes tens
// of milliseconds; the exec that runs it, seconds on a loaded host (each
// one starts a process of the runtime there), over 10 s on a loaded CI
// host: a caller with a deadline (a Run's KillGrace, the sweep's patience)
// says how long an answer is worth waiting for. A list cut short costs the
// engine all the same: its exec still starts, and the engine then kills it
// (one more call of the runtime).
const kernelProcessesTimeout = 10 * time.Second

// kernelProcessesMax bounds what the list may print: three lines of at
// most 80 bytes a process, for at most 65536 of them, in each pass.
const kernelProcessesMax = 3 * 3 * 80 << 16

// kernelProcesses lists the processes of a container under a user-space
// kernel (gVisor). The engine's `docker top` is wrong there: it matches the
// kernel's own process IDs against the host's process table, so it lists
// host processes. The list is read instead from the user-space kernel's
// /proc, which the workload cannot write, by the image's /bin/sh run as
// uid 0 of the container (no capability, no-new-privileges): the
// workload, another uid, can neither signal nor trace it. What it trusts
// is the image's root-owned shell, as the Run's kill does
// (docs/threat-model.md). The IDs are the kernel's, not the host's. With
// a group (group >= 0) the shell runs with that group and lists only the
// processes that have it (kernelGroupScan).
func (c *Client) kernelProcesses(ctx context.Context, id string, group int) ([]Process, error) {
	// A list slower than its caller's deadline (a fork-hopper filling
	// /proc on a loaded machine) is no answer: its caller's schedule of
	// kills, and their fallback, hold.
	ctx, cancel := listContext(ctx)
	defer cancel()
	user, scan := "0:0", "all"
	if group >= 0 {
		user, scan = "0:"+strconv.Itoa(group), kernelGroupScan
	}
	var out, errOut bytes.Buffer
	stdout := &limitedBuffer{buf: &out, max: kernelProcessesMax}
	code, err := c.Exec(ctx, id, ExecSpec{Cmd: []string{"/bin/sh", "-c", kernelProcessesScript, "afe-ps", scan}, User: user,
		Stdout: stdout, Stderr: &limitedBuffer{buf: &errOut, max: 4096}})
	if err != nil {
		return nil, err
	}
	if code != 0 || stdout.over {
		return nil, fmt.Errorf("list the processes of %s in its kernel: exit code %d (%s)", id, code, strings.TrimSpace(errOut.String()))
	}
	ps, err := parseStatus(out.String())
	if err != nil || group < 0 {
		return ps, err
	}
	return ofGroup(ps, group), nil
}

// listContext is ctx when it has a deadline, else ctx bounded by
// kernelProcessesTimeout.
func listContext(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, kernelProcessesTimeout)
}

// ofGroup keeps the processes that have the group.
func ofGroup(ps []Process, gid int) []Process {
	out := ps[:0]
	for _, p := range ps {
		if p.HasGroup(gid) {
			out = append(out, p)
		}
	}
	return out
}

// parseStatus reads the blocks kernelProcessesScript prints: a process's
// Pid, State and Gid lines, then an empty line. A process that ended
// while it was read leaves an empty or partial block, which is skipped. A
// process read by several passes is listed once, as the last pass saw it
// (so one that ended between passes may still be listed: a list may hold
// a process too many, never one too few).
func parseStatus(s string) ([]Process, error) {
	var out []Process
	at := map[int]int{}
	for _, block := range strings.Split(s, "\n\n") {
		var p Process
		var pid, state, gid bool
		for _, line := range strings.Split(strings.TrimSpace(block), "\n") {
			key, value, ok := strings.Cut(line, ":")
			if !ok {
				continue
			}
			f := strings.Fields(value)
			var err error
			switch key {
			case "Pid":
				if len(f) != 1 {
					return nil, fmt.Errorf("process status line %q", line)
				}
				if p.PID, err = strconv.Atoi(f[0]); err != nil {
					return nil, fmt.Errorf("process status line %q: %w", line, err)
				}
				pid = true
			case "State":
				if len(f) == 0 {
					return nil, fmt.Errorf("process status line %q", line)
				}
				p.State, state = f[0], true
			case "Gid":
				if len(f) < 3 {
					return nil, fmt.Errorf("process status line %q", line)
				}
				for i, dst := range []*int{&p.RGID, &p.EGID, &p.SGID} {
					if *dst, err = strconv.Atoi(f[i]); err != nil {
						return nil, fmt.Errorf("process status line %q: %w", line, err)
					}
				}
				gid = true
			}
		}
		if !pid || !state || !gid {
			continue
		}
		if i, seen := at[p.PID]; seen {
			out[i] = p
		} else {
			at[p.PID] = len(out)
			out = append(out, p)
		}
	}
	return out, nil
}

// limitedBuffer keeps at most max bytes and notes that more came.
type limitedBuffer struct {
	buf  *bytes.Buffer
	max  int
	over bool
}

func (b *limitedBuffer) Write(p []byte) (int, error) {
	if room := b.max - b.buf.Len(); len(p) > room {
		b.over = true
		b.buf.Write(p[:max(room, 0)])
		return len(p), nil
	}
	return b.buf.Write(p)
}

// parseTop reads the columns of topColumns, wherever the engine put them.
func parseTop(titles []string, rows [][]string) ([]Process, error) {
	at := map[string]int{}
	for i, t := range titles {
		at[strings.ToLower(strings.TrimSpace(t))] = i
	}
	for _, col := range topColumns {
		if _, ok := at[col]; !ok {
			return nil, fmt.Errorf("the engine's process list has no %s column (columns %v)", col, titles)
		}
	}
	out := make([]Process, 0, len(rows))
	for _, row := range rows {
		if len(row) < len(titles) {
			return nil, fmt.Errorf("process row %v is shorter than the columns %v", row, titles)
		}
		var p Process
		var err error
		for col, dst := range map[string]*int{"pid": &p.PID, "rgid": &p.RGID, "egid": &p.EGID, "sgid": &p.SGID} {
			if *dst, err = strconv.Atoi(strings.TrimSpace(row[at[col]])); err != nil {
				return nil, fmt.Errorf("process row %v: %s: %w", row, col, err)
			}
		}
		p.State = strings.TrimSpace(row[at["stat"]])
		out = append(out, p)
	}
	return out, nil
}
