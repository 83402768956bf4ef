package main

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/cobra"
	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// parseOutput is the output flags as a command parses these arguments.
func parseOutput(t *testing.T, args ...string) *outputFlags {
	t.Helper()
	f := newOutputFlags()
	cmd := &cobra.Command{Use: "x"}
	f.addFlags(cmd)
	if err := cmd.ParseFlags(args); err != nil {
		t.Fatal(err)
	}
	return f
}

// printed is what print wrote on stdout and on stderr.
func printed(t *testing.T, print func(genericiooptions.IOStreams) error) (stdout, stderr string) {
	t.Helper()
	streams, _, out, errOut := genericiooptions.NewTestIOStreams()
	if err := print(streams); err != nil {
		t.Fatal(err)
	}
	return out.String(), errOut.String()
}

func TestOutputFlags(t *testing.T) {
	tests := map[string]struct {
		args    []string
		table   bool
		printer string
		wantErr string
	}{
		"kubectl's table by default":       {table: true, printer: "*printers.HumanReadablePrinter"},
		"-o wide, the table too":           {args: []string{"-o", "wide"}, table: true, printer: "*printers.HumanReadablePrinter"},
		"--no-headers":                     {args: []string{"--no-headers"}, table: true, printer: "*printers.HumanReadablePrinter"},
		"-o json":                          {args: []string{"-o", "json"}, printer: "*printers.OmitManagedFieldsPrinter"},
		"-o yaml":                          {args: []string{"-oyaml"}, printer: "*printers.OmitManagedFieldsPrinter"},
		"-o kyaml":                         {args: []string{"--output=kyaml"}, printer: "*printers.OmitManagedFieldsPrinter"},
		"-o jsonpath=":                     {args: []string{"-o", "jsonpath={.items[*].seq}"}, printer: "*printers.JSONPathPrinter"},
		"-o go-template=":                  {args: []string{"-o", "go-template={{.kind}}"}, printer: "*printers.GoTemplatePrinter"},
		"--template alone, as kubectl get": {args: []string{"--template", "{{.kind}}"}, printer: "*printers.GoTemplatePrinter"},
		"-o table, not kubectl's":          {args: []string{"-o", "table"}, wantErr: `-o table: unable to match a printer suitable for the output format "table"`},
		"-o name: no objects":              {args: []string{"-o", "name"}, wantErr: "unable to match a printer"},
		"a bad jsonpath":                   {args: []string{"-o", "jsonpath={.items["}, wantErr: "error parsing jsonpath"},
		"-o jsonpath without a template":   {args: []string{"-o", "jsonpath"}, wantErr: "template format specified but no template given"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			p, table, err := parseOutput(t, tc.args...).printer()
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want an error with %q, got %v", tc.wantErr, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff([]any{tc.table, tc.printer}, []any{table, fmt.Sprintf("%T", p)}); d != "" {
				t.Error(d)
			}
		})
	}
}
