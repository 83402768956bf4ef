package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"afe.dev/sandbox/hack/controlplane"
)

// nodeNames are the names of the n nodes: node-1 to node-n.
func nodeNames(n int) []string {
	names := make([]string, n)
	for i := range names {
		names[i] = "node-" + strconv.Itoa(i+1)
	}
	return names
}

// startNodes starts kube-scheduler and registers the nodes, each with the
// host's CPUs and memory: they all share this machine, as the managers do.
// A node of an earlier run that is not among them is marked not ready (its
// manager is gone), so nothing is placed there any more.
func startNodes(ctx context.Context, cp *controlplane.ControlPlane, assets string, names []string) error {
	if err := cp.StartScheduler(assets); err != nil {
		return err
	}
	capacity, err := hostCapacity()
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := controlplane.RegisterNode(ctx, cp.Config, name, capacity, nil); err != nil {
			return err
		}
	}
	return retireOtherNodes(ctx, cp, names)
}

func retireOtherNodes(ctx context.Context, cp *controlplane.ControlPlane, keep []string) error {
	cs, err := kubernetes.NewForConfig(cp.Config)
	if err != nil {
		return err
	}
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	for _, n := range list.Items {
		if slices.Contains(keep, n.Name) {
			continue
		}
		fmt.Fprintf(os.Stderr, "localcp: node %s of an earlier run marked not ready\n", n.Name)
		if err := controlplane.SetNodeReady(ctx, cp.Config, n.Name, false); err != nil {
			return err
		}
	}
	return nil
}

// hostCapacity is this machine's CPUs and memory, and the kubelet's default
// of 110 pods.
func hostCapacity() (corev1.ResourceList, error) {
	meminfo, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return nil, fmt.Errorf("the host's memory: %w", err)
	}
	memory, err := memTotal(string(meminfo))
	if err != nil {
		return nil, fmt.Errorf("/proc/meminfo: %w", err)
	}
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(int64(runtime.NumCPU()), resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(memory, resource.BinarySI),
		corev1.ResourcePods:   resource.MustParse("110"),
	}, nil
}

// memTotal reads the bytes of MemTotal from text in the format of
// /proc/meminfo.
func memTotal(meminfo string) (int64, error) {
	for line := range strings.Lines(meminfo) {
		fields := strings.Fields(line)
		if len(fields) == 3 && fields[0] == "MemTotal:" && fields[2] == "kB" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("MemTotal: %w", err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("no MemTotal in kB")
}

// nodeCommands are the command once per node, each with its nodeArgs and
// env, its output lines prefixed with the node's name. Each runs in a
// process group of its own: a Ctrl-C at the terminal reaches localcp only,
// which passes it on once (a controller-runtime manager exits at once, not
// gracefully, on a second signal).
func nodeCommands(command, names, env []string) []*exec.Cmd {
	var cmds []*exec.Cmd
	for _, name := range names {
		args := nodeArgs(command, name)
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Stdout = newPrefixWriter(os.Stdout, name)
		cmd.Stderr = newPrefixWriter(os.Stderr, name)
		cmd.Env = env
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		// A child the command leaves behind with its output open does not
		// keep localcp waiting.
		cmd.WaitDelay = 5 * time.Second
		cmds = append(cmds, cmd)
	}
	return cmds
}

// nodeArgs is the command for the node name: {node} anywhere is replaced by
// name, an argument "{node-i}ARG" is kept (as ARG) only for node-i, so one
// manager alone can register the access API, and --per-node
// --instance=<name> come last.
func nodeArgs(command []string, name string) []string {
	var out []string
	for _, arg := range command {
		if rest, ok := strings.CutPrefix(arg, "{"); ok {
			if only, value, ok := strings.Cut(rest, "}"); ok && only != "node" && strings.HasPrefix(only, "node-") {
				if only != name {
					continue
				}
				arg = value
			}
		}
		out = append(out, strings.ReplaceAll(arg, "{node}", name))
	}
	return append(out, "--per-node", "--instance="+name)
}
