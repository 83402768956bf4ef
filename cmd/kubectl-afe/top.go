package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/duration"

	"afe.dev/sandbox/client"
)

// topHelp says what the figures are: cumulative CPU time, not a rate.
const topHelp = `Print what sandboxes use, like kubectl top pods: a row per sandbox, or
the sums per ticket or per namespace, as the manager measured them, read
through its access API (sandboxusages, as metrics.k8s.io serves what Pods
use) with your identity (no Docker access). With --by ticket a sandbox
without a ticket is a ticket of its own, as in its afe.ticket label; per
sandbox, its TICKET is <none>.

CPU-TIME is the CPU time the sandbox's processes used since its container
started (a recreated container starts from zero): cumulative, not a rate;
no rate is measured. MEMORY is the working set, DISK the writable layer
plus the workspace volume, NET-RX and NET-TX the bytes received and sent
since the container started (zero without egress). MEASURED is how old
the figures are (for a sum, its oldest); the manager measures every
sandbox every --usage-period and keeps the last figures in memory only. A
sandbox not measured (not running, or started since the last measurement)
shows "-".

A negative figure counts as zero and a sum stops at the largest int64.`

// topFlags are the flags of kubectl afe top.
type topFlags struct {
	opts      client.TopOptions
	by        string
	sortBy    string
	output    string
	noHeaders bool
}

func newTopCommand(newClient clientFunc, streams execStreams) *cobra.Command {
	f := &topFlags{}
	cmd := &cobra.Command{
		Use:   "top [--by sandbox|ticket|namespace] [--sort-by cpu|memory|disk|network] [-A] [-l SELECTOR] [-o table|json]",
		Short: "Print the CPU time, memory, disk and network of sandboxes, per sandbox, ticket or namespace",
		Long:  topHelp,
		Args:  cobra.NoArgs,
		RunE: func(_ *cobra.Command, _ []string) error {
			if f.output != "table" && f.output != "json" {
				_, _ = fmt.Fprintln(streams.stderr, "kubectl afe top: -o must be table or json")
				return exitError{2}
			}
			f.opts.By, f.opts.SortBy = client.UsageBy(f.by), client.UsageSort(f.sortBy)
			return withClient(newClient, func(c *client.Client) error {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				rows, err := c.Top(ctx, f.opts)
				if err != nil {
					return err
				}
				return writeTop(streams.stdout, rows, f, time.Now())
			})
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.by, "by", string(client.BySandbox), "a row per sandbox, ticket or namespace")
	fl.StringVar(&f.sortBy, "sort-by", string(client.SortByName),
		"cpu, memory, disk or network (received plus sent), largest first; name: by namespace and name")
	fl.BoolVarP(&f.opts.AllNamespaces, "all-namespaces", "A", false, "the sandboxes of every namespace")
	fl.StringVarP(&f.opts.Selector, "selector", "l", "", "a label selector on the Sandboxes (-l team=a,tier!=ci)")
	fl.StringVarP(&f.output, "output", "o", "table", "table or json")
	fl.BoolVar(&f.noHeaders, "no-headers", false, "no header line in the table")
	return cmd
}

// topList is the JSON of kubectl afe top -o json.
type topList struct {
	By    client.UsageBy    `json:"by"`
	Items []client.UsageRow `json:"items"`
}

// writeTop prints the rows as a table, or as JSON.
func writeTop(w io.Writer, rows []client.UsageRow, f *topFlags, now time.Time) error {
	by := client.UsageBy(f.by)
	if f.output == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(topList{By: by, Items: append([]client.UsageRow{}, rows...)})
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	if !f.noHeaders {
		_, _ = fmt.Fprintln(tw, strings.Join(topColumns(by, f.opts.AllNamespaces), "\t"))
	}
	for i := range rows {
		_, _ = fmt.Fprintln(tw, strings.Join(topCells(&rows[i], by, f.opts.AllNamespaces, now), "\t"))
	}
	return tw.Flush()
}

// figureColumns are the columns of the figures, after the names.
var figureColumns = []string{"CPU-TIME", "MEMORY(bytes)", "DISK(bytes)", "NET-RX(bytes)", "NET-TX(bytes)", "MEASURED"}

// topColumns is the header of a table of rows of this level.
func topColumns(by client.UsageBy, allNamespaces bool) []string {
	var cols []string
	switch by {
	case client.ByNamespace:
		cols = []string{"NAMESPACE", "SANDBOXES"}
	case client.ByTicket:
		cols = []string{"TICKET", "SANDBOXES"}
	default:
		cols = []string{"NAME", "TICKET"}
	}
	if allNamespaces && by != client.ByNamespace {
		cols = append([]string{"NAMESPACE"}, cols...)
	}
	return append(cols, figureColumns...)
}

// topCells is one row of the table, in the order of topColumns.
func topCells(r *client.UsageRow, by client.UsageBy, allNamespaces bool, now time.Time) []string {
	var cells []string
	if allNamespaces && by != client.ByNamespace {
		cells = append(cells, printable(r.Namespace))
	}
	if by == client.BySandbox {
		cells = append(cells, printable(r.Name), orNone(printable(r.Ticket)))
	} else {
		cells = append(cells, printable(r.Name), strconv.Itoa(r.Sandboxes))
	}
	if r.Measured == 0 {
		return append(cells, "-", "-", "-", "-", "-", "-")
	}
	return append(cells, cpuTime(r.CPUMilliseconds), bytesOf(r.MemoryBytes), bytesOf(r.DiskBytes),
		bytesOf(r.NetworkReceiveBytes), bytesOf(r.NetworkTransmitBytes), measuredAgo(r.Time, now))
}

// orNone is a cell, "<none>" when empty, as kubectl prints a field that
// is not set.
func orNone(cell string) string {
	if cell == "" {
		return "<none>"
	}
	return cell
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
