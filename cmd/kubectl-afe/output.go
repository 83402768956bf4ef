package main

import (
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/cli-runtime/pkg/printers"
)

// outputFlags are kubectl get's output flags, for a command that prints
// what it read: kubectl's table by default, -o wide for the table with
// its wide columns, --no-headers; and -o json, yaml, kyaml, jsonpath=...,
// jsonpath-file=..., go-template=..., go-template-file=... (and
// --template) through cli-runtime's PrintFlags and printers. There is no
// -o name: what is printed are records and sums, not objects.
type outputFlags struct {
	print     *genericclioptions.PrintFlags
	noHeaders bool
}

// outputWide is the -o of the table with its wide columns.
const outputWide = "wide"

func newOutputFlags() *outputFlags {
	f := &outputFlags{print: genericclioptions.NewPrintFlags("")}
	f.print.NamePrintFlags = nil
	return f
}

// addFlags declares -o, --template, --allow-missing-template-keys and
// --no-headers.
func (f *outputFlags) addFlags(cmd *cobra.Command) {
	f.print.TemplatePrinterFlags.AddFlags(cmd)
	formats := append([]string{outputWide}, f.print.AllowedFormats()...)
	cmd.Flags().StringVarP(f.print.OutputFormat, "output", "o", "",
		"Output format: the table by default, or one of "+strings.Join(formats, ", ")+".")
	f.print.OutputFlagSpecified = func() bool { return cmd.Flags().Changed("output") }
	cmd.Flags().BoolVar(&f.noHeaders, "no-headers", false, "Print the table without its header line.")
}

// printer is the printer the flags ask for, and whether it prints tables
// (the object to give it is then the command's metav1.Table). A format it
// does not know is an error, which a command returns before it reads
// anything.
func (f *outputFlags) printer() (printers.ResourcePrinter, bool, error) {
	format := strings.ToLower(*f.print.OutputFormat)
	template := *f.print.TemplatePrinterFlags.TemplateArgument
	if format == outputWide || format == "" && template == "" {
		return printers.NewTablePrinter(printers.PrintOptions{Wide: format == outputWide, NoHeaders: f.noHeaders}), true, nil
	}
	p, err := f.print.ToPrinter()
	if err != nil {
		return nil, false, fmt.Errorf("-o %s: %w", format, err)
	}
	return p, false, nil
}

// write prints what a command read on streams.Out: the table tableOf
// makes, or list, a pointer to the struct it is on the wire, as the JSON
// object it is (with its kind and apiVersion). A table without rows
// prints nothing there, and none on streams.ErrOut, as kubectl get's
// "No resources found".
func (f *outputFlags) write(streams genericiooptions.IOStreams, list any, tableOf func() *metav1.Table, none string) error {
	p, isTable, err := f.printer()
	if err != nil {
		return err
	}
	if isTable {
		table := tableOf()
		if len(table.Rows) == 0 {
			_, _ = fmt.Fprintln(streams.ErrOut, none)
			return nil
		}
		return p.PrintObj(table, streams.Out)
	}
	obj, err := objectOf(list)
	if err != nil {
		return err
	}
	return p.PrintObj(obj, streams.Out)
}

// objectOf is a wire struct as cli-runtime's printers take an object:
// unstructured, as kubectl get prints a custom resource, so that an int64
// stays exact for jsonpath and templates (they would read a typed
// object's JSON back into float64s).
func objectOf(list any) (runtime.Object, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(list)
	if err != nil {
		return nil, fmt.Errorf("print %T: %w", list, err)
	}
	return &unstructured.Unstructured{Object: m}, nil
}

// column is a column of a table: a name (printed in capitals) and whether
// it is shown only with -o wide.
func column(name string, wide bool) metav1.TableColumnDefinition {
	c := metav1.TableColumnDefinition{Name: name, Type: "string"}
	if wide {
		c.Priority = 1
	}
	return c
}

// row is a row of a table, its cells in the order of its columns.
func row(cells ...string) metav1.TableRow {
	r := metav1.TableRow{Cells: make([]any, len(cells))}
	for i, c := range cells {
		r.Cells[i] = c
	}
	return r
}
