package main

import (
	"errors"

	"golang.org/x/term"
	"k8s.io/client-go/rest"
)

// shellCommand opens a shell (or runs a command) in the sandbox through the
// access API, with the caller's Kubernetes identity: as the sandbox's user,
// in /workspace, on a terminal when stdin is one. It needs no Docker CLI
// and no access to the engine: the manager reaches only the container it
// made for that Sandbox, and refuses while the sandbox has none running.
func shellCommand(cfg *rest.Config, ns string, args []string, streams execStreams) error {
	if len(args) == 0 {
		return errors.New("shell needs a SANDBOX")
	}
	command := args[1:]
	if len(command) > 0 && command[0] == "--" {
		command = command[1:]
	}
	if len(command) == 0 {
		command = []string{"/bin/sh"}
	}
	tty := term.IsTerminal(int(streams.stdin.Fd()))
	return streamExec(cfg, ns, args[0], command, true, tty, streams)
}
