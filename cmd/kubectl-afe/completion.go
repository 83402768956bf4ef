package main

import (
	"context"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"

	afev1 "afe.dev/sandbox/api/v1alpha1"
)

// Shell completion of the names a command takes, as kubectl completes
// pod names: the objects of the namespace (-n, or the kubeconfig's) whose
// names start with what is typed, listed with the caller's identity. A
// kubeconfig that does not work, or a list that is refused, completes
// nothing. kubectl asks a plugin for its completions through an executable
// kubectl_complete-afe on the PATH (make kubectl-afe writes one beside
// the plugin), which runs `kubectl-afe __complete ARG...`.

// completionTimeout bounds the list a completion makes.
const completionTimeout = 5 * time.Second

// completeFirst completes a command's first argument with the names of
// the objects of this kind (Sandbox, Run), and nothing after it: not the
// command after "--" either, which runs in the sandbox. (Whether "--" was
// typed is not asked: cobra parses the arguments of a completion with a
// "--" of its own first, which pflag's ArgsLenAtDash keeps.)
func completeFirst(newClient clientFunc, kind string) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		return objectNames(newClient, kind, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeNames completes a flag's value (telemetry's --ticket) with the
// names of the objects of this kind.
func completeNames(newClient clientFunc, kind string) cobra.CompletionFunc {
	return func(_ *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		return objectNames(newClient, kind, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
}

// completeCp completes cp's LOCAL SANDBOX:/workspace/PATH, or
// SANDBOX:/workspace/PATH LOCAL, as kubectl cp does: a first argument is
// a sandbox's name followed by ":" or a local path, the other one the
// other kind. Paths in the sandbox are not completed.
func completeCp(newClient clientFunc) cobra.CompletionFunc {
	return func(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		switch {
		case len(args) >= 2:
			return nil, cobra.ShellCompDirectiveNoFileComp
		case len(args) == 1 && isRemote(args[0]), strings.Contains(toComplete, ":"), strings.IndexAny(toComplete, "/.~") == 0:
			// A local path (the shell's completion), or one in the sandbox.
			return nil, cobra.ShellCompDirectiveDefault
		}
		var comps []string
		for _, name := range objectNames(newClient, "Sandbox", toComplete) {
			comps = append(comps, name+":")
		}
		if len(args) == 1 {
			return comps, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
		}
		if len(comps) == 0 {
			return nil, cobra.ShellCompDirectiveDefault
		}
		return append(comps, localPaths(toComplete)...), cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
	}
}

// isRemote is whether a cp argument names a path in a sandbox.
func isRemote(arg string) bool {
	_, _, ok := remoteArg(arg)
	return ok
}

// localPaths are what the current folder holds that starts with prefix
// (a folder with a "/" after it), offered beside the sandboxes as kubectl
// cp offers them beside pods; with nothing typed, the hints "./" and "/".
func localPaths(prefix string) []string {
	if prefix == "" {
		return []string{"./", "/"}
	}
	entries, err := os.ReadDir(".")
	if err != nil {
		return nil
	}
	var paths []string
	for _, e := range entries {
		if name := e.Name(); strings.HasPrefix(name, prefix) {
			if e.IsDir() {
				name += "/"
			}
			paths = append(paths, name)
		}
	}
	return paths
}

// objectNames are the names of the objects of this kind of the client's
// namespace that start with prefix, read as metadata only.
func objectNames(newClient clientFunc, kind, prefix string) []string {
	c, err := newClient()
	if err != nil {
		cobra.CompDebugln("kubectl-afe: "+err.Error(), true)
		return nil
	}
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(afev1.GroupVersion.WithKind(kind + "List"))
	ctx, cancel := context.WithTimeout(context.Background(), completionTimeout)
	defer cancel()
	if err := c.Kube().List(ctx, list, ctrlclient.InNamespace(c.Namespace())); err != nil {
		cobra.CompDebugln("kubectl-afe: list "+kind+": "+err.Error(), true)
		return nil
	}
	var names []string
	for _, o := range list.Items {
		if strings.HasPrefix(o.Name, prefix) {
			names = append(names, o.Name)
		}
	}
	return names
}
