// Command localcp starts a local control plane (etcd and kube-apiserver, kept
// under --dir across restarts), installs the CRDs, writes --dir/kubeconfig,
// and then runs the command after "--" with KUBECONFIG pointing at it, until
// the command ends or SIGINT/SIGTERM arrives; without a command it runs until
// a signal. `make run` uses it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"

	"afe.dev/sandbox/internal/localcp"
)

func main() {
	dir := flag.String("dir", "bin/local", "Where the control plane keeps its state and kubeconfig.")
	crds := flag.String("crds", "config/crd/bases", "The CRD folder to install.")
	assets := flag.String("assets", os.Getenv("KUBEBUILDER_ASSETS"), "The folder of the kube-apiserver and etcd binaries.")
	flag.Parse()
	os.Exit(run(*dir, *crds, *assets, flag.Args()))
}

func run(dir, crds, assets string, command []string) int {
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM)

	cp, err := localcp.Start(dir, assets, crds)
	if err != nil {
		fmt.Fprintln(os.Stderr, "localcp:", err)
		return 1
	}
	defer func() {
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "localcp: stop:", err)
		}
	}()
	fmt.Fprintf(os.Stderr, "localcp: control plane at %s; kubeconfig %s\n", cp.Config.Host, cp.Kubeconfig)

	if len(command) == 0 {
		<-signals
		return 0
	}
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cp.Kubeconfig)
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "localcp:", err)
		return 1
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	for {
		select {
		case sig := <-signals:
			_ = cmd.Process.Signal(sig)
		case err := <-done:
			var exit *exec.ExitError
			if errors.As(err, &exit) {
				return exit.ExitCode()
			}
			if err != nil {
				return 1
			}
			return 0
		}
	}
}
