package main

import (
	"fmt"
	"image/color"
	"io"
	"path/filepath"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
)

// figure is one drawing of the bench's output: the name of its files
// (without extension), its size, and the plots it tiles.
type figure struct {
	name          string
	title         string
	width, height vg.Length
	// plots are the panels, by row and column; a nil panel is left
	// blank.
	plots [][]*plot.Plot
}

// panelWidth is the width of one panel of a figure; timingHeight and
// seriesHeight the heights of a timing row's panel and of a curve's.
const (
	panelWidth   = 5.5 * vg.Inch
	timingHeight = 1.5 * vg.Inch
	seriesHeight = 2.4 * vg.Inch
	// titleHeight is the room a figure's own title takes above its
	// panels.
	titleHeight = 0.4 * vg.Inch
)

// drawFigures draws every figure the rows have measurements for into dir,
// each as PNG and SVG, and returns the names of the files written: the
// latencies against their baselines, runsc against runc, the creation
// curve of each row that has one, and the memory per sandbox against
// count.
func drawFigures(dir string, rows []row) ([]string, error) {
	var figures []figure
	for _, build := range []func([]row) ([]figure, error){latencyFigures, runtimeFigures, creationFigures, memoryFigures} {
		f, err := build(rows)
		if err != nil {
			return nil, err
		}
		figures = append(figures, f...)
	}
	written := []string{}
	for _, f := range figures {
		for _, format := range []string{"png", "svg"} {
			name := f.name + "." + format
			if err := writeFile(filepath.Join(dir, name), func(w io.Writer) error { return f.write(w, format) }); err != nil {
				return written, fmt.Errorf("figure %s: %w", name, err)
			}
			written = append(written, name)
		}
	}
	return written, nil
}

// write draws the figure in format (png or svg) to w: a white page, the
// title on top, the panels aligned below it.
func (f figure) write(w io.Writer, format string) error {
	var c vg.CanvasWriterTo
	switch format {
	case "png":
		c = vgimg.PngCanvas{Canvas: vgimg.New(f.width, f.height)}
	case "svg":
		c = vgsvg.New(f.width, f.height)
	default:
		return fmt.Errorf("unknown format %q", format)
	}
	dc := draw.New(c)
	dc.SetColor(color.White)
	dc.Fill(dc.Path())
	style := plot.New().Title.TextStyle
	style.Font.Size = vg.Points(14)
	dc.FillText(style, vg.Point{X: dc.Center().X, Y: dc.Max.Y - vg.Points(6)}, f.title)
	dc.Max.Y -= titleHeight
	tiles := draw.Tiles{Rows: len(f.plots), Cols: len(f.plots[0]), PadX: vg.Points(16), PadY: vg.Points(12),
		PadTop: vg.Points(4), PadBottom: vg.Points(8), PadLeft: vg.Points(8), PadRight: vg.Points(16)}
	canvases := plot.Align(f.plots, tiles, dc)
	for i, line := range f.plots {
		for j, p := range line {
			if p != nil {
				p.Draw(canvases[i][j])
			}
		}
	}
	_, err := c.WriteTo(w)
	return err
}

// The colours of the two sides of a timing row, and of the lines of a
// curve in turn.
var (
	controllerColor = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	baselineColor   = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
	lineColors      = []color.Color{controllerColor, baselineColor, color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}}
)

func init() {
	// The figures' text in sans-serif, which reads better at the small
	// sizes of their panels; plot.New reads it.
	plot.DefaultFont = font.Font{Typeface: "Liberation", Variant: "Sans"}
}

// grid lays panels of the given height out in one column, or two when
// there are more than three, row by row, and sizes the figure to hold
// them.
func grid(name, title string, height vg.Length, panels []*plot.Plot) figure {
	cols := 1
	if len(panels) > 3 {
		cols = 2
	}
	rows := (len(panels) + cols - 1) / cols
	f := figure{name: name, title: title, width: vg.Length(cols) * panelWidth,
		height: vg.Length(rows)*height + titleHeight, plots: make([][]*plot.Plot, rows)}
	for i := range f.plots {
		f.plots[i] = make([]*plot.Plot, cols)
	}
	for i, p := range panels {
		f.plots[i/cols][i%cols] = p
	}
	return f
}

// latencyFigures is the figure of the latencies against their baselines:
// every timing row but runsc against runc.
func latencyFigures(rows []row) ([]figure, error) {
	return timingFigure("latency", "Latency: the controller against its baseline (the docker CLI unless named)",
		rows, func(r row) bool { return r.Key != "runtimes" })
}

// runtimeFigures is the figure of runsc against runc.
func runtimeFigures(rows []row) ([]figure, error) {
	return timingFigure("runtimes", "gVisor's runsc against runc, the same work under each",
		rows, func(r row) bool { return r.Key == "runtimes" })
}

// timingFigure is a panel for each timing row that keep selects: the
// distribution of each side's samples as a horizontal box plot with the
// samples themselves over it. There is no figure without such a row.
func timingFigure(name, title string, rows []row, keep func(row) bool) ([]figure, error) {
	var panels []*plot.Plot
	for _, r := range rows {
		if r.Samples == nil || len(r.Samples.Controller) == 0 || !keep(r) {
			continue
		}
		p, err := timingPanel(r)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Scenario, err)
		}
		panels = append(panels, p)
	}
	if len(panels) == 0 {
		return nil, nil
	}
	return []figure{grid(name, title, timingHeight, panels)}, nil
}

// timingPanel is one timing row: the baseline's box below, the
// controller's above, on one axis of seconds from zero.
func timingPanel(r row) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = wrap(unquote(r.Scenario), 80)
	p.Title.TextStyle.Font.Size = vg.Points(9)
	p.X.Label.Text = "seconds"
	s := r.Samples
	var names []string
	for _, side := range []struct {
		name   string
		values []float64
		color  color.Color
	}{{baselineLabel(s.BaselineName), s.Baseline, baselineColor}, {s.ControllerName, s.Controller, controllerColor}} {
		if len(side.values) == 0 {
			continue
		}
		box, points, err := boxWithSamples(side.values, float64(len(names)), side.color)
		if err != nil {
			return nil, err
		}
		p.Add(box, points)
		names = append(names, side.name)
	}
	p.NominalY(names...)
	// From zero, with room on the right for the largest sample's point.
	p.X.Min, p.X.Max = 0, 1.05*p.X.Max
	return p, nil
}

// boxWithSamples is a horizontal box plot of values at loc on the y axis,
// and the values as points over it.
func boxWithSamples(values []float64, loc float64, c color.Color) (*plotter.BoxPlot, *plotter.Scatter, error) {
	box, err := plotter.NewBoxPlot(vg.Points(18), loc, plotter.Values(values))
	if err != nil {
		return nil, nil, err
	}
	box.Horizontal = true
	box.BoxStyle.Color, box.MedianStyle.Color = c, c
	box.MedianStyle.Width = vg.Points(2)
	box.GlyphStyle.Radius = 0 // the points show every sample
	xys := make(plotter.XYs, len(values))
	for i, v := range values {
		xys[i] = plotter.XY{X: v, Y: loc}
	}
	points, err := plotter.NewScatter(xys)
	if err != nil {
		return nil, nil, err
	}
	points.Color, points.Radius = c, vg.Points(2)
	return box, points, nil
}

// baselineLabel names a baseline on a figure: the table's name for it
// without Markdown quotes, and the docker CLI named where the table leaves
// it to its column header.
func baselineLabel(name string) string {
	if name == "sequential" {
		return "docker CLI, sequential"
	}
	if name == "cold" {
		return "cold (no pool)"
	}
	return unquote(name)
}

// unquote drops Markdown's backquotes from a table cell.
func unquote(s string) string { return strings.ReplaceAll(s, "`", "") }

// wrap breaks s into lines of at most width characters at spaces (a
// longer word stands alone on its line).
func wrap(s string, width int) string {
	var lines []string
	line := ""
	for _, word := range strings.Fields(s) {
		if line != "" && len(line)+1+len(word) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += word
	}
	return strings.Join(append(lines, line), "\n")
}
