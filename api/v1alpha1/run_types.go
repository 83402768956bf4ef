package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// RunFinalizer is set on a Run until it ends, so that deleting a running Run
// kills its processes first.
const RunFinalizer = "sandbox.afe.dev/run"

// RunPhase is where a Run is in its life.
// +kubebuilder:validation:Enum=Pending;Running;Completed;TimedOut;Failed
type RunPhase string

// The phases of a Run. Completed, TimedOut and Failed are terminal.
const (
	RunPending   RunPhase = "Pending"
	RunRunning   RunPhase = "Running"
	RunCompleted RunPhase = "Completed"
	RunTimedOut  RunPhase = "TimedOut"
	RunFailed    RunPhase = "Failed"
)

// Terminal is true for the phases a Run never leaves.
func (p RunPhase) Terminal() bool {
	return p == RunCompleted || p == RunTimedOut || p == RunFailed
}

// Condition types of a Run.
const (
	// RunCompletedCondition is true when the Run has ended, whatever the
	// outcome; its reason says how.
	RunCompletedCondition = "Completed"
	// RunSandboxReadyCondition is false while the Run waits for its sandbox.
	RunSandboxReadyCondition = "SandboxReady"
)

// Condition reasons of a Run.
const (
	// ExitedReason: the command ran to its end; ok and exitCode tell how.
	ExitedReason = "Exited"
	// TimedOutReason: the command was killed at its deadline with every
	// process it started.
	TimedOutReason = "TimedOut"
	// RunningReason: the command is executing.
	RunningReason = "Running"
	// SandboxNotReadyReason: the sandbox does not exist yet or is not Ready.
	SandboxNotReadyReason = "SandboxNotReady"
	// SandboxDeletedReason: the sandbox was deleted before the Run could end.
	SandboxDeletedReason = "SandboxDeleted"
	// TicketFinishedReason: the ticket of the Run's sandbox finished (or was
	// deleted) before the Run could execute.
	TicketFinishedReason = "TicketFinished"
	// ExecFailedReason: the command could not be started (no such binary,
	// no such working directory).
	ExecFailedReason = "ExecFailed"
	// GitNotFoundReason: a MergeAndCI Run found no git in the sandbox image.
	GitNotFoundReason = "GitNotFound"
	// RepositoryNotFoundReason: a MergeAndCI Run found no git repository at
	// /workspace/repo.
	RepositoryNotFoundReason = "RepositoryNotFound"
	// RefNotFoundReason: the baseRef of a MergeAndCI Run, or the branch of
	// one of its lanes, does not exist in the repository.
	RefNotFoundReason = "RefNotFound"
	// GitFailedReason: a git step of a MergeAndCI Run failed for another
	// reason than a merge conflict; the message quotes git.
	GitFailedReason = "GitFailed"
	// SnapshotFailedReason: a Snapshot Run could not copy the workspace.
	SnapshotFailedReason = "SnapshotFailed"
	// RunLimitReachedReason: the sandbox already runs as many Runs as the
	// controller's --max-runs-per-sandbox allows; the Run waits its turn.
	RunLimitReachedReason = "RunLimitReached"
	// AttemptsExhaustedReason: every attempt the Run's maxAttempts allows was cut
	// short (by restarts of the controller or losses of the sandbox).
	AttemptsExhaustedReason = "AttemptsExhausted"
	// ReportInvalidReason: the report of a MergeAndCI Run's git step could
	// not be trusted: it went past its bounds, named a lane that is not one
	// of the Run's (or one twice), said something the step never says, or
	// did not match the repository once git had exited. Something in the
	// sandbox wrote to it, or changed the repository under the step; the
	// message says what was wrong.
	ReportInvalidReason = "ReportInvalid"
	// ResultRefusedReason: the command exited (ok and exitCode tell how),
	// but the JSON object it printed last as its result was refused: it
	// nests deeper than 64 levels, holds a number no float64 can hold, or
	// comes to more than 64 KiB re-encoded. status.result is empty (an
	// earlier object does not stand in for it); the message says why.
	ResultRefusedReason = "ResultRefused"
)

// RunBuiltin is an operation the controller performs for a Run instead of a
// command of the user's.
// +kubebuilder:validation:Enum=MergeAndCI;Snapshot
type RunBuiltin string

// The builtins.
const (
	// BuiltinMergeAndCI commits each lane's worktree, merges the lanes into
	// the integration branch in order, and runs ciScript there.
	BuiltinMergeAndCI RunBuiltin = "MergeAndCI"
	// BuiltinSnapshot copies the workspace into a new snapshot volume.
	BuiltinSnapshot RunBuiltin = "Snapshot"
)

// The layout of a MergeAndCI workspace: the repository, and one worktree per
// branch (lane or integration) under LanesDir.
const (
	// RepoDir is the git repository a MergeAndCI Run works on.
	RepoDir = "/workspace/repo"
	// LanesDir holds the worktree of branch B at LanesDir/B.
	LanesDir = "/workspace/lanes"
	// DefaultIntegrationBranch is integrationBranch when unset.
	DefaultIntegrationBranch = "integration"
)

// GitRefName is a git branch name or commit: letters, digits, "_", "-", "."
// and "/" separated components, none starting with "." or "-", none ending
// with "." or ".lock", and no "..". Checked again by the controller.
// +kubebuilder:validation:MinLength=1
// +kubebuilder:validation:MaxLength=200
// +kubebuilder:validation:Pattern=`^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_-])?(/[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_-])?)*$`
// +kubebuilder:validation:XValidation:rule="!self.contains('..') && !self.endsWith('.lock') && !self.contains('.lock/')",message="a git ref name contains no '..' and no component ends with '.lock'"
type GitRefName string

// RunOutputLimit is how much of the output status.output keeps: the last
// 32 KiB.
const RunOutputLimit = 32 << 10

// SandboxReference names a Sandbox in the Run's namespace.
type SandboxReference struct {
	// name of the Sandbox.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// RunSpec is one command, or one builtin operation, to execute in a
// sandbox. It cannot be changed once created.
// +kubebuilder:validation:XValidation:rule="[has(self.command), has(self.script), has(self.builtin)].filter(x, x).size() == 1",message="set exactly one of command, script and builtin"
// +kubebuilder:validation:XValidation:rule="!has(self.builtin) || self.builtin != 'MergeAndCI' || (has(self.lanes) && has(self.baseRef) && has(self.ciScript))",message="builtin MergeAndCI needs lanes, baseRef and ciScript"
// +kubebuilder:validation:XValidation:rule="(has(self.builtin) && self.builtin == 'MergeAndCI') || !(has(self.lanes) || has(self.baseRef) || has(self.ciScript) || has(self.integrationBranch))",message="lanes, integrationBranch, baseRef and ciScript are only for builtin MergeAndCI"
// +kubebuilder:validation:XValidation:rule="!has(self.lanes) || !self.lanes.exists(l, l == (has(self.integrationBranch) ? self.integrationBranch : 'integration'))",message="integrationBranch must not be one of the lanes"
type RunSpec struct {
	// sandboxRef names the Sandbox to run in. The Run waits (Pending) while
	// the sandbox does not exist or is not Ready; a suspended sandbox is
	// resumed for it.
	SandboxRef SandboxReference `json:"sandboxRef"`

	// ttlSecondsAfterFinished deletes the Run that long after it ended
	// (status.completionTime); unset: the controller's --finished-ttl (0
	// there keeps it). 0 here deletes it as soon as it ended.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=31622400
	// +optional
	TTLSecondsAfterFinished *int32 `json:"ttlSecondsAfterFinished,omitempty"`

	// command is executed as is (exec form, no shell).
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1024
	// +optional
	Command []string `json:"command,omitempty"`

	// script is run with /bin/sh -c.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=262144
	// +optional
	Script string `json:"script,omitempty"`

	// builtin is an operation the controller performs instead of a command:
	//
	// MergeAndCI works on the git repository /workspace/repo, whose branch B
	// is checked out as a worktree at /workspace/lanes/B. As the sandbox's
	// user, in the sandbox: it commits each lane's worktree when it has
	// changes, creates or resets integrationBranch (worktree
	// /workspace/lanes/<integrationBranch>) at baseRef, and merges the lanes
	// in order with --no-ff; on a conflict it records the files, aborts that
	// merge and stops. When all merged it runs ciScript in the integration
	// worktree. status.result then holds merged, conflicts, ci_passed and
	// ci_output; a conflict or a failing ciScript is an outcome (Completed,
	// ok false). Executed again after a crash, it gives the same result.
	//
	// Snapshot copies the workspace into a new volume afe-<key>-snap-<n>,
	// named in status.result.snapshot and the Sandbox's status.snapshots;
	// a Sandbox can start from it with workspace.fromSnapshot.
	// +optional
	Builtin RunBuiltin `json:"builtin,omitempty"`

	// lanes (MergeAndCI) are the branches to merge, in order. Each lane's
	// worktree, /workspace/lanes/<lane>, is committed first when it has
	// changes; a lane without a worktree is merged as its branch stands.
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +listType=set
	// +optional
	Lanes []GitRefName `json:"lanes,omitempty"`

	// integrationBranch (MergeAndCI) is the branch the lanes are merged
	// into, reset to baseRef first; its worktree is
	// /workspace/lanes/<integrationBranch>. Default: integration.
	// +optional
	IntegrationBranch GitRefName `json:"integrationBranch,omitempty"`

	// baseRef (MergeAndCI) is the branch or commit the integration branch
	// starts from.
	// +optional
	BaseRef GitRefName `json:"baseRef,omitempty"`

	// ciScript (MergeAndCI) is run with /bin/sh -c in the integration
	// worktree once every lane merged, within what is left of the Run's
	// timeout; exit 0 is ci_passed.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=262144
	// +optional
	CIScript string `json:"ciScript,omitempty"`

	// timeoutSeconds is the deadline of the command; at the deadline it and
	// every process it started are killed. Default: the sandbox's
	// timeoutSeconds.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=86400
	// +optional
	TimeoutSeconds *int32 `json:"timeoutSeconds,omitempty"`

	// workingDir is where the command starts (builtins ignore it).
	// +kubebuilder:default="/workspace"
	// +kubebuilder:validation:MaxLength=4096
	// +kubebuilder:validation:Pattern=`^/[^\x00\n]*$`
	// +optional
	WorkingDir string `json:"workingDir,omitempty"`
	// maxAttempts bounds how often the Run is started: an attempt cut
	// short by a restart of the controller or a loss of the sandbox is
	// executed again, up to this many attempts in all; past it the Run ends
	// Failed with reason AttemptsExhausted.
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	// +optional
	MaxAttempts *int32 `json:"maxAttempts,omitempty"`
}

// DefaultRunMaxAttempts is spec.maxAttempts when unset.
const DefaultRunMaxAttempts = 3

// MaxAttemptsOrDefault is spec.maxAttempts, or its default.
func (s *RunSpec) MaxAttemptsOrDefault() int32 {
	if s.MaxAttempts == nil || *s.MaxAttempts < 1 {
		return DefaultRunMaxAttempts
	}
	return *s.MaxAttempts
}

// RunStatus is the outcome of a Run.
type RunStatus struct {
	// phase: Pending, Running, Completed (the command ended, whatever its
	// exit code), TimedOut, Failed (it could not be executed at all).
	// +optional
	Phase RunPhase `json:"phase,omitempty"`
	// ok is true when the command exited with 0. Present, true or false,
	// once the Run has ended; absent before.
	// +optional
	OK *bool `json:"ok,omitempty"`
	// exitCode of the command (137 when killed). MergeAndCI: ciScript's
	// exit code, 1 on a conflict. Snapshot: 0. Present once the Run has
	// ended: -1 when it Failed without the command ever exiting.
	// +optional
	ExitCode *int32 `json:"exitCode,omitempty"`
	// timedOut is true when the deadline killed the command. Present, true
	// or false, once the Run has ended.
	// +optional
	TimedOut *bool `json:"timedOut,omitempty"`
	// output is stdout and stderr, interleaved as written: the last 32 KiB.
	// +optional
	Output string `json:"output,omitempty"`
	// outputTruncated is true when output lost its beginning. Present, true
	// or false, once the Run has ended.
	// +optional
	OutputTruncated *bool `json:"outputTruncated,omitempty"`
	// result holds the keys of the last stdout line that parses as a JSON
	// object, decoded and re-encoded: at most 64 levels deep and 64 KiB in
	// all, or refused (empty, and the Completed condition's reason is
	// ResultRefused). For builtin MergeAndCI: merged (bool), conflicts (a list of
	// {lane, files}), ci_passed (bool), ci_output (its last 4 KiB),
	// ci_exit_code, base_commit, integration_branch, integration_commit, and
	// lanes (a list of {lane, commit} merged). For builtin Snapshot:
	// snapshot (the volume's name).
	// +optional
	Result map[string]apiextensionsv1.JSON `json:"result,omitempty"`
	// attempts counts executions: a Run in flight when the controller died,
	// or whose sandbox was lost, is executed again.
	// +optional
	Attempts int32 `json:"attempts,omitempty"`
	// startTime is when the last attempt started.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// completionTime is when the Run ended.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// durationMilliseconds is how long the last attempt took.
	// +optional
	DurationMilliseconds int64 `json:"durationMilliseconds,omitempty"`
	// containerID is the sandbox container the last attempt ran in.
	// +optional
	ContainerID string `json:"containerID,omitempty"`
	// conditions: Completed, SandboxReady.
	// +listType=map
	// +listMapKey=type
	// +optional
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Run is one command executed in a sandbox. A non-zero exit is an outcome
// (phase Completed, ok false), not a failure.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=afe
// +kubebuilder:printcolumn:name="Sandbox",type=string,JSONPath=`.spec.sandboxRef.name`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Exit",type=integer,JSONPath=`.status.exitCode`
// +kubebuilder:printcolumn:name="Duration",type=string,JSONPath=`.status.durationMilliseconds`,description="milliseconds"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Run struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is immutable.
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="spec is immutable"
	Spec RunSpec `json:"spec"`
	// status is the Run's outcome.
	// +optional
	Status RunStatus `json:"status,omitempty"`
}

// RunList is a list of Runs.
// +kubebuilder:object:root=true
type RunList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Run `json:"items"`
}

func init() {
	register(&Run{}, &RunList{})
}

// Succeeded is true when the Run ended with ok true.
func (s *RunStatus) Succeeded() bool { return s.OK != nil && *s.OK }

// MergeAndCIResult is the status.result of a builtin MergeAndCI Run, as
// clients decode it (afe.dev/sandbox/client's MergeReport).
// +kubebuilder:object:generate=false
type MergeAndCIResult struct {
	// Merged is true when every lane merged.
	Merged bool `json:"merged"`
	// Conflicts are the lane whose merge conflicted and its files.
	Conflicts []MergeConflict `json:"conflicts"`
	// CIPassed is true when ciScript exited 0.
	CIPassed bool `json:"ci_passed"`
	// CIOutput is the last 4 KiB of ciScript's output.
	CIOutput string `json:"ci_output"`
	// CIExitCode is ciScript's exit code, when it ran.
	CIExitCode        *int         `json:"ci_exit_code,omitempty"`
	BaseCommit        string       `json:"base_commit,omitempty"`
	IntegrationBranch string       `json:"integration_branch"`
	IntegrationCommit string       `json:"integration_commit,omitempty"`
	Lanes             []MergedLane `json:"lanes"`
}

// MergeConflict is the lane whose merge conflicted, and the conflicting
// files.
// +kubebuilder:object:generate=false
type MergeConflict struct {
	Lane  string   `json:"lane"`
	Files []string `json:"files"`
	// FilesTruncated is true when more files conflicted than are listed.
	FilesTruncated bool `json:"files_truncated,omitempty"`
}

// MergedLane is a lane merged, at the commit it was merged at.
// +kubebuilder:object:generate=false
type MergedLane struct {
	Lane   string `json:"lane"`
	Commit string `json:"commit"`
}
