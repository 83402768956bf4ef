package main

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
)

// readyCurve is when each of a set of sandboxes created at once became
// Ready, in the order they did: the creation curve.
type readyCurve struct {
	Unit string `json:"unit"`
	// Ready holds, for each sandbox in the order they became Ready, the
	// time from the first create call to its Ready; before the i-th
	// (from 0), i sandboxes were already Ready.
	Ready []float64 `json:"ready"`
}

// memorySeries is the host memory per sandbox at one count of running
// sandboxes or several, for one kind of sandbox.
type memorySeries struct {
	// Label names the kind of sandbox ("without egress").
	Label  string        `json:"label"`
	Unit   string        `json:"unit"`
	Points []memoryPoint `json:"points"`
}

// memoryPoint is the host memory per sandbox (the drop in MemAvailable
// since before the first was made, over their count) with Count of them
// running.
type memoryPoint struct {
	Count      int     `json:"count"`
	PerSandbox float64 `json:"perSandbox"`
}

// results is what results.json holds: every row of the table, each with
// the measurements behind it.
type results struct {
	Rows []row `json:"rows"`
}

// writeJSON writes the rows as results.json holds them, indented.
func writeJSON(w io.Writer, rows []row) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(results{Rows: rows})
}

// writeResults writes everything a run leaves in dir: the table as
// results.md, the rows with their samples as results.json, and the figures
// the rows have data for, as PNG and SVG. It returns the names of the
// files written.
func writeResults(dir string, rows []row) ([]string, error) {
	written := []string{}
	for _, out := range []struct {
		name  string
		write func(io.Writer) error
	}{
		{"results.md", func(w io.Writer) error { writeTable(w, rows); return nil }},
		{"results.json", func(w io.Writer) error { return writeJSON(w, rows) }},
	} {
		if err := writeFile(filepath.Join(dir, out.name), out.write); err != nil {
			return written, err
		}
		written = append(written, out.name)
	}
	figures, err := drawFigures(dir, rows)
	return append(written, figures...), err
}

// writeFile creates path and writes it with write; an error closing it is
// an error too (a full disk shows there).
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	return errors.Join(write(f), f.Close())
}
