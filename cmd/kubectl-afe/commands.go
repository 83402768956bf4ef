package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/client"
)

// newRunCommand is kubectl afe run SANDBOX [--timeout DURATION] [--workdir
// DIR] (-- COMMAND [ARG...] | --script SCRIPT).
func newRunCommand(newClient clientFunc, streams genericiooptions.IOStreams) *cobra.Command {
	var timeout runTimeout
	var workdir, script string
	cmd := &cobra.Command{
		Use:               "run SANDBOX [--timeout DURATION] [--workdir DIR] (-- COMMAND [ARG...] | --script SCRIPT)",
		Short:             "Run a command in the sandbox as a Run; exit with its exit code (124: timed out, 125: not executed)",
		ValidArgsFunction: completeFirst(newClient, "Sandbox"),
		RunE: func(cmd *cobra.Command, args []string) error {
			sandbox, command, err := sandboxAndCommand(cmd, args)
			if err != nil {
				return err
			}
			if (len(command) == 0) == (script == "") {
				return fmt.Errorf("give a command after -- or a --script, not both")
			}
			run := client.Cmd(command...)
			if script != "" {
				run = client.Script(script)
			}
			if workdir != "" {
				run = run.WorkingDir(workdir)
			}
			if timeout > 0 {
				run = run.Timeout(time.Duration(timeout))
			}
			return withClient(newClient, func(c *client.Client) error {
				return runCommand(c, sandbox, run, streams.Out, streams.ErrOut)
			})
		},
	}
	cmd.Flags().Var(&timeout, "timeout", runTimeoutHelp)
	cmd.Flags().StringVar(&workdir, "workdir", "", "Working directory (default /workspace).")
	cmd.Flags().StringVar(&script, "script", "", "A shell script to run with /bin/sh -c instead of a command.")
	return cmd
}

// runTimeoutHelp is the help of run's --timeout.
const runTimeoutHelp = `How long the command may run before it and every process it started are killed (exit 124): a duration as kubectl's (30s, 5m, 1h30m), at most 24h, rounded up to whole seconds; a bare number is seconds (90 is 90s). 0, the default: the sandbox's spec.timeoutSeconds.`

// maxRunTimeout is the longest timeout a Run takes (its timeoutSeconds).
const maxRunTimeout = 24 * time.Hour

// runTimeout is run's --timeout: a duration, 0 for the sandbox's.
type runTimeout time.Duration

// String is the value, "0" for the sandbox's (help shows no default then).
func (t *runTimeout) String() string {
	if *t == 0 {
		return "0"
	}
	return time.Duration(*t).String()
}

// Type is the flag's type, as help shows it.
func (t *runTimeout) Type() string { return "duration" }

// Set parses the flag's value (parseRunTimeout).
func (t *runTimeout) Set(s string) error {
	d, err := parseRunTimeout(s)
	if err != nil {
		return err
	}
	*t = runTimeout(d)
	return nil
}

// parseRunTimeout is a duration as kubectl's flags take it (time's: 30s,
// 5m, 1h30m, 0), or a bare number of seconds, as this flag took before it
// was a duration (kubectl would refuse one other than 0). It is at most a
// Run's longest timeout and never negative (kubectl wait's "a week" for a
// negative timeout means nothing for a Run).
func parseRunTimeout(s string) (time.Duration, error) {
	var d time.Duration
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		// Bounded first: a large number of seconds overflows a Duration.
		d = time.Duration(min(max(n, -1), int64(maxRunTimeout/time.Second)+1)) * time.Second
	} else if d, err = time.ParseDuration(s); err != nil {
		return 0, errors.New("not a duration such as 30s, 5m or 1h30m, nor a number of seconds")
	}
	switch {
	case d < 0:
		return 0, errors.New("a timeout is not negative (0: the sandbox's)")
	case d > maxRunTimeout:
		return 0, errors.New("at most 24h, a Run's longest timeout")
	}
	return d, nil
}

// runCommand creates the Run (client.Run), waits for its end and mirrors
// its outcome.
func runCommand(c *client.Client, sandbox string, run client.Command, stdout, stderr io.Writer) error {
	run = run.OnCreate(func(name string) { _, _ = fmt.Fprintf(stderr, "run/%s created\n", name) })
	o, err := c.Run(context.Background(), sandbox, run)
	if o == nil {
		return err
	}
	printOutput(o, stdout, stderr)
	return runExit(o, err, stderr)
}

// runExit is the plugin's end for an ended Run: its exit code, 124 when it
// timed out, 125 when it could not be executed.
func runExit(o *client.Outcome, err error, stderr io.Writer) error {
	switch o.Phase {
	case afev1.RunTimedOut:
		_, _ = fmt.Fprintf(stderr, "run/%s timed out and was killed\n", o.Run)
		return exitError{124}
	case afev1.RunFailed:
		_, _ = fmt.Fprintf(stderr, "run/%s failed: %s\n", o.Run, o.Message)
		return exitError{125}
	}
	if err != nil {
		return err
	}
	if o.ExitCode != 0 {
		return exitError{exitCodeOf(o.ExitCode)}
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

func printOutput(o *client.Outcome, stdout, stderr io.Writer) {
	if o.OutputTruncated {
		_, _ = fmt.Fprintf(stderr, "(output truncated: the last %d bytes follow)\n", len(o.Output))
	}
	_, _ = fmt.Fprint(stdout, o.Output)
}
