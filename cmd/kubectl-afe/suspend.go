package main

import (
	"context"
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"afe.dev/sandbox/client"
)

// newSuspendCommand is kubectl afe suspend SANDBOX, or resume SANDBOX.
func newSuspendCommand(newClient clientFunc, streams genericiooptions.IOStreams, suspend bool) *cobra.Command {
	use, short := "resume SANDBOX", "Start a suspended sandbox again (also after an idle suspension)"
	if suspend {
		use, short = "suspend SANDBOX", "Stop a sandbox's container and proxy, keeping its workspace"
	}
	return &cobra.Command{
		Use:               use,
		Short:             short,
		ValidArgsFunction: completeFirst(newClient, "Sandbox"),
		RunE: func(_ *cobra.Command, args []string) error {
			return withClient(newClient, func(c *client.Client) error {
				return suspendCommand(c, args, suspend, streams.Out)
			})
		},
	}
}

// suspendCommand suspends or resumes a sandbox through the Kubernetes API,
// as the caller (it needs patch on sandboxes, nothing of Docker).
func suspendCommand(c *client.Client, args []string, suspend bool, stdout io.Writer) error {
	verb := map[bool]string{true: "suspend", false: "resume"}[suspend]
	if len(args) != 1 {
		return fmt.Errorf("%s needs exactly one SANDBOX", verb)
	}
	ctx := context.Background()
	act := c.Resume
	if suspend {
		act = c.Suspend
	}
	if err := act(ctx, args[0]); err != nil {
		return fmt.Errorf("%s sandbox/%s: %w", verb, args[0], err)
	}
	_, _ = fmt.Fprintf(stdout, "sandbox/%s %sed\n", args[0], map[bool]string{true: "suspend", false: "resum"}[suspend])
	return nil
}
