package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// Snapshot copies the sandbox's workspace into a new snapshot volume and
// returns its name, for FromSnapshot or Restore.
func (c *Client) Snapshot(ctx context.Context, sandbox string) (string, error) {
	run, err := c.runToEnd(ctx, sandbox, afev1.RunSpec{SandboxRef: afev1.SandboxReference{Name: sandbox}, Builtin: afev1.BuiltinSnapshot}, nil)
	if err != nil {
		return "", err
	}
	o, err := OutcomeOf(run)
	if err != nil {
		return "", err
	}
	name, _ := o.Result["snapshot"].(string)
	if name == "" {
		return "", &Error{Kind: KindFailed, Message: fmt.Sprintf("snapshot run %s named no snapshot", run.Name)}
	}
	return name, nil
}

// Restore creates a Sandbox named name whose workspace starts as a copy of
// the snapshot, and waits until it is Ready.
func (c *Client) Restore(ctx context.Context, name, snapshot string, opts ...SandboxOption) (*afev1.Sandbox, error) {
	return c.CreateSandbox(ctx, name, append(opts, FromSnapshot(snapshot))...)
}

// Suspend stops the sandbox's container and proxy, keeping its workspace.
func (c *Client) Suspend(ctx context.Context, sandbox string) error {
	return c.patchSandbox(ctx, sandbox, SuspendPatch(true, time.Now()))
}

// Resume asks for a suspended sandbox to start again (also one its idle
// timeout suspended); WaitSandboxReady waits for it, and a Run waits
// (Pending) until it is Ready.
func (c *Client) Resume(ctx context.Context, sandbox string) error {
	return c.patchSandbox(ctx, sandbox, SuspendPatch(false, time.Now()))
}

// SuspendPatch is the merge patch of a Sandbox that suspends or resumes
// it: spec.suspend and, for a resume, the annotation that asks the
// controller to resume a sandbox its idle timeout suspended.
func SuspendPatch(suspend bool, now time.Time) map[string]any {
	p := map[string]any{}
	if !suspend {
		p = afev1.ResumeRequestPatch(now)
	}
	p["spec"] = map[string]any{"suspend": suspend}
	return p
}

func (c *Client) patchSandbox(ctx context.Context, sandbox string, patch map[string]any) error {
	data, err := json.Marshal(patch)
	if err != nil {
		return err
	}
	sbx := &afev1.Sandbox{ObjectMeta: metav1.ObjectMeta{Namespace: c.namespace, Name: sandbox}}
	return wrap(c.kube.Patch(ctx, sbx, ctrlclient.RawPatch(types.MergePatchType, data)), "patch sandbox %s", sandbox)
}

// MergeOptions are the lanes, the integration branch, the base and the CI
// script of MergeAndCI.
type MergeOptions struct {
	Lanes             []string
	IntegrationBranch string
	BaseRef           string
	CIScript          string
	Timeout           time.Duration
}

// MergeReport is what MergeAndCI did: the Run's result as the controller
// wrote it (merged, conflicts, ci_passed, ci_output, the commits), and
// whether all of it went well.
type MergeReport struct {
	afev1.MergeAndCIResult
	// OK: every lane merged and the CI passed.
	OK bool
}

// MergeAndCI commits each lane's worktree, merges the lanes in order into
// the integration branch (reset to BaseRef) and runs the CI script there
// (the builtin MergeAndCI Run). A conflict or a failing CI is a report
// with OK false, not an error.
func (c *Client) MergeAndCI(ctx context.Context, sandbox string, m MergeOptions) (*MergeReport, error) {
	spec := afev1.RunSpec{SandboxRef: afev1.SandboxReference{Name: sandbox}, Builtin: afev1.BuiltinMergeAndCI,
		IntegrationBranch: afev1.GitRefName(m.IntegrationBranch), BaseRef: afev1.GitRefName(m.BaseRef), CIScript: m.CIScript}
	for _, l := range m.Lanes {
		spec.Lanes = append(spec.Lanes, afev1.GitRefName(l))
	}
	if m.Timeout > 0 {
		spec.TimeoutSeconds = Script("").Timeout(m.Timeout).spec.TimeoutSeconds
	}
	run, err := c.runToEnd(ctx, sandbox, spec, nil)
	if err != nil {
		return nil, err
	}
	o, err := OutcomeOf(run)
	if err != nil {
		return nil, err
	}
	raw, err := json.Marshal(o.Result)
	if err != nil {
		return nil, err
	}
	r := &MergeReport{}
	if err := json.Unmarshal(raw, &r.MergeAndCIResult); err != nil {
		return nil, fmt.Errorf("merge run %s: its report: %w", run.Name, err)
	}
	r.OK = o.OK
	return r, nil
}
