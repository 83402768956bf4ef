package run

import (
	"context"
	"fmt"
	"io"
	"sync/atomic"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/docker"
	"afe.dev/sandbox/internal/builtin"
	"afe.dev/sandbox/internal/runexec"
)

// executeMerge runs MergeAndCI: the git part (internal/builtin's script) as
// one exec, the check of its report against the repository as a second,
// then, when every lane merged, ciScript as a third in the integration
// worktree. All run as the sandbox's user under the attempt's one deadline,
// so a timeout kills any of them; the git part and ciScript with the
// attempt's group, the check with a group of its own.
func (r *Reconciler) executeMerge(ctx context.Context, run *afev1.Run, a *attempt, uid int, timedOut *atomic.Bool, o *outcome) {
	merge := builtin.MergeOf(run)
	tail := &runexec.Tail{Limit: afev1.RunOutputLimit}
	rep := builtin.NewReport(merge.Lanes)
	code, ok := r.step(ctx, a, uid, timedOut, o, docker.ExecSpec{
		Cmd:        builtin.MergeCommand(),
		Env:        merge.Env(),
		WorkingDir: "/",
		Stdout:     rep,
		Stderr:     tail,
	})
	if !ok {
		o.output, o.truncated = tail.String(), tail.Truncated()
		return
	}
	o.exitCode, o.timedOut = code, timedOut.Load()
	o.output, o.truncated = tail.String(), tail.Truncated()
	switch {
	case o.timedOut:
		return
	case execFailure(code, o.output) != "":
		o.execErr = execFailure(code, o.output)
		return
	case rep.Invalid() != "":
		o.failReason = afev1.ReportInvalidReason
		o.failMessage = "The report of the git step is invalid: " + rep.Invalid() + "; something in the sandbox wrote to it"
		return
	case code == 0 && rep.Failure != nil:
		o.failReason, o.failMessage = rep.Failure.Reason, rep.Failure.Message
		return
	case code != 0 || !rep.Done:
		// The script exits 0 whenever it says how things went; a report
		// of a script that did not is not its own.
		o.failReason = afev1.GitFailedReason
		o.failMessage = fmt.Sprintf("The git step ended with exit code %d without a result; see status.output", code)
		return
	case !r.checkMerge(ctx, run, a, uid, timedOut, o, merge, rep, tail):
		return
	case rep.Conflict != nil:
		out, code := rep.Outcome(merge.Integration, nil)
		o.exitCode, o.result = code, builtin.Fields(out)
		return
	}

	r.executeCI(ctx, run, a, uid, timedOut, o, merge, rep, tail)
}

// executeCI runs ciScript in the integration worktree once every lane
// merged, and gives the Run the result of the merge with the CI's.
func (r *Reconciler) executeCI(ctx context.Context, run *afev1.Run, a *attempt, uid int, timedOut *atomic.Bool, o *outcome,
	merge builtin.Merge, rep *builtin.Report, tail *runexec.Tail) {
	ci := &runexec.Tail{Limit: builtin.CIOutputLimit}
	_, _ = fmt.Fprintf(tail, "afe: every lane merged into %s at %s; running ciScript in %s\n", merge.Integration, rep.Integration, merge.IntegrationDir())
	both := io.MultiWriter(tail, ci)
	code, ok := r.step(ctx, a, uid, timedOut, o, docker.ExecSpec{
		Cmd:        builtin.CICommand(run.Spec.CIScript),
		Env:        merge.CIEnv(rep),
		WorkingDir: merge.IntegrationDir(),
		Stdout:     both,
		Stderr:     both,
	})
	if !ok {
		o.output, o.truncated = tail.String(), tail.Truncated()
		if o.timedOut {
			out, _ := rep.Outcome(merge.Integration, &builtin.CI{ExitCode: 137, Output: ci.String()})
			o.result = builtin.Fields(out)
		}
		return
	}
	o.exitCode, o.timedOut = code, timedOut.Load()
	o.output, o.truncated = tail.String(), tail.Truncated()
	if o.timedOut {
		// Every lane merged; the CI was killed at the deadline, which is
		// a CI that did not pass. The Run ends TimedOut with that result.
		out, _ := rep.Outcome(merge.Integration, &builtin.CI{ExitCode: code, Output: ci.String()})
		o.result = builtin.Fields(out)
		return
	}
	if msg := execFailure(code, ci.String()); msg != "" {
		o.failReason, o.failMessage = afev1.GitFailedReason, "ciScript could not be started in "+merge.IntegrationDir()+": "+msg
		return
	}
	out, code := rep.Outcome(merge.Integration, &builtin.CI{ExitCode: code, Output: ci.String()})
	o.exitCode, o.result = code, builtin.Fields(out)
}

// checkMerge verifies the git part's report against the repository, once
// the git part has exited, with the check script as the sandbox's user and
// a group of its own (builtin.CheckGID): nothing of the workload can write
// to its output, nor trace it. It returns false when the Run ends there
// (failed, timed out, or without an outcome), recorded in o.
func (r *Reconciler) checkMerge(ctx context.Context, run *afev1.Run, a *attempt, uid int, timedOut *atomic.Bool, o *outcome, merge builtin.Merge, rep *builtin.Report, tail *runexec.Tail) bool {
	ca := checkAttempt(run, a)
	chk := builtin.NewCheck(merge.Lanes)
	code, ok := r.step(ctx, ca, uid, timedOut, o, docker.ExecSpec{
		Cmd:        builtin.CheckCommand(),
		Env:        merge.Env(),
		WorkingDir: "/",
		Stdout:     chk,
		Stderr:     tail,
	})
	o.output, o.truncated = tail.String(), tail.Truncated()
	if !ok {
		// Its processes are not of the attempt's group, which the
		// deadline kills: they are killed here.
		r.kill(context.WithoutCancel(ctx), ca, uid)
		return false
	}
	if timedOut.Load() {
		o.exitCode, o.timedOut = code, true
		return false
	}
	if why := rep.Verify(chk, code); why != "" {
		o.failReason = afev1.ReportInvalidReason
		o.failMessage = "The report of the git step does not match the repository: " + why
		return false
	}
	return true
}

// checkAttempt is the attempt the check of a merge's report runs as: the
// attempt's container and number, a group of its own, and none of the
// sandbox's env (the check is the controller's, and reads the repository
// as git does without the tenant's variables).
func checkAttempt(run *afev1.Run, a *attempt) *attempt {
	return &attempt{
		number:      a.number,
		gid:         builtin.CheckGID(string(run.UID), a.number, a.sandboxGID),
		sandboxGID:  a.sandboxGID,
		sandbox:     a.sandbox,
		container:   a.container,
		containerID: a.containerID,
	}
}
