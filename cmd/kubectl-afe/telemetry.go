package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	"afe.dev/sandbox/client"
)

// newTelemetryCommand prints the command records of a sandbox, or of every
// sandbox of a ticket, or the egress records, through the access API: a
// table, or the list as the access API answers it with -o json, yaml,
// jsonpath=... or a template.
func newTelemetryCommand(newClient clientFunc, streams genericiooptions.IOStreams) *cobra.Command {
	var ticket string
	var limit int
	var egress, denied bool
	output := newOutputFlags()
	cmd := &cobra.Command{
		Use:   "telemetry (SANDBOX | --ticket TICKET) [--egress [--denied]] [-o wide|json|yaml|jsonpath=...] [--limit N]",
		Short: "Print the record of the commands executed in a sandbox, or in every sandbox of a ticket, or of its egress",
		ValidArgsFunction: func(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if ticket != "" {
				return nil, cobra.ShellCompDirectiveNoFileComp
			}
			return completeFirst(newClient, "Sandbox")(cmd, args, toComplete)
		},
		RunE: func(_ *cobra.Command, args []string) error {
			sandbox := ""
			if len(args) == 1 {
				sandbox = args[0]
			}
			if len(args) > 1 || (sandbox == "") == (ticket == "") || denied && !egress {
				_, _ = fmt.Fprintln(streams.ErrOut, "usage: kubectl afe telemetry SANDBOX | --ticket TICKET [--egress [--denied]] [-o wide|json|yaml|jsonpath=...] [--limit N]")
				return exitError{2}
			}
			if _, _, err := output.printer(); err != nil {
				return err
			}
			return withClient(newClient, func(c *client.Client) error {
				q := client.TelemetryQuery{Sandbox: sandbox, Ticket: ticket, Limit: limit, DeniedOnly: denied}
				if egress {
					return egressCommand(c, q, output, streams)
				}
				return telemetryCommand(c, q, output, streams)
			})
		},
	}
	cmd.Flags().StringVar(&ticket, "ticket", "", "the records of every sandbox of this ticket")
	_ = cmd.RegisterFlagCompletionFunc("ticket", completeNames(newClient, "Ticket"))
	output.addFlags(cmd)
	cmd.Flags().IntVar(&limit, "limit", 0, "the newest this many records (the API's default: 1000)")
	cmd.Flags().BoolVar(&egress, "egress", false, "the egress proxy's decisions (what the sandbox tried to reach) rather than the commands")
	cmd.Flags().BoolVar(&denied, "denied", false, "with --egress, the denied requests only")
	return cmd
}

func telemetryCommand(c *client.Client, q client.TelemetryQuery, output *outputFlags, streams genericiooptions.IOStreams) error {
	list, err := readWithin(func(ctx context.Context) (*accessv1.CommandRecordList, error) { return c.Telemetry(ctx, q) })
	if err != nil {
		return err
	}
	warnMissing(streams.ErrOut, "command", list.Unanswered, list.Pruned)
	return output.write(streams, list, func() *metav1.Table { return recordsTable(list.Items, q.Ticket != "") }, noRecords("command", q))
}

// readWithin reads a list, within a minute.
func readWithin[L any](read func(context.Context) (L, error)) (L, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return read(ctx)
}

// noRecords is what a table without records says, on stderr.
func noRecords(kind string, q client.TelemetryQuery) string {
	if q.DeniedOnly {
		kind = "denied " + kind
	}
	if q.Ticket != "" {
		return fmt.Sprintf("No %s records of ticket %s.", kind, printable(q.Ticket))
	}
	return fmt.Sprintf("No %s records of sandbox %s.", kind, printable(q.Sandbox))
}

// warnMissing says, on stderr, what is missing from an answer, whatever
// the output: the nodes that did not answer (per-node mode), and how many
// records of each sandbox the telemetry's size bounds removed (its
// namespace held more than its share). The list printed carries them too,
// in "unanswered" and "pruned".
func warnMissing(stderr io.Writer, kind string, nodes []accessv1.UnansweredNode, pruned []accessv1.PrunedRecords) {
	for _, n := range nodes {
		_, _ = fmt.Fprintf(stderr, "Warning: node %s did not answer, its records are missing: %s\n", printable(n.Node), printable(n.Message))
	}
	for _, p := range pruned {
		_, _ = fmt.Fprintf(stderr, "Warning: %d %s records of sandbox %s (UID %s), up to seq %d, were pruned (the last at %s): its namespace held more than its share of the telemetry\n",
			p.Records, kind, printable(p.Sandbox), printable(p.SandboxUID), p.ThroughSeq, p.Last.UTC().Format(time.RFC3339))
	}
}

// recordsTable is the table of command records, a line each: a command is
// quoted where it holds anything but printable characters. -o wide adds
// the output's size and SHA-256.
func recordsTable(recs []accessv1.CommandRecord, withSandbox bool) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		column("Seq", false), column("Source", false), column("Started", false), column("Duration", false),
		column("Exit", false), column("User", false), column("Run", false), column("Started By", false),
		column("Output", true), column("Output-SHA256", true), column("Command", false),
	}}
	if withSandbox {
		t.ColumnDefinitions = append([]metav1.TableColumnDefinition{column("Sandbox", false)}, t.ColumnDefinitions...)
	}
	for _, r := range recs {
		run := r.Run
		if run != "" && r.Attempt > 0 {
			run += "#" + strconv.Itoa(int(r.Attempt))
		}
		cells := []string{strconv.FormatInt(r.Seq, 10), printable(r.Source), r.Started.UTC().Format(time.RFC3339),
			r.Ended.Sub(r.Started).Round(time.Millisecond).String(), strconv.Itoa(r.ExitCode), dash(r.User), dash(run),
			printable(r.StartedBy), bytesOf(r.OutputBytes), dash(r.OutputSHA256), commandLine(r.Command)}
		if withSandbox {
			cells = append([]string{printable(r.Sandbox)}, cells...)
		}
		t.Rows = append(t.Rows, row(cells...))
	}
	return t
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
