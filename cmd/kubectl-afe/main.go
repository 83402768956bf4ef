// Command kubectl-afe is the kubectl plugin of the afe sandbox controller:
//
//	kubectl afe run SANDBOX [--timeout S] [--workdir DIR] -- CMD [ARG...]
//	kubectl afe run SANDBOX --script 'make test'
//	kubectl afe logs [-f] RUN
//	kubectl afe shell SANDBOX [-- CMD [ARG...]]
//	kubectl afe exec SANDBOX [-i] [-t] -- CMD [ARG...]
//	kubectl afe cp LOCAL SANDBOX:/workspace/PATH  (and back)
//	kubectl afe suspend SANDBOX
//	kubectl afe resume SANDBOX
//
// shell, exec and cp go through the manager's access API (an aggregated API of
// the Kubernetes API server) with the caller's Kubernetes identity: they
// need no Docker CLI and no access to the engine.
//
// run creates a Run, waits for it, prints its output and exits with its exit
// code (124 when it timed out, 125 when it could not be executed). It
// honours --kubeconfig, --context and -n/--namespace like kubectl. Output
// written to a terminal has its control characters escaped; written to a
// pipe or a file it is passed on byte for byte.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

const usage = `Usage:
  kubectl afe run SANDBOX [--timeout SECONDS] [--workdir DIR] -- COMMAND [ARG...]
  kubectl afe run SANDBOX --script 'SHELL SCRIPT'
  kubectl afe logs [-f] RUN
  kubectl afe shell SANDBOX [-- COMMAND [ARG...]]
  kubectl afe exec SANDBOX [-i] [-t] -- COMMAND [ARG...]
  kubectl afe cp LOCAL SANDBOX:/workspace/PATH
  kubectl afe cp SANDBOX:/workspace/PATH LOCAL
  kubectl afe suspend SANDBOX   (stop its container and proxy, keep its workspace)
  kubectl afe resume SANDBOX    (start it again, also after an idle suspension)

Global flags: --kubeconfig FILE, --context NAME, -n/--namespace NAME.
  --instance NAME is accepted and ignored: the manager serving the access
  API reaches only the containers its own instance made.
`

// exitError carries the exit code the plugin ends with.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

// globals are kubectl's connection flags, and the controller's instance.
type globals struct {
	kubeconfig, context, namespace string
	instance                       string
}

func main() {
	stdout, stderr := outputFor(os.Stdout), outputFor(os.Stderr)
	err := run(os.Args[1:], stdout, stderr)
	var exit exitError
	switch {
	case err == nil:
	case errors.As(err, &exit):
		os.Exit(exit.code)
	default:
		_, _ = fmt.Fprintln(stderr, "kubectl-afe:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout, stderr io.Writer) error {
	g, rest, err := parseGlobals(args)
	if err != nil {
		return err
	}
	if len(rest) == 0 {
		_, _ = fmt.Fprint(stderr, usage)
		return exitError{2}
	}
	cfg, ns, err := g.config()
	if err != nil {
		return err
	}
	streams := execStreams{stdin: os.Stdin, stdout: stdout, stderr: stderr, terminal: os.Stdout}
	// exec, shell and cp need only the connection (a process each is the
	// interactive path: it starts with no more than that).
	switch rest[0] {
	case "exec":
		return execCommand(cfg, ns, rest[1:], streams)
	case "cp":
		return cpCommand(cfg, ns, rest[1:], stderr)
	case "shell":
		return shellCommand(cfg, ns, rest[1:], streams)
	}
	c, err := newClient(cfg)
	if err != nil {
		return err
	}
	switch rest[0] {
	case "run":
		return runCommand(c, ns, rest[1:], stdout, stderr)
	case "logs":
		return logsCommand(c, cfg, ns, rest[1:], stdout, stderr)
	case "suspend", "resume":
		return suspendCommand(c, ns, rest[1:], rest[0] == "suspend", stdout)
	case "help", "-h", "--help":
		_, _ = fmt.Fprint(stdout, usage)
		return nil
	default:
		_, _ = fmt.Fprint(stderr, usage)
		return exitError{2}
	}
}

// parseGlobals takes kubectl's connection flags and --instance out of args,
// wherever they are before a "--".
func parseGlobals(args []string) (globals, []string, error) {
	g := globals{instance: "default"}
	var rest []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			rest = append(rest, args[i:]...)
			break
		}
		name, value, hasValue := strings.Cut(a, "=")
		var target *string
		switch name {
		case "--kubeconfig":
			target = &g.kubeconfig
		case "--context":
			target = &g.context
		case "-n", "--namespace":
			target = &g.namespace
		case "--instance":
			target = &g.instance
		default:
			rest = append(rest, a)
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return g, nil, fmt.Errorf("%s needs a value", name)
			}
			i++
			value = args[i]
		}
		*target = value
	}
	if g.instance == "" {
		return g, nil, errors.New("--instance must not be empty")
	}
	return g, rest, nil
}

// config connects like kubectl: --kubeconfig, then KUBECONFIG, then
// ~/.kube/config; the namespace from -n or the context.
func (g globals) config() (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = g.kubeconfig
	overrides := &clientcmd.ConfigOverrides{CurrentContext: g.context}
	cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, "", err
	}
	ns := g.namespace
	if ns == "" {
		if ns, _, err = cc.Namespace(); err != nil {
			return nil, "", err
		}
	}
	return cfg, ns, nil
}

// newClient is a client of the Kubernetes API with the project's types.
func newClient(cfg *rest.Config) (client.WithWatch, error) {
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := afev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	return client.NewWithWatch(cfg, client.Options{Scheme: scheme})
}

func newFlagSet(name string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	return fs
}
