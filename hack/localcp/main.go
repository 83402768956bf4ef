// Command localcp starts a local control plane (etcd and kube-apiserver, kept
// under --dir across restarts), installs the CRDs, writes --dir/kubeconfig,
// and then runs the command after "--" with KUBECONFIG pointing at it, until
// the command ends or SIGINT/SIGTERM arrives; without a command it runs until
// a signal. `make run` uses it.
//
// With --nodes N it also runs kube-scheduler, registers the Nodes node-1 to
// node-N (no kubelet backs them), and runs the command once per node, as the
// per-node mode runs one manager per node: see nodeArgs for how each gets
// its arguments.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"afe.dev/sandbox/hack/controlplane"
	"afe.dev/sandbox/internal/nosuidroot"
)

func main() {
	dir := flag.String("dir", "bin/local", "Where the control plane keeps its state and kubeconfig.")
	crds := flag.String("crds", "config/crd/bases", "The CRD folder to install.")
	assets := flag.String("assets", os.Getenv("KUBEBUILDER_ASSETS"), "The folder of the kube-apiserver, etcd and kube-scheduler binaries.")
	manifests := flag.String("manifests", "", "YAML files (comma-separated) whose objects are created, or updated, once the control plane runs; make run gives config/rbac/access_roles.yaml, the ClusterRoles an admin binds for a team.")
	workspaceRoot := flag.String("workspace-root", "", "A folder (made when missing) mounted on itself nosuid,nodev while the command runs, as the manager asks of its --workspace-root; unmounted at the end. Needs root.")
	nodes := flag.Int("nodes", 0, "Run kube-scheduler, register the Nodes node-1..node-N, and run the command once per node with --per-node --instance=node-i appended, {node} in its arguments replaced by the node's name, and an argument {node-i}ARG given as ARG to node-i only. 0 runs the command once, as it is.")
	flag.Parse()
	os.Exit(run(*dir, *crds, *assets, *nodes, splitList(*manifests), *workspaceRoot, flag.Args()))
}

func run(dir, crds, assets string, nodes int, manifests []string, workspaceRoot string, command []string) int {
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)

	if workspaceRoot != "" {
		// Without it Volume workspaces still work: the manager refuses
		// Folder workspaces, saying how to mount the root.
		unmount, err := mountWorkspaceRoot(workspaceRoot)
		if err != nil {
			fmt.Fprintln(os.Stderr, "localcp: Folder workspaces will be refused:", err)
			unmount = func() error { return nil }
		}
		defer func() {
			if err := unmount(); err != nil {
				fmt.Fprintln(os.Stderr, "localcp:", err)
			}
		}()
	}
	cp, err := controlplane.Start(dir, assets, crds)
	if err != nil {
		fmt.Fprintln(os.Stderr, "localcp:", err)
		return 1
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "localcp: stop:", err)
		}
	}()
	if err := cp.ApplyManifests(context.Background(), manifests...); err != nil {
		fmt.Fprintln(os.Stderr, "localcp:", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "localcp: control plane at %s; kubeconfig %s\n", cp.Config.Host, cp.Kubeconfig)
	names := nodeNames(nodes)
	if nodes > 0 {
		if err := startNodes(context.Background(), cp, assets, names); err != nil {
			fmt.Fprintln(os.Stderr, "localcp:", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "localcp: kube-scheduler started (log %s/kube-scheduler.log); nodes %v\n", dir, names)
	}

	if len(command) == 0 {
		<-signals
		return 0
	}
	env := append(os.Environ(), "KUBECONFIG="+cp.Kubeconfig)
	if nodes == 0 {
		cmd := exec.Command(command[0], command[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		cmd.Env = env
		return supervise([]*exec.Cmd{cmd}, signals)
	}
	return supervise(nodeCommands(command, names, env), signals)
}

// splitList splits a comma-separated flag; "" is none.
func splitList(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// mountWorkspaceRoot makes dir and mounts it on itself nosuid,nodev (a
// mount left by a run that crashed is used as it is).
func mountWorkspaceRoot(dir string) (func() error, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	unmount, err := nosuidroot.Mount(dir)
	if err != nil {
		return nil, fmt.Errorf("workspace root %s: %w (mounting it nosuid,nodev needs root)", dir, err)
	}
	fmt.Fprintf(os.Stderr, "localcp: workspace root %s is mounted nosuid,nodev\n", dir)
	return unmount, nil
}
