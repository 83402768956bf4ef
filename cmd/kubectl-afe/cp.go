package main

import (
	"context"
	"errors"
	"strings"

	"github.com/spf13/cobra"

	"afe.dev/sandbox/client"
)

// newCpCommand copies a file or a tree into a sandbox's workspace or out of
// it, through the access API (client.Files):
//
//	kubectl afe cp LOCAL SANDBOX:/workspace/PATH
//	kubectl afe cp SANDBOX:/workspace/PATH LOCAL
//
// Up, PATH ending in "/" (or /workspace itself) is a folder that receives
// LOCAL under its own name; otherwise LOCAL lands at PATH, whose folder
// must exist. Down, the file or tree is written at LOCAL, or into LOCAL
// under its own name when LOCAL is an existing folder.
func newCpCommand(newClient clientFunc) *cobra.Command {
	return &cobra.Command{
		Use:               "cp (LOCAL SANDBOX:/workspace/PATH | SANDBOX:/workspace/PATH LOCAL)",
		Short:             "Copy a file or a tree into a sandbox's workspace or out of it",
		ValidArgsFunction: completeCp(newClient),
		RunE: func(_ *cobra.Command, args []string) error {
			if len(args) != 2 {
				return errors.New("cp needs LOCAL SANDBOX:/workspace/PATH, or SANDBOX:/workspace/PATH LOCAL")
			}
			return withClient(newClient, func(c *client.Client) error { return cpCommand(c, args) })
		},
	}
}

// cpCommand copies args[0] to args[1].
func cpCommand(c *client.Client, args []string) error {
	ctx := context.Background()
	if sandbox, remote, ok := remoteArg(args[1]); ok {
		return c.Files(sandbox).Put(ctx, args[0], remote)
	}
	if sandbox, remote, ok := remoteArg(args[0]); ok {
		return c.Files(sandbox).Get(ctx, remote, args[1])
	}
	return errors.New("cp needs one of its two paths as SANDBOX:/workspace/PATH")
}

// remoteArg splits SANDBOX:/PATH.
func remoteArg(a string) (sandbox, p string, ok bool) {
	sandbox, p, ok = strings.Cut(a, ":")
	if !ok || sandbox == "" || !strings.HasPrefix(p, "/") || strings.Contains(sandbox, "/") {
		return "", "", false
	}
	return sandbox, p, true
}
