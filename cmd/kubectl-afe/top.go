package main

import (
	"context"
	"math"
	"math/bits"
	"strconv"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	accessv1 "afe.dev/sandbox/api/access/v1alpha1"
	"afe.dev/sandbox/client"
)

// topHelp says what the figures are: cumulative CPU time, not a rate.
const topHelp = `Print what sandboxes use, like kubectl top pods: a row per sandbox, or
the sums per ticket or per namespace, as the manager measured them, read
through its access API (sandboxusages, as metrics.k8s.io serves what Pods
use) with your identity (no Docker access). With --by ticket a sandbox
without a ticket is a ticket of its own, as in its afe.ticket label; per
sandbox, its TICKET is empty.

CPU-TIME is the CPU time the sandbox's processes used since its container
started (a recreated container starts from zero): cumulative, not a rate;
no rate is measured. MEMORY is the working set, DISK the writable layer
plus the workspace volume (-o wide: each, WRITABLE-LAYER and WORKSPACE),
NET-RX and NET-TX the bytes received and sent since the container started
(zero without egress); sizes are in bytes, in binary units (12Mi), as
kubectl prints quantities. MEASURED is how old the figures are (for a sum,
its oldest); the manager measures every sandbox every --usage-period and
keeps the last figures in memory only. A sandbox not measured (not
running, or started since the last measurement) shows "-".

-o json, yaml, jsonpath=... or a template print the rows as a UsageList
(by, items), every figure of a SandboxUsage in its own unit.

A negative figure counts as zero and a sum stops at the largest int64.`

// topFlags are the flags of kubectl afe top.
type topFlags struct {
	opts   client.TopOptions
	by     string
	sortBy string
	output *outputFlags
}

func newTopCommand(newClient clientFunc, streams genericiooptions.IOStreams) *cobra.Command {
	f := &topFlags{output: newOutputFlags()}
	cmd := &cobra.Command{
		Use:               "top [--by sandbox|ticket|namespace] [--sort-by cpu|memory|disk|network] [-A] [-l SELECTOR] [-o wide|json|yaml|jsonpath=...]",
		Short:             "Print the CPU time, memory, disk and network of sandboxes, per sandbox, ticket or namespace",
		Long:              topHelp,
		Args:              cobra.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(_ *cobra.Command, _ []string) error {
			if _, _, err := f.output.printer(); err != nil {
				return err
			}
			f.opts.By, f.opts.SortBy = client.UsageBy(f.by), client.UsageSort(f.sortBy)
			return withClient(newClient, func(c *client.Client) error {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				rows, err := c.Top(ctx, f.opts)
				if err != nil {
					return err
				}
				none := "No resources found"
				if !f.opts.AllNamespaces {
					none += " in " + c.Namespace() + " namespace"
				}
				return writeTop(streams, rows, f, time.Now(), none+".")
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.by, "by", string(client.BySandbox), "a row per sandbox, ticket or namespace")
	fl.StringVar(&f.sortBy, "sort-by", string(client.SortByName),
		"cpu, memory, disk or network (received plus sent), largest first; name: by namespace and name")
	fl.BoolVarP(&f.opts.AllNamespaces, "all-namespaces", "A", false, "the sandboxes of every namespace")
	fl.StringVarP(&f.opts.Selector, "selector", "l", "", "a label selector on the Sandboxes (-l team=a,tier!=ci)")
	f.output.addFlags(cmd)
	return cmd
}

// topListKind is the kind of what kubectl afe top prints with -o json,
// yaml, jsonpath or a template: its rows, in the access API's group and
// version.
const topListKind = "UsageList"

// topList is what kubectl afe top prints with -o json, yaml, jsonpath or
// a template.
type topList struct {
	Kind       string            `json:"kind"`
	APIVersion string            `json:"apiVersion"`
	By         client.UsageBy    `json:"by"`
	Items      []client.UsageRow `json:"items"`
}

// writeTop prints the rows as a table, or as a topList.
func writeTop(streams genericiooptions.IOStreams, rows []client.UsageRow, f *topFlags, now time.Time, none string) error {
	by := client.UsageBy(f.by)
	list := &topList{Kind: topListKind, APIVersion: accessv1.SchemeGroupVersion.String(), By: by,
		Items: append([]client.UsageRow{}, rows...)}
	return f.output.write(streams, list, func() *metav1.Table { return topTable(rows, by, f.opts.AllNamespaces, now) }, none)
}

// topTable is the table of the rows: their names, then the figures; -o
// wide adds the two parts of DISK.
func topTable(rows []client.UsageRow, by client.UsageBy, allNamespaces bool, now time.Time) *metav1.Table {
	var names []string
	switch by {
	case client.ByNamespace:
		names = []string{"Namespace", "Sandboxes"}
	case client.ByTicket:
		names = []string{"Ticket", "Sandboxes"}
	default:
		names = []string{"Name", "Ticket"}
	}
	if allNamespaces && by != client.ByNamespace {
		names = append([]string{"Namespace"}, names...)
	}
	t := &metav1.Table{}
	for _, n := range names {
		t.ColumnDefinitions = append(t.ColumnDefinitions, column(n, false))
	}
	t.ColumnDefinitions = append(t.ColumnDefinitions, column("CPU-Time", false), column("Memory", false),
		column("Disk", false), column("Writable-Layer", true), column("Workspace", true),
		column("Net-RX", false), column("Net-TX", false), column("Measured", false))
	for i := range rows {
		t.Rows = append(t.Rows, row(topCells(&rows[i], by, allNamespaces, now)...))
	}
	return t
}

// topCells is one row of the table, in the order of topTable's columns. A
// sandbox without a ticket has an empty TICKET, as kubectl get sandboxes
// shows it (its sum per ticket is a row named after it).
func topCells(r *client.UsageRow, by client.UsageBy, allNamespaces bool, now time.Time) []string {
	var cells []string
	if allNamespaces && by != client.ByNamespace {
		cells = append(cells, printable(r.Namespace))
	}
	if by == client.BySandbox {
		cells = append(cells, printable(r.Name), printable(r.Ticket))
	} else {
		cells = append(cells, printable(r.Name), strconv.Itoa(r.Sandboxes))
	}
	if r.Measured == 0 {
		return append(cells, "-", "-", "-", "-", "-", "-", "-", "-")
	}
	return append(cells, cpuTime(r.CPUMilliseconds), bytesOf(r.MemoryBytes), bytesOf(r.DiskBytes),
		bytesOf(r.WritableLayerBytes), bytesOf(r.WorkspaceBytes),
		bytesOf(r.NetworkReceiveBytes), bytesOf(r.NetworkTransmitBytes), measuredAgo(r.Time, now))
}

// cpuTime is milliseconds of CPU time, short: 850ms, 12.3s, 20m34s,
// 3h2m5s, and whole hours past what a time.Duration holds.
func cpuTime(ms int64) string {
	switch {
	case ms < 1000:
		return strconv.FormatInt(max(ms, 0), 10) + "ms"
	case ms < 60_000:
		return strconv.FormatFloat(float64(ms/100)/10, 'f', -1, 64) + "s"
	case ms <= math.MaxInt64/int64(time.Millisecond):
		return (time.Duration(ms) * time.Millisecond).Truncate(time.Second).String()
	}
	return strconv.FormatInt(ms/3_600_000, 10) + "h"
}

// bytesOf is a size in binary units, as kubectl prints quantities: 512,
// 12Ki, 1.5Mi, 300Gi (one decimal below 10 of a unit, rounded down).
func bytesOf(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(max(n, 0), 10)
	}
	units := []string{"Ki", "Mi", "Gi", "Ti", "Pi", "Ei"}
	i, unit := 0, int64(1024)
	for ; i < len(units)-1 && n/1024 >= unit; i++ {
		unit *= 1024
	}
	if n/unit >= 10 {
		return strconv.FormatInt(n/unit, 10) + units[i]
	}
	// n*10/unit in 128 bits: n*10 overflows an int64 near the top.
	hi, lo := bits.Mul64(uint64(n), 10)
	tenths, _ := bits.Div64(hi, lo, uint64(unit))
	return strconv.FormatFloat(float64(tenths)/10, 'f', -1, 64) + units[i]
}

// measuredAgo is how long ago t was, kubectl's way ("45s ago"); "-" for
// none, and "in the future" for a time after now (a clock skew, or a
// figure someone wrote).
func measuredAgo(t metav1.Time, now time.Time) string {
	switch {
	case t.IsZero():
		return "-"
	case t.After(now):
		return "in the future"
	}
	return duration.HumanDuration(now.Sub(t.Time)) + " ago"
}
