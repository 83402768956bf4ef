package run

import (
	"context"
	"errors"
	"fmt"
	"time"

	logf "sigs.k8s.io/controller-runtime/pkg/log"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/builtin"
	"afe.dev/sandbox/internal/runexec"
)

// Processes names the processes of one attempt and the container they run
// in: what the integration suite ends directly, against the real engine,
// to prove the containment of a Run (its deadline's kill and the sweep
// after its end) without waiting for a Run to reach that point. The
// reconciler itself never takes one: it derives an attempt's container
// from the Sandbox's identity and verifies its labels first. A caller of
// EndProcesses or SweepProcesses vouches for the container, which they may
// remove.
type Processes struct {
	Container   string
	ContainerID string
	// GID is the attempt's own group; SandboxGID the sandbox user's.
	GID        int
	SandboxGID int
}

func (p Processes) attempt() *attempt {
	return &attempt{container: p.Container, containerID: p.ContainerID, gid: p.GID, sandboxGID: p.SandboxGID}
}

// EndProcesses is endAttempt: it ends every process of the group within
// KillGrace, and tells whether that took removing the container.
func (r *Reconciler) EndProcesses(ctx context.Context, p Processes, uid int) bool {
	return r.endAttempt(ctx, p.attempt(), uid)
}

// SweepProcesses is sweepAttempt: it kills what is left of the group once
// the Run's attempt ended, and tells whether that took removing the
// container.
func (r *Reconciler) SweepProcesses(ctx context.Context, run *afev1.Run, p Processes, uid int, unclean bool) bool {
	return r.sweepAttempt(ctx, run, p.attempt(), uid, unclean)
}

// containerGone tells whether the attempt's container died under it. A
// command killed by a signal may have been killed by the container's end,
// which the engine reports a moment after the command's.
func (r *Reconciler) containerGone(ctx context.Context, a *attempt) bool {
	select {
	case <-ctx.Done():
	case <-time.After(time.Second):
	}
	c, err := r.Engine.InspectContainer(ctx, a.containerID)
	return err != nil || !c.Running
}

// endAttempt ends every process of an attempt within KillGrace (at its
// deadline, or left by an attempt a restart cut short), and tells whether
// that took removing the sandbox container. The kill script
// runs in the container as the workload's own uid (root there has no
// CAP_KILL), so the workload can kill it or outpace it; what it left is
// counted from the engine's side (docker top), which the workload cannot
// touch. Processes that survive every round are ended with the container:
// the Sandbox controller sees a lost container and recreates the sandbox.
// A list that fails within KillGrace counts as survivors: a deadline holds
// whatever the engine does. (The sweep after an end looks with patience
// first, in noneLeft, and comes here only with survivors, or with no
// answer once its patience has passed: see endLeftovers.)
func (r *Reconciler) endAttempt(ctx context.Context, a *attempt, uid int) bool {
	return r.endAttemptBy(ctx, a, uid, time.Now().Add(KillGrace))
}

// endLeftovers is endAttempt for what the sweep after a Run's end found:
// no deadline is passing (the Run is said ended only after), so the kill
// and its lists keep the sweep's patience, never less than KillGrace. Under
// gVisor on a loaded host one exec took over 10 s: a grace of KillGrace
// there counted a process already killed as a survivor, and removed the
// sandbox container with it.
func (r *Reconciler) endLeftovers(ctx context.Context, a *attempt, uid int, patience time.Time) bool {
	grace := time.Now().Add(KillGrace)
	if patience.After(grace) {
		grace = patience
	}
	return r.endAttemptBy(ctx, a, uid, grace)
}

// endAttemptBy is endAttempt with its grace ending at grace.
func (r *Reconciler) endAttemptBy(ctx context.Context, a *attempt, uid int, grace time.Time) bool {
	log := logf.FromContext(ctx)
	until := grace.Add(-killRound)
	for {
		kctx, cancel := context.WithTimeout(ctx, killRound)
		r.kill(kctx, a, uid)
		cancel()
		// A list slower than the grace left is no answer: the deadline
		// holds, with the container's removal if it must.
		lctx, cancel := context.WithDeadline(ctx, until.Add(killRound))
		left, err := r.survivors(lctx, a)
		if err == nil && left == 0 {
			// A fork-hopper's newest process can be ahead of the engine's
			// scan of the container's processes while its parent, behind
			// it, has exited: a clean list counts only when a second one,
			// a moment later, agrees.
			time.Sleep(survivorsRecheck)
			left, err = r.survivors(lctx, a)
		}
		cancel()
		if err == nil && left == 0 {
			return false
		}
		if errors.Is(err, docker.ErrNotFound) {
			return false // the container, and everything in it, is gone
		}
		if err != nil && r.containerStopped(ctx, a) {
			// Stopped (a suspension): the end of its first process ended
			// every other. Removing it would lose the sandbox.
			return false
		}
		if time.Now().After(until) {
			log.Info("Processes of the Run survived every kill; removing the sandbox container",
				"container", a.container, "survivors", left, "error", fmt.Sprint(err))
			rmCtx, cancel := context.WithTimeout(ctx, killTimeout)
			defer cancel()
			if err := r.Engine.RemoveContainer(rmCtx, a.containerID); err != nil {
				log.Error(err, "Remove the sandbox container of a Run that outlived its kill", "container", a.container)
			}
			return true
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sweepAttempt looks for the attempt's processes, of each of its groups,
// once it ended, however it ended, and kills them before the Run is said
// ended (and its slot is free). The step's own kill runs as the workload's
// uid, so the workload can kill it first (a background process killing its
// parent, a git filter killing the merge step) and leave processes behind.
// They are looked for from the engine's side (docker top), which the
// workload cannot touch, with patience (noneLeft): a Run that ended is
// held, not cut short, by a slow engine. A step that ended by a signal
// (unclean: its kill may not have run) is killed first, and needs two
// clean lists. What is found, or what cannot be counted once the patience
// has passed, is killed as at a deadline (endAttempt), which tells whether
// the sandbox container had to be removed with survivors.
func (r *Reconciler) sweepAttempt(ctx context.Context, run *afev1.Run, a *attempt, uid int, unclean bool) bool {
	groups := []*attempt{a}
	if run.Spec.Builtin == afev1.BuiltinMergeAndCI {
		// The check step's group, of its own.
		groups = append(groups, &attempt{number: a.number, gid: builtin.CheckGID(string(run.UID), a.number, a.sandboxGID),
			sandboxGID: a.sandboxGID, sandbox: a.sandbox, container: a.container, containerID: a.containerID})
	}
	patience := time.Now().Add(sweepPatience) // one for the whole sweep
	for _, g := range groups {
		if unclean {
			// The kill's own bound (killTimeout), within the patience.
			kctx, cancel := context.WithDeadline(ctx, patience)
			r.kill(kctx, g, uid)
			cancel()
		}
		if r.noneLeft(ctx, g, patience, unclean) {
			continue
		}
		logf.FromContext(ctx).Info("Killing what is left of the Run's processes after its end", "gid", g.gid)
		if r.endLeftovers(ctx, g, uid, patience) {
			return true
		}
	}
	return false
}

// sweepPatience is how long the sweep after a Run's end waits for the
// engine to list what is left of the Run, before what it could not count
// is killed as at a deadline (and the container removed, if the engine
// still cannot list it): the Run is said ended only after, so nothing of
// it runs unrecorded meanwhile. Each exec under gVisor starts a process of
// the runtime on the host: on a loaded host a list took over 10 s, and
// lists cut short at 10 s and tried again (each abandoned exec still costs
// the engine its start, and its kill) made the engine slower still, until
// the sandboxes of many Runs were removed.
var sweepPatience = time.Minute

// Waits between the lists of a sweep that failed: no list is tried again
// at once, which would only add to the load of an engine already too slow.
const (
	sweepRetry    = time.Second
	sweepRetryMax = 8 * time.Second
)

// noneLeft tells whether the engine lists no process of the attempt's group
// (or no longer has its container, or has it stopped), waiting for its
// answer until patience: one list at a time, each given the time left, a
// failing one tried again after a wait that grows. With recheck, a clean
// list counts only when a second one, a moment later, agrees (a
// fork-hopper may be running: see endAttempt).
func (r *Reconciler) noneLeft(ctx context.Context, a *attempt, patience time.Time, recheck bool) bool {
	wait := sweepRetry
	for {
		lctx, cancel := context.WithDeadline(ctx, patience)
		left, err := r.survivors(lctx, a)
		if err == nil && left == 0 && recheck {
			time.Sleep(survivorsRecheck)
			left, err = r.survivors(lctx, a)
		}
		cancel()
		switch {
		case errors.Is(err, docker.ErrNotFound):
			return true // the container, and everything in it, is gone
		case err == nil:
			return left == 0
		case r.containerStopped(ctx, a):
			return true // the end of its first process ended every other
		case ctx.Err() != nil || time.Now().Add(wait).After(patience):
			logf.FromContext(ctx).Info("Cannot list what is left of the Run's processes", "gid", a.gid, "error", err.Error())
			return false
		}
		select {
		case <-ctx.Done():
		case <-time.After(wait):
		}
		wait = min(2*wait, sweepRetryMax)
	}
}

// containerStopped tells whether the attempt's container exists and does not
// run, as the engine reports it now.
func (r *Reconciler) containerStopped(ctx context.Context, a *attempt) bool {
	c, err := r.Engine.InspectContainer(ctx, a.containerID)
	return err == nil && !c.Running
}

// survivorsRecheck is the wait before a clean list of an attempt's
// processes is checked again.
const survivorsRecheck = 100 * time.Millisecond

// survivors counts the live processes of the attempt's group in its
// container, as the engine sees them.
func (r *Reconciler) survivors(ctx context.Context, a *attempt) (int, error) {
	ps, err := r.Engine.GroupProcesses(ctx, a.containerID, a.gid)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range ps {
		if !p.Zombie() {
			n++
		}
	}
	return n, nil
}

// kill kills every process of a Run attempt in the container, until none
// is left. It runs as the sandbox's uid (allowed to signal its own
// processes; root in the sandbox has no CAP_KILL) with the sandbox's own
// group, so that it is not one of the processes it kills.
func (r *Reconciler) kill(ctx context.Context, a *attempt, uid int) {
	container, gid := a.containerID, a.gid
	ctx, cancel := context.WithTimeout(ctx, killTimeout)
	defer cancel()
	code, err := r.Engine.Exec(ctx, container, docker.ExecSpec{Cmd: runexec.KillCommand(gid), User: fmt.Sprintf("%d:%d", uid, a.sandboxGID)})
	if err != nil && !errors.Is(err, docker.ErrNotFound) {
		logf.FromContext(ctx).Error(err, "Kill a Run's processes", "container", container, "gid", gid)
	} else if code != 0 && err == nil {
		logf.FromContext(ctx).Info("Some of a Run's processes survived the kill", "container", container, "gid", gid)
	}
}

// Timing of the kill of a Run's processes.
const (
	// killTimeout bounds one kill of a Run's processes.
	killTimeout = 30 * time.Second
	// KillGrace bounds the enforcement of a deadline: by then every
	// process of the attempt is gone, or the sandbox container is.
	KillGrace = 5 * time.Second
	// killRound bounds one run of the kill script at a deadline: the
	// workload may kill it (same uid) or outpace it (a fork-hopper).
	killRound = 2 * time.Second
)
