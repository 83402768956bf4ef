// Command kubectl-afe is the kubectl plugin of the afe sandbox controller:
//
//	kubectl afe run SANDBOX [--timeout DURATION] [--workdir DIR] -- CMD [ARG...]
//	kubectl afe run SANDBOX --script 'make test'
//	kubectl afe logs [-f] RUN
//	kubectl afe shell SANDBOX [-- CMD [ARG...]]
//	kubectl afe exec SANDBOX [-i] [-t] -- CMD [ARG...]
//	kubectl afe cp LOCAL SANDBOX:/workspace/PATH  (and back)
//	kubectl afe telemetry SANDBOX | --ticket TICKET [--egress] [-o wide|json|yaml|jsonpath=...]
//	kubectl afe suspend SANDBOX
//	kubectl afe resume SANDBOX
//	kubectl afe top [--by sandbox|ticket|namespace] [--sort-by cpu|memory|disk|network] [-A] [-l SELECTOR] [-o wide|json|yaml|jsonpath=...]
//
// shell, exec and cp go through the manager's access API (an aggregated API of
// the Kubernetes API server) with the caller's Kubernetes identity: they
// need no Docker CLI and no access to the engine.
//
// run creates a Run, waits for it, prints its output and exits with its exit
// code (124 when it timed out, 125 when it could not be executed). It takes
// kubectl's own flags (k8s.io/cli-runtime: --kubeconfig, --context, -n,
// --as, --as-group, --token, --server, --request-timeout, ...) and every
// flag anywhere before "--", as kubectl does. Output
// written to a terminal has its control characters escaped; written to a
// pipe or a file it is passed on byte for byte.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// exitError carries the exit code the plugin ends with.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func main() {
	stdout, stderr := outputFor(os.Stdout), outputFor(os.Stderr)
	streams := genericiooptions.IOStreams{In: os.Stdin, Out: stdout, ErrOut: stderr}
	root := newRoot(streams)
	root.SetArgs(os.Args[1:])
	err := root.Execute()
	// What an escaper holds back (the start of a character) is written.
	flushOutput(stdout)
	code := exitCode(err, stderr)
	flushOutput(stderr)
	os.Exit(code)
}

// exitCode is the plugin's exit code for what the command returned; an
// error without one of its own is printed, and is 1.
func exitCode(err error, stderr io.Writer) int {
	var exit exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &exit):
		return exit.code
	}
	_, _ = fmt.Fprintln(stderr, "kubectl-afe:", err)
	return 1
}
