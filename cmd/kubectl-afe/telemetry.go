package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"k8s.io/client-go/rest"

	"afe.dev/sandbox/internal/telemetry"
)

// telemetryCommand prints the command records of a sandbox, or of every
// sandbox of a ticket, through the access API: a table, or JSON with -o
// json.
func telemetryCommand(cfg *rest.Config, ns string, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("telemetry", flag.ContinueOnError)
	fs.SetOutput(stderr)
	ticket := fs.String("ticket", "", "the records of every sandbox of this ticket")
	output := fs.String("o", "table", "table or json")
	limit := fs.Int("limit", 0, "the newest this many records (the API's default: 1000)")
	sandbox, rest := "", args
	if len(rest) > 0 && !strings.HasPrefix(rest[0], "-") {
		sandbox, rest = rest[0], rest[1:]
	}
	if err := fs.Parse(rest); err != nil {
		return exitError{2}
	}
	if (sandbox == "") == (*ticket == "") || fs.NArg() > 0 || (*output != "table" && *output != "json") {
		_, _ = fmt.Fprintln(stderr, "usage: kubectl afe telemetry SANDBOX | --ticket TICKET [-o table|json] [--limit N]")
		return exitError{2}
	}
	resource, name := "sandboxes", sandbox
	if *ticket != "" {
		resource, name = "tickets", *ticket
	}
	u, err := accessURL(cfg, ns, resource, name, "telemetry")
	if err != nil {
		return err
	}
	if *limit > 0 {
		u.RawQuery = url.Values{"limit": {strconv.Itoa(*limit)}}.Encode()
	}
	list, err := getTelemetry(cfg, u)
	if err != nil {
		return err
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(list)
	}
	return writeRecords(stdout, list.Items, *ticket != "")
}

func getTelemetry(cfg *rest.Config, u *url.URL) (*telemetry.RecordList, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := doOK(hc, req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	list := &telemetry.RecordList{}
	if err := json.NewDecoder(resp.Body).Decode(list); err != nil {
		return nil, fmt.Errorf("read the telemetry: %w", err)
	}
	if list.Kind != telemetry.ListKind {
		return nil, errors.New("read the telemetry: the answer is not a " + telemetry.ListKind)
	}
	return list, nil
}

// writeRecords prints the records as a table; a command is quoted where it
// holds anything but printable characters, so a record is one line.
func writeRecords(w io.Writer, recs []telemetry.Record, withSandbox bool) error {
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
