package main

import (
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"afe.dev/sandbox/client"
)

// newShellCommand opens a shell (or runs a command) in the sandbox through the
// access API, with the caller's Kubernetes identity: as the sandbox's user,
// in /workspace, on a terminal when stdin is one. It needs no Docker CLI
// and no access to the engine: the manager reaches only the container it
// made for that Sandbox, and refuses while the sandbox has none running.
func newShellCommand(newClient clientFunc, streams genericiooptions.IOStreams) *cobra.Command {
	return &cobra.Command{
		Use:               "shell SANDBOX [-- COMMAND [ARG...]]",
		Short:             "Open a shell (or run a command) in the sandbox, on a terminal when stdin is one",
		ValidArgsFunction: completeFirst(newClient, "Sandbox"),
		RunE: func(cmd *cobra.Command, args []string) error {
			sandbox, command, err := sandboxAndCommand(cmd, args)
			if err != nil {
				return err
			}
			if len(command) == 0 {
				command = []string{"/bin/sh"}
			}
			_, tty := terminalOf(streams.In)
			return withClient(newClient, func(c *client.Client) error {
				return streamExec(c, sandbox, command, true, tty, streams)
			})
		},
	}
}
