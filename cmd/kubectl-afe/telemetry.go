package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	"afe.dev/sandbox/client"
)

// telemetryCommand prints the command records of a sandbox, or of every
// sandbox of a ticket, through the access API: a table, or JSON with -o
// json.
func newTelemetryCommand(newClient clientFunc, streams genericiooptions.IOStreams) *cobra.Command {
	var ticket, output string
	var limit int
	var egress, denied bool
	cmd := &cobra.Command{
		Use:   "telemetry (SANDBOX | --ticket TICKET) [--egress [--denied]] [-o table|json] [--limit N]",
		Short: "Print the record of the commands executed in a sandbox, or in every sandbox of a ticket, or of its egress",
		RunE: func(_ *cobra.Command, args []string) error {
			sandbox := ""
			if len(args) == 1 {
				sandbox = args[0]
			}
			if len(args) > 1 || (sandbox == "") == (ticket == "") || (output != "table" && output != "json") || denied && !egress {
				_, _ = fmt.Fprintln(streams.ErrOut, "usage: kubectl afe telemetry SANDBOX | --ticket TICKET [--egress [--denied]] [-o table|json] [--limit N]")
				return exitError{2}
			}
			return withClient(newClient, func(c *client.Client) error {
				q := client.TelemetryQuery{Sandbox: sandbox, Ticket: ticket, Limit: limit, DeniedOnly: denied}
				if egress {
					return egressCommand(c, q, output, streams.Out, streams.ErrOut)
				}
				return telemetryCommand(c, q, output, streams.Out, streams.ErrOut)
			})
		},
	}
	cmd.Flags().StringVar(&ticket, "ticket", "", "the records of every sandbox of this ticket")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table or json")
	cmd.Flags().IntVar(&limit, "limit", 0, "the newest this many records (the API's default: 1000)")
	cmd.Flags().BoolVar(&egress, "egress", false, "the egress proxy's decisions (what the sandbox tried to reach) rather than the commands")
	cmd.Flags().BoolVar(&denied, "denied", false, "with --egress, the denied requests only")
	return cmd
}

func telemetryCommand(c *client.Client, q client.TelemetryQuery, output string, stdout, stderr io.Writer) error {
	return printList(stdout, output, func(ctx context.Context) (*accessv1.CommandRecordList, error) { return c.Telemetry(ctx, q) },
		func(list *accessv1.CommandRecordList) error {
			warnUnanswered(stderr, list.Unanswered)
			warnPruned(stderr, "command", list.Pruned)
			return writeRecords(stdout, list.Items, q.Ticket != "")
		})
}

// warnUnanswered names, on stderr, the nodes whose records are missing
// from an answer (per-node mode): -o json carries them in "unanswered".
func warnUnanswered(stderr io.Writer, nodes []accessv1.UnansweredNode) {
	for _, n := range nodes {
		_, _ = fmt.Fprintf(stderr, "Warning: node %s did not answer, its records are missing: %s\n", printable(n.Node), printable(n.Message))
	}
}

// warnPruned says, on stderr, how many records of each sandbox the
// telemetry's size bounds removed (its namespace held more than its share):
// they are missing from the answer. -o json carries them in "pruned".
func warnPruned(stderr io.Writer, kind string, pruned []accessv1.PrunedRecords) {
	for _, p := range pruned {
		_, _ = fmt.Fprintf(stderr, "Warning: %d %s records of sandbox %s (UID %s), up to seq %d, were pruned (the last at %s): its namespace held more than its share of the telemetry\n",
			p.Records, kind, printable(p.Sandbox), printable(p.SandboxUID), p.ThroughSeq, p.Last.UTC().Format(time.RFC3339))
	}
}

// printList reads a list (within a minute) and prints it: JSON with -o
// json, else as table prints it.
func printList[L any](stdout io.Writer, output string, read func(context.Context) (L, error), table func(L) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	list, err := read(ctx)
	if err != nil {
		return err
	}
	if output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	return table(list)
}

// writeRecords prints the records as a table; a command is quoted where it
// holds anything but printable characters, so a record is one line.
func writeRecords(w io.Writer, recs []accessv1.CommandRecord, withSandbox bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "SEQ\tSOURCE\tSTARTED\tDURATION\tEXIT\tUSER\tRUN\tSTARTED BY\tCOMMAND"
	if withSandbox {
		head = "SANDBOX\t" + head
	}
	_, _ = fmt.Fprintln(tw, head)
	for _, r := range recs {
		run := r.Run
		if run != "" && r.Attempt > 0 {
			run += "#" + strconv.Itoa(int(r.Attempt))
		}
		line := fmt.Sprintf("%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\t%s", r.Seq, r.Source, r.Started.UTC().Format(time.RFC3339),
			r.Ended.Sub(r.Started).Round(time.Millisecond), r.ExitCode, dash(r.User), dash(run), printable(r.StartedBy), commandLine(r.Command))
		if withSandbox {
			line = r.Sandbox + "\t" + line
		}
		_, _ = fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return printable(s)
}

// commandLine joins the arguments, each quoted when it is empty or holds a
// space or anything not printable.
func commandLine(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = a
		if a == "" || strings.ContainsFunc(a, func(r rune) bool { return unicode.IsSpace(r) || !unicode.IsPrint(r) || r == '"' }) {
			out[i] = strconv.Quote(a)
		}
	}
	return strings.Join(out, " ")
}

// printable quotes a string that holds anything not printable.
func printable(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}
