package fakeengine

import (
	"errors"
	"fmt"

	"afe.dev/sandbox/docker"
)

// Op names an Engine method, for Fault.
type Op string

// The Engine methods a Fault can make fail.
const (
	OpPing             Op = "Ping"
	OpEnsureImage      Op = "EnsureImage"
	OpEnsureVolume     Op = "EnsureVolume"
	OpInspectVolume    Op = "InspectVolume"
	OpListVolumes      Op = "ListVolumes"
	OpRemoveVolume     Op = "RemoveVolume"
	OpRunContainer     Op = "RunContainer"
	OpInspectContainer Op = "InspectContainer"
	OpListContainers   Op = "ListContainers"
	OpRemoveContainer  Op = "RemoveContainer"
	OpRenameContainer  Op = "RenameContainer"
	OpEnsureNetwork    Op = "EnsureNetwork"
	OpInspectNetwork   Op = "InspectNetwork"
	OpListNetworks     Op = "ListNetworks"
	OpRemoveNetwork    Op = "RemoveNetwork"
	OpCopyWorkspace    Op = "CopyWorkspace"
	OpFillWorkspace    Op = "FillWorkspace"
	OpProcesses        Op = "Processes"
	OpExec             Op = "Exec"
	OpTell             Op = "Tell"
	OpEvents           Op = "Events"
	OpContainerUsage   Op = "ContainerUsage"
	OpDiskUsage        Op = "DiskUsage"
	OpStorageQuota     Op = "StorageQuota"
	OpStopContainer    Op = "StopContainer"
	OpStartContainer   Op = "StartContainer"
	OpRunningExecs     Op = "RunningExecs"
	OpRuntime          Op = "Runtime"
)

// Fault makes calls of Op fail with Err, as the engine would: Err is one
// of docker.ErrConflict, docker.ErrNotFound, docker.ErrUnavailable,
// docker.ErrNoAddressPool (wrapped, as docker.Client wraps them), a
// *docker.PullError (returned as it is) or any other error.
type Fault struct {
	Op Op
	// Target, when set, limits the fault to calls naming that object: a
	// container, volume or network by name or ID, an image by reference,
	// a copy by its CopySpec.Name.
	Target string
	Err    error
	// Times is how many calls fail; 0 fails every call until cleared.
	Times int
	// Skip is how many matching calls pass before the fault applies.
	Skip int
}

type fault struct {
	Fault
	left, skip int
}

// Fail installs a fault, and returns the function that clears it.
func (e *Engine) Fail(f Fault) (clear func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	ft := &fault{Fault: f, left: f.Times, skip: f.Skip}
	e.faults = append(e.faults, ft)
	return func() {
		e.mu.Lock()
		defer e.mu.Unlock()
		e.removeFault(ft)
	}
}

// Faults is how many faults are installed: a fault of Times calls goes
// once they failed.
func (e *Engine) Faults() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.faults)
}

func (e *Engine) removeFault(ft *fault) {
	for i, x := range e.faults {
		if x == ft {
			e.faults = append(e.faults[:i], e.faults[i+1:]...)
			return
		}
	}
}

// check returns the error of a call of op on the targets (the names under
// which the call's object is known): the engine being away, or a fault.
// The caller holds e.mu.
func (e *Engine) check(op Op, targets ...string) error {
	what := string(op)
	if len(targets) > 0 && targets[0] != "" {
		what += " " + targets[0]
	}
	if e.down {
		return fmt.Errorf("%s: %w: connection refused", what, docker.ErrUnavailable)
	}
	for _, ft := range e.faults {
		if ft.Op != op || !matches(ft.Target, targets) {
			continue
		}
		if ft.skip > 0 {
			ft.skip--
			continue
		}
		if ft.Times > 0 {
			if ft.left--; ft.left == 0 {
				e.removeFault(ft)
			}
		}
		var pe *docker.PullError
		if errors.As(ft.Err, &pe) {
			return ft.Err
		}
		return fmt.Errorf("%s: %w (injected)", what, ft.Err)
	}
	return nil
}

func matches(target string, targets []string) bool {
	if target == "" {
		return true
	}
	for _, t := range targets {
		if t == target {
			return true
		}
	}
	return false
}
