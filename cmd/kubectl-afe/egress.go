package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	"afe.dev/sandbox/client"
)

// egressCommand prints the egress records the query selects: a table, or
// the list as the access API answers it.
func egressCommand(c *client.Client, q client.TelemetryQuery, output *outputFlags, streams genericiooptions.IOStreams) error {
	list, err := readWithin(func(ctx context.Context) (*accessv1.EgressRecordList, error) { return c.Egress(ctx, q) })
	if err != nil {
		return err
	}
	warnMissing(streams.ErrOut, "egress", list.Unanswered, list.Pruned)
	return output.write(streams, list, func() *metav1.Table { return egressTable(list.Items, q.Ticket != "") }, noRecords("egress", q))
}

// egressTable is the table of egress records, a line each: the host and
// method are quoted where they hold anything but printable characters
// (the store keeps them escaped already; an older or other server might
// not). -o wide adds the proxy's status and the proxy container.
func egressTable(recs []accessv1.EgressRecord, withSandbox bool) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: []metav1.TableColumnDefinition{
		column("Seq", false), column("Time", false), column("Decision", false), column("Reason", false),
		column("Method", false), column("Host", false), column("Port", false), column("Up", false),
		column("Down", false), column("Duration", false), column("Running", false),
		column("Status", true), column("Proxy", true),
	}}
	if withSandbox {
		t.ColumnDefinitions = append([]metav1.TableColumnDefinition{column("Sandbox", false)}, t.ColumnDefinitions...)
	}
	for _, r := range recs {
		host := printable(r.Host)
		if r.Connections > 0 {
			host = fmt.Sprintf("(%d connections without a request)", r.Connections)
		}
		cells := []string{strconv.FormatInt(r.Seq, 10), r.Time.UTC().Format(time.RFC3339Nano), printable(r.Decision),
			dash(r.Reason), printable(r.Method), host, strconv.Itoa(r.Port), strconv.FormatInt(r.BytesUp, 10),
			strconv.FormatInt(r.BytesDown, 10), r.Duration.Duration.String(), dash(strings.Join(r.Running, ",")),
			dash(r.Status), dash(shortID(r.Proxy))}
		if withSandbox {
			cells = append([]string{printable(r.Sandbox)}, cells...)
		}
		t.Rows = append(t.Rows, row(cells...))
	}
	return t
}

// shortID is a container ID as docker ps shows it: its first 12
// characters.
func shortID(id string) string {
	if len(id) > 12 {
		return id[:12]
	}
	return id
}
