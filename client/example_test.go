package client_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"k8s.io/client-go/tools/clientcmd"

	"afe.dev/sandbox/client"
)

// A workflow engine's step: a ticket with egress, a script, its JSON
// result, and the end of the ticket.
func Example() {
	cfg, err := clientcmd.BuildConfigFromFlags("", os.Getenv("KUBECONFIG"))
	if err != nil {
		log.Fatal(err)
	}
	c, err := client.New(cfg, client.WithNamespace("team-a"))
	if err != nil {
		log.Fatal(err)
	}
	if err := step(c); err != nil {
		log.Fatal(err)
	}
}

func step(c *client.Client) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if _, err := c.CreateTicket(ctx, "ticket-42", client.Image("afe/busybox:dev"), client.Egress("pypi.org")); err != nil {
		return err
	}
	defer func() { _ = c.DestroyTicket(context.Background(), "ticket-42") }()
	out, err := c.Run(ctx, "ticket-42", client.Script(`echo '{"tests": 12, "failed": 0}'`))
	if err != nil {
		return err
	}
	fmt.Println(out.OK, out.Result["tests"])
	return nil
}

// Exec keeps stdout and stderr apart and returns a non-zero exit as a
// code, not an error.
func ExampleClient_Exec() {
	var c *client.Client // from client.New
	code, err := c.Exec(context.Background(), "box", client.ExecOptions{
		Command: []string{"sh", "-c", "echo out; echo err >&2; exit 3"},
		Stdout:  os.Stdout,
		Stderr:  os.Stderr,
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("exit code", code)
}

// Run's outcome says whether the command timed out; the error says so too.
func ExampleClient_Run() {
	var c *client.Client // from client.New
	out, err := c.Run(context.Background(), "box", client.Script("make test").Timeout(5*time.Minute))
	switch {
	case client.IsTimedOut(err):
		fmt.Println("timed out:", out.Output)
	case client.IsNotFound(err), client.IsForbidden(err):
		log.Fatal(err)
	case err != nil:
		log.Fatalf("%v (reason %s)", err, client.ReasonOf(err))
	default:
		fmt.Println(out.ExitCode, out.Output)
	}
}

// Files copies a file or a tree in and out of the workspace.
func ExampleFiles() {
	var c *client.Client // from client.New
	ctx := context.Background()
	if err := c.Files("box").Put(ctx, "./src", "/workspace/"); err != nil {
		log.Fatal(err)
	}
	if err := c.Files("box").Get(ctx, "/workspace/src/report.json", "./report.json"); err != nil {
		log.Fatal(err)
	}
}

// MergeAndCI merges lanes into an integration branch and runs CI there.
func ExampleClient_MergeAndCI() {
	var c *client.Client // from client.New
	report, err := c.MergeAndCI(context.Background(), "box", client.MergeOptions{
		Lanes: []string{"lane-a", "lane-b"}, BaseRef: "main", CIScript: "make test",
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(report.Merged, report.CIPassed, report.Conflicts)
}

// Snapshot and Restore start a new sandbox from a copy of a workspace.
func ExampleClient_Snapshot() {
	var c *client.Client // from client.New
	ctx := context.Background()
	snap, err := c.Snapshot(ctx, "box")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.Restore(ctx, "box-copy", snap, client.Image("afe/busybox:dev")); err != nil {
		log.Fatal(err)
	}
}
