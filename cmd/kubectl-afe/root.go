package main

import (
	"fmt"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"afe.dev/sandbox/client"
)

// newRoot is the plugin's command: kubectl's connection flags
// (genericclioptions), and one subcommand per operation, each parsing its
// flags anywhere before "--" and leaving what follows to the command run
// in the sandbox. The client is made when a subcommand runs: help and
// completion need no kubeconfig.
func newRoot(streams genericiooptions.IOStreams) *cobra.Command {
	flags := genericclioptions.NewConfigFlags(true)
	root := &cobra.Command{
		Use:           "kubectl-afe",
		Short:         "Work in the sandboxes of the afe sandbox controller, through its access API",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	// Help goes to stdout, notes to stderr: cobra writes those to its
	// "out" when one is set, so none is.
	root.SetErr(streams.ErrOut)
	flags.AddFlags(root.PersistentFlags())
	newClient := func() (*client.Client, error) {
		cfg, err := flags.ToRESTConfig()
		if err != nil {
			return nil, err
		}
		ns, _, err := flags.ToRawKubeConfigLoader().Namespace()
		if err != nil {
			return nil, err
		}
		return client.New(cfg, client.WithNamespace(ns))
	}
	root.AddCommand(newRunCommand(newClient, streams), newLogsCommand(newClient, streams),
		newExecCommand(newClient, streams), newShellCommand(newClient, streams), newCpCommand(newClient),
		newTelemetryCommand(newClient, streams), newSuspendCommand(newClient, streams, true),
		newSuspendCommand(newClient, streams, false), newTopCommand(newClient, streams))
	return root
}

// clientFunc makes the client of a subcommand.
type clientFunc func() (*client.Client, error)

// splitDash splits a subcommand's arguments at "--": its own, and the
// command to run in the sandbox.
func splitDash(cmd *cobra.Command, args []string) (own, command []string) {
	if n := cmd.ArgsLenAtDash(); n >= 0 {
		return args[:n], args[n:]
	}
	return args, nil
}

// sandboxAndCommand is the one SANDBOX before "--" and the command after
// it.
func sandboxAndCommand(cmd *cobra.Command, args []string) (string, []string, error) {
	own, command := splitDash(cmd, args)
	if len(own) != 1 {
		return "", nil, fmt.Errorf("%s needs exactly one SANDBOX before --", cmd.Name())
	}
	return own[0], command, nil
}

// withClient runs f with a client made for the command.
func withClient(newClient clientFunc, f func(c *client.Client) error) error {
	c, err := newClient()
	if err != nil {
		return err
	}
	return f(c)
}
