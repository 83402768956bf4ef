package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	"afe.dev/sandbox/client"
)

// egressCommand prints the egress records the query selects: a table, or
// JSON with -o json.
func egressCommand(c *client.Client, q client.TelemetryQuery, output string, stdout, stderr io.Writer) error {
	return printList(stdout, output, func(ctx context.Context) (*accessv1.EgressRecordList, error) { return c.Egress(ctx, q) },
		func(list *accessv1.EgressRecordList) error {
			warnUnanswered(stderr, list.Unanswered)
			warnPruned(stderr, "egress", list.Pruned)
			return writeEgress(stdout, list.Items, q.Ticket != "")
		})
}

// writeEgress prints egress records as a table, one line each: the host
// and method are quoted where they hold anything but printable characters
// (the store keeps them escaped already; an older or other server might
// not).
func writeEgress(w io.Writer, recs []accessv1.EgressRecord, withSandbox bool) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	head := "SEQ\tTIME\tDECISION\tREASON\tMETHOD\tHOST\tPORT\tUP\tDOWN\tDURATION\tRUNNING"
	if withSandbox {
		head = "SANDBOX\t" + head
	}
	_, _ = fmt.Fprintln(tw, head)
	for _, r := range recs {
		host := printable(r.Host)
		if r.Connections > 0 {
			host = fmt.Sprintf("(%d connections without a request)", r.Connections)
		}
		line := fmt.Sprintf("%d\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s", r.Seq, r.Time.UTC().Format(time.RFC3339Nano), r.Decision,
			dash(r.Reason), printable(r.Method), host, r.Port, r.BytesUp, r.BytesDown, r.Duration.Duration, dash(strings.Join(r.Running, ",")))
		if withSandbox {
			line = printable(r.Sandbox) + "\t" + line
		}
		_, _ = fmt.Fprintln(tw, line)
	}
	return tw.Flush()
}
