package docker

import (
	"context"
	"fmt"
	"strconv"
	"strings"
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

// Processes lists the processes of a running container, from the engine's
// side (`docker top`): nothing runs inside the container to list them, so a
// workload cannot hide from it or stop it.
func (c *Client) Processes(ctx context.Context, container string) ([]Process, error) {
	c.count("container_top")
	top, err := c.api.ContainerTop(ctx, container, []string{"-o", strings.Join(topColumns, ",")})
	if err != nil {
		return nil, wrap(err, "list the processes of "+container)
	}
	return parseTop(top.Titles, top.Processes)
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
