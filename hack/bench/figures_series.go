package main

import (
	"fmt"
	"image/color"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// creationFigures is, for each row with a creation curve, the time to
// Ready of each sandbox and the time each one took, against the number
// already Ready.
func creationFigures(rows []row) ([]figure, error) {
	var figures []figure
	for _, r := range rows {
		if r.Ready == nil || len(r.Ready.Ready) == 0 {
			continue
		}
		panels, err := creationPanels(r.Ready.Ready)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Scenario, err)
		}
		figures = append(figures, grid(r.Key+"-creation", unquote(r.Scenario), seriesHeight, panels))
	}
	return figures, nil
}

// paceWindow is how many sandboxes the mean time per sandbox of a creation
// curve of n spans: a twentieth of them, from 1 to 25.
func paceWindow(n int) int { return min(25, max(1, n/20)) }

// creationPanels are the panels of one creation curve: the time from the
// first create call to each Ready; then, when there are two or more, the
// gap from each Ready to the one before and their mean over a window.
func creationPanels(ready []float64) ([]*plot.Plot, error) {
	total := plot.New()
	total.Title.Text = "Time to Ready, from the first create call"
	total.X.Label.Text, total.Y.Label.Text = "sandboxes already Ready", "seconds"
	curve := make(plotter.XYs, len(ready))
	for i, t := range ready {
		curve[i] = plotter.XY{X: float64(i), Y: t}
	}
	line, points, err := plotter.NewLinePoints(curve)
	if err != nil {
		return nil, err
	}
	line.Color, points.Color, points.Radius = lineColors[0], lineColors[0], vg.Points(1.5)
	total.Add(line)
	if len(ready) <= 60 {
		total.Add(points) // each sandbox, while they can be told apart
	}
	if len(ready) < 2 {
		return []*plot.Plot{total}, nil
	}
	k := paceWindow(len(ready))
	pace := plot.New()
	pace.Title.Text = "Seconds per sandbox"
	pace.X.Label.Text, pace.Y.Label.Text = "sandboxes already Ready", "seconds"
	pace.Y.Min = 0
	gaps, mean := make(plotter.XYs, 0, len(ready)-1), make(plotter.XYs, 0, len(ready))
	for i := 1; i < len(ready); i++ {
		gaps = append(gaps, plotter.XY{X: float64(i), Y: ready[i] - ready[i-1]})
		if i >= k {
			mean = append(mean, plotter.XY{X: float64(i), Y: (ready[i] - ready[i-k]) / float64(k)})
		}
	}
	each, err := plotter.NewScatter(gaps)
	if err != nil {
		return nil, err
	}
	each.Color, each.Radius = color.Gray{Y: 150}, vg.Points(1.5)
	avg, err := plotter.NewLine(mean)
	if err != nil {
		return nil, err
	}
	avg.Color, avg.Width = lineColors[1], vg.Points(1.5)
	pace.Add(each, avg)
	pace.Legend.Add("gap to the one before", each)
	pace.Legend.Add(fmt.Sprintf("mean over the last %d", k), avg)
	legendOnTop(pace)
	return []*plot.Plot{total, pace}, nil
}

// memoryFigures is the figure of the host memory per sandbox against the
// number running: a line for each row that measured it.
func memoryFigures(rows []row) ([]figure, error) {
	p := plot.New()
	p.Title.Text = "Host memory per sandbox: the drop in MemAvailable since before the first, over their count"
	p.Title.TextStyle.Font.Size = vg.Points(9)
	p.X.Label.Text = "sandboxes running"
	p.X.Min = 0
	series := 0
	for _, r := range rows {
		if r.Memory == nil || len(r.Memory.Points) == 0 {
			continue
		}
		xys := make(plotter.XYs, len(r.Memory.Points))
		for i, pt := range r.Memory.Points {
			xys[i] = plotter.XY{X: float64(pt.Count), Y: pt.PerSandbox}
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.Scenario, err)
		}
		c := lineColors[series%len(lineColors)]
		line.Color, points.Color, points.Shape = c, c, plotutil.Shape(series)
		p.Add(line, points)
		p.Legend.Add(r.Memory.Label, line, points)
		p.Y.Label.Text = r.Memory.Unit + " per sandbox"
		series++
	}
	if series == 0 {
		return nil, nil
	}
	p.X.Max *= 1.05 // room for the last point
	legendOnTop(p)
	return []figure{grid("memory", "Memory per sandbox against count", seriesHeight, []*plot.Plot{p})}, nil
}

// legendOnTop puts the plot's legend at its top left, in small text, and
// raises the y axis so that the legend stands above the data.
func legendOnTop(p *plot.Plot) {
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.TextStyle.Font.Size = vg.Points(9)
	p.Legend.XOffs = vg.Points(8)
	p.Y.Max += 0.35 * (p.Y.Max - min(p.Y.Min, 0))
}
