package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/client"
)

// newRunCommand is kubectl afe run SANDBOX [--timeout S] [--workdir DIR]
// (-- COMMAND [ARG...] | --script SCRIPT).
func newRunCommand(newClient clientFunc, streams genericiooptions.IOStreams) *cobra.Command {
	var timeout int
	var workdir, script string
	cmd := &cobra.Command{
		Use:   "run SANDBOX [--timeout SECONDS] [--workdir DIR] (-- COMMAND [ARG...] | --script SCRIPT)",
		Short: "Run a command in the sandbox as a Run; exit with its exit code (124: timed out, 125: not executed)",
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
				run = run.Timeout(time.Duration(timeout) * time.Second)
			}
			return withClient(newClient, func(c *client.Client) error {
				return runCommand(c, sandbox, run, streams.Out, streams.ErrOut)
			})
		},
	}
	cmd.Flags().IntVar(&timeout, "timeout", 0, "Timeout in seconds (default: the sandbox's).")
	cmd.Flags().StringVar(&workdir, "workdir", "", "Working directory (default /workspace).")
	cmd.Flags().StringVar(&script, "script", "", "A shell script to run with /bin/sh -c instead of a command.")
	return cmd
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
