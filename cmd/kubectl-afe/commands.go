package main

import (
	"context"
	"fmt"
	"io"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// waitRun watches the Run until it ends.
func waitRun(ctx context.Context, c client.WithWatch, run *afev1.Run) error {
	for !run.Status.Phase.Terminal() {
		w, err := c.Watch(ctx, &afev1.RunList{}, client.InNamespace(run.Namespace),
			client.MatchingFields{"metadata.name": run.Name},
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: run.ResourceVersion}})
		if err != nil {
			return err
		}
		for ev := range w.ResultChan() {
			if r, ok := ev.Object.(*afev1.Run); ok {
				*run = *r
				if run.Status.Phase.Terminal() {
					break
				}
			}
		}
		w.Stop()
		// The watch ended or the Run did: read it as it is now.
		if err := c.Get(ctx, client.ObjectKeyFromObject(run), run); err != nil {
			return err
		}
	}
	return nil
}

// runCommand creates a Run, waits for its end and mirrors its outcome.
func runCommand(c client.WithWatch, ns string, args []string, stdout, stderr io.Writer) error {
	fs := newFlagSet("run", stderr)
	timeout := fs.Int("timeout", 0, "Timeout in seconds (default: the sandbox's).")
	workdir := fs.String("workdir", "", "Working directory (default /workspace).")
	script := fs.String("script", "", "A shell script to run with /bin/sh -c instead of a command.")
	if len(args) == 0 {
		return fmt.Errorf("run needs a SANDBOX")
	}
	sandbox := args[0]
	if err := fs.Parse(args[1:]); err != nil {
		return exitError{2}
	}
	command := fs.Args()
	if len(command) > 0 && command[0] == "--" {
		command = command[1:]
	}
	if (len(command) == 0) == (*script == "") {
		return fmt.Errorf("give a command after -- or a --script, not both")
	}
	run := &afev1.Run{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: sandbox + "-run-"},
		Spec: afev1.RunSpec{
			SandboxRef: afev1.SandboxReference{Name: sandbox},
			Command:    command,
			Script:     *script,
			WorkingDir: *workdir,
		},
	}
	if *timeout > 0 {
		t := int32(*timeout)
		run.Spec.TimeoutSeconds = &t
	}
	ctx := context.Background()
	if err := c.Create(ctx, run); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(stderr, "run/%s created\n", run.Name)
	if err := waitRun(ctx, c, run); err != nil {
		return err
	}
	printOutput(run, stdout, stderr)
	return runExit(run, stderr)
}

// runExit is the plugin's end for an ended Run: its exit code, 124 when it
// timed out, 125 when it could not be executed.
func runExit(run *afev1.Run, stderr io.Writer) error {
	switch run.Status.Phase {
	case afev1.RunTimedOut:
		_, _ = fmt.Fprintf(stderr, "run/%s timed out and was killed\n", run.Name)
		return exitError{124}
	case afev1.RunFailed:
		if c := meta.FindStatusCondition(run.Status.Conditions, afev1.RunCompletedCondition); c != nil {
			_, _ = fmt.Fprintf(stderr, "run/%s failed: %s\n", run.Name, c.Message)
		}
		return exitError{125}
	}
	if run.Status.ExitCode != nil && *run.Status.ExitCode != 0 {
		return exitError{exitCodeOf(*run.Status.ExitCode)}
	}
	return nil
}

// exitCodeOf is the plugin's exit code for a Run's non-zero exit code. An
// exit status holds 0 to 255 and the rest is cut off (256 would read as
// success), so a code outside 1..255 ends the plugin with 1.
func exitCodeOf(code int32) int {
	if code < 1 || code > 255 {
		return 1
	}
	return int(code)
}

func printOutput(run *afev1.Run, stdout, stderr io.Writer) {
	if ptr.Deref(run.Status.OutputTruncated, false) {
		_, _ = fmt.Fprintf(stderr, "(output truncated: the last %d bytes follow)\n", len(run.Status.Output))
	}
	_, _ = fmt.Fprint(stdout, run.Status.Output)
}
