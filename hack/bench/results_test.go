package main

import (
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"image/color"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// The rows of a small synthetic run: made up here to test the writers,
// never written by the bench.
var (
	latencyRow = row{Scenario: "One Sandbox with egress (network, proxy, container), creation to Ready (3 reps)",
		Controller: "1.00 s (p95 1.20 s)", Baseline: "sequential 1.50 s (p95 1.60 s)", Ratio: "0.67x", Key: "egress",
		Samples: &timingSamples{Unit: "s", ControllerName: "controller", BaselineName: "sequential",
			Controller: []float64{1.0, 0.9, 1.2}, Baseline: []float64{1.5, 1.4, 1.6}}}
	execRow = row{Scenario: "A Run of `true`, creation to Completed (1 reps)", Controller: "93 ms",
		Baseline: "`docker exec` 83 ms", Ratio: "1.12x", Key: "run",
		Samples: &timingSamples{Unit: "s", ControllerName: "controller", BaselineName: "`docker exec`",
			Controller: []float64{0.093}, Baseline: []float64{0.083}}}
	runtimeSampleRow = row{Scenario: "runsc against runc: one Sandbox, creation to Ready (2 reps)", Controller: "600 ms (p95 700 ms)",
		Baseline: "runc 400 ms (p95 450 ms)", Ratio: "1.50x", Key: "runtimes",
		Samples: &timingSamples{Unit: "s", ControllerName: "runsc", BaselineName: "runc",
			Controller: []float64{0.6, 0.7}, Baseline: []float64{0.4, 0.45}}}
	creationRow = row{Scenario: "5 Sandboxes with egress created at once, until all Ready", Controller: "4.00 s",
		Baseline: "-", Ratio: "-", Key: "egress-scale",
		Ready: &readyCurve{Unit: "s", Ready: []float64{0.8, 1.1, 1.1, 2.5, 4.0}}}
	idleMemoryRow = row{Scenario: "4 Sandboxes created at once, until all Ready", Controller: "2.00 s; host memory 3.4 MiB per sandbox",
		Baseline: "-", Ratio: "-", Key: "idle",
		Memory: &memorySeries{Label: "without egress", Unit: "MiB",
			Points: []memoryPoint{{Count: 1, PerSandbox: -0.5}, {Count: 2, PerSandbox: 3.1}, {Count: 3, PerSandbox: 3.3}, {Count: 4, PerSandbox: 3.4}}}}
	egressMemoryRow = row{Scenario: "5 Sandboxes with egress Ready, idle for 30s", Controller: "host memory 16.5 MiB per sandbox",
		Baseline: "-", Ratio: "-", Key: "egress-scale",
		Memory: &memorySeries{Label: "with egress (its proxy included)", Unit: "MiB", Points: []memoryPoint{{Count: 5, PerSandbox: 16.5}}}}
	plainRow = row{Scenario: "50 Tickets created at once, until all Ready", Controller: "13.75 s",
		Baseline: "4-parallel 16.97 s (sequential 35.11 s)", Ratio: "0.81x", Key: "tickets"}
)

func TestWriteJSON(t *testing.T) {
	tests := map[string][]row{
		"timing rows":               {latencyRow, runtimeSampleRow},
		"a creation curve":          {creationRow},
		"memory series":             {idleMemoryRow, egressMemoryRow},
		"a row without samples":     {plainRow},
		"every kind, in run order":  {latencyRow, execRow, runtimeSampleRow, plainRow, idleMemoryRow, creationRow, egressMemoryRow},
		"a timing row with no base": {{Scenario: "x", Controller: "1 ms", Baseline: "-", Ratio: "-", Samples: &timingSamples{Unit: "s", Controller: []float64{0.001}}}},
	}
	for name, rows := range tests {
		t.Run(name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := writeJSON(&buf, rows); err != nil {
				t.Fatal(err)
			}
			var got results
			if err := json.Unmarshal(buf.Bytes(), &got); err != nil {
				t.Fatalf("results.json does not parse: %v\n%s", err, buf.String())
			}
			if diff := cmp.Diff(rows, got.Rows); diff != "" {
				t.Errorf("round trip (-wrote +read):\n%s", diff)
			}
		})
	}
}

// The names in results.json are the documented ones: a reader of the file
// does not read the Go types.
func TestJSONNames(t *testing.T) {
	var buf bytes.Buffer
	if err := writeJSON(&buf, []row{latencyRow}); err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Rows []map[string]any `json:"rows"`
	}
	if err := json.Unmarshal(buf.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"scenario": latencyRow.Scenario, "controller": latencyRow.Controller, "baseline": latencyRow.Baseline,
		"ratio": latencyRow.Ratio, "key": "egress",
		"samples": map[string]any{"unit": "s", "controllerName": "controller", "baselineName": "sequential",
			"controller": []any{1.0, 0.9, 1.2}, "baseline": []any{1.5, 1.4, 1.6}},
	}
	if len(raw.Rows) != 1 {
		t.Fatalf("%d rows, want 1", len(raw.Rows))
	}
	if diff := cmp.Diff(want, raw.Rows[0]); diff != "" {
		t.Errorf("results.json row (-want +got):\n%s", diff)
	}
}

func TestDrawFigures(t *testing.T) {
	tests := map[string]struct {
		rows []row
		want []string
	}{
		"every figure": {
			rows: []row{latencyRow, execRow, runtimeSampleRow, plainRow, idleMemoryRow, creationRow, egressMemoryRow},
			want: []string{"latency.png", "latency.svg", "runtimes.png", "runtimes.svg",
				"egress-scale-creation.png", "egress-scale-creation.svg", "memory.png", "memory.svg"},
		},
		"one sample a side": {rows: []row{execRow}, want: []string{"latency.png", "latency.svg"}},
		"a timing row without a baseline": {
			rows: []row{{Scenario: "x", Key: "run", Samples: &timingSamples{Unit: "s", ControllerName: "controller", Controller: []float64{0.1, 0.2}}}},
			want: []string{"latency.png", "latency.svg"},
		},
		"a creation curve of one sandbox": {
			rows: []row{{Scenario: "1 at once", Key: "egress-scale", Ready: &readyCurve{Unit: "s", Ready: []float64{0.7}}}},
			want: []string{"egress-scale-creation.png", "egress-scale-creation.svg"},
		},
		"one memory point":         {rows: []row{egressMemoryRow}, want: []string{"memory.png", "memory.svg"}},
		"nothing to draw":          {rows: []row{plainRow}, want: []string{}},
		"no rows":                  {rows: nil, want: []string{}},
		"runtimes only, no others": {rows: []row{runtimeSampleRow}, want: []string{"runtimes.png", "runtimes.svg"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			got, err := drawFigures(dir, tt.rows)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Fatalf("files (-want +got):\n%s", diff)
			}
			for _, name := range got {
				checkFigure(t, filepath.Join(dir, name))
			}
			if entries, _ := os.ReadDir(dir); len(entries) != len(tt.want) {
				t.Errorf("%d files in the folder, want %d", len(entries), len(tt.want))
			}
		})
	}
}

// A figure shows its rows: each panel's scenario is in the SVG's text.
func TestFiguresNameTheirRows(t *testing.T) {
	dir := t.TempDir()
	if _, err := drawFigures(dir, []row{latencyRow, execRow, idleMemoryRow, egressMemoryRow}); err != nil {
		t.Fatal(err)
	}
	for file, texts := range map[string][]string{
		"latency.svg": {"One Sandbox with egress", "A Run of true", "docker CLI, sequential", "docker exec", "controller"},
		"memory.svg":  {"without egress", "with egress (its proxy included)", "MiB per sandbox"},
	} {
		data, err := os.ReadFile(filepath.Join(dir, file))
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range texts {
			if !strings.Contains(string(data), text) {
				t.Errorf("%s does not show %q", file, text)
			}
		}
	}
}

func TestWriteResults(t *testing.T) {
	dir := t.TempDir()
	rows := []row{latencyRow, plainRow}
	got, err := writeResults(dir, rows)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"results.md", "results.json", "latency.png", "latency.svg"}, got); diff != "" {
		t.Fatalf("files (-want +got):\n%s", diff)
	}
	md, err := os.ReadFile(filepath.Join(dir, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	var table strings.Builder
	writeTable(&table, rows)
	if string(md) != table.String() {
		t.Errorf("results.md:\n%s\nwant the table:\n%s", md, table.String())
	}
	if read := readResults(t, filepath.Join(dir, "results.json")); !cmp.Equal(rows, read.Rows) {
		t.Errorf("results.json holds other rows: %s", cmp.Diff(rows, read.Rows))
	}
}

func TestWrap(t *testing.T) {
	tests := map[string]struct {
		in    string
		width int
		want  string
	}{
		"short":              {"one line", 20, "one line"},
		"at spaces":          {"one two three four", 9, "one two\nthree\nfour"},
		"a long word alone":  {"a verylongword b", 4, "a\nverylongword\nb"},
		"spaces collapsed":   {"  a   b  ", 10, "a b"},
		"exactly the width":  {"abc def", 7, "abc def"},
		"nothing to wrap at": {"", 5, ""},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := wrap(tt.in, tt.width); got != tt.want {
				t.Errorf("wrap(%q, %d) = %q, want %q", tt.in, tt.width, got, tt.want)
			}
		})
	}
}

func TestFallingCounts(t *testing.T) {
	tests := map[int][]int{1: nil, 2: {1}, 3: {2, 1}, 4: {3, 2, 1}, 5: {3, 2, 1}, 100: {75, 50, 25}}
	for n, want := range tests {
		if diff := cmp.Diff(want, fallingCounts(n)); diff != "" {
			t.Errorf("fallingCounts(%d) (-want +got):\n%s", n, diff)
		}
	}
}

// readResults reads a results.json.
func readResults(t *testing.T, path string) results {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var r results
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	return r
}

// checkFigure fails unless path is a PNG that decodes and shows more than
// its white page, or an SVG that is well-formed XML with an <svg> root.
func checkFigure(t *testing.T, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	switch filepath.Ext(path) {
	case ".png":
		img, err := png.Decode(f)
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		b, drawn := img.Bounds(), false
		for y := b.Min.Y; y < b.Max.Y && !drawn; y++ {
			for x := b.Min.X; x < b.Max.X && !drawn; x++ {
				drawn = color.GrayModel.Convert(img.At(x, y)).(color.Gray).Y < 128
			}
		}
		if b.Dx() < 100 || b.Dy() < 100 || !drawn {
			t.Errorf("%s: %v, drawn %v: not a figure", path, b, drawn)
		}
	case ".svg":
		if err := wellFormedSVG(f); err != nil {
			t.Errorf("%s: %v", path, err)
		}
	default:
		t.Errorf("%s: not a figure", path)
	}
}

// wellFormedSVG reads the whole document as XML and checks that its root
// element is <svg>.
func wellFormedSVG(r io.Reader) error {
	dec := xml.NewDecoder(r)
	root := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		if start, ok := tok.(xml.StartElement); ok && root == "" {
			root = start.Name.Local
		}
	}
	if root != "svg" {
		return errors.New("root element " + root + ", want svg")
	}
	return nil
}

// The SVG check itself tells a broken file from a figure.
func TestWellFormedSVG(t *testing.T) {
	tests := map[string]struct {
		doc string
		ok  bool
	}{
		"an svg":              {`<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"><g><text>x</text></g></svg>`, true},
		"cut short":           {`<?xml version="1.0"?><svg xmlns="http://www.w3.org/2000/svg"><g><text>x</text>`, false},
		"another root":        {`<html><svg></svg></html>`, false},
		"not xml":             {`{"rows": []}`, false},
		"mismatched elements": {`<svg><g></text></svg>`, false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if err := wellFormedSVG(strings.NewReader(tt.doc)); (err == nil) != tt.ok {
				t.Errorf("wellFormedSVG(%q) = %v, want ok %v", tt.doc, err, tt.ok)
			}
		})
	}
}
