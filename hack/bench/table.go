package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"time"
)

// sample is a set of durations of one measurement.
type sample []time.Duration

// quantile is the q-quantile by the nearest-rank method.
func (s sample) quantile(q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	sorted := slices.Clone(s)
	slices.Sort(sorted)
	rank := int(math.Ceil(q*float64(len(sorted)))) - 1
	return sorted[min(max(rank, 0), len(sorted)-1)]
}

func (s sample) median() time.Duration { return s.quantile(0.5) }
func (s sample) p95() time.Duration    { return s.quantile(0.95) }

// seconds are the durations in seconds, in the order they were measured.
func (s sample) seconds() []float64 {
	out := make([]float64, len(s))
	for i, d := range s {
		out[i] = d.Seconds()
	}
	return out
}

// row is one line of the benchmark table, with the measurements behind it
// that results.json keeps and the figures are drawn from.
type row struct {
	Scenario   string `json:"scenario"`
	Controller string `json:"controller"`
	Baseline   string `json:"baseline"`
	Ratio      string `json:"ratio"`
	// Key is the name of the scenario that made the row, as -scenarios
	// names it ("sandbox", "egress-scale"); run sets it.
	Key string `json:"key"`
	// Samples are the durations behind a timing row.
	Samples *timingSamples `json:"samples,omitempty"`
	// Ready is the creation curve behind a row of sandboxes created at
	// once.
	Ready *readyCurve `json:"ready,omitempty"`
	// Memory is the host memory per sandbox behind a row that measured
	// it, at one count or several.
	Memory *memorySeries `json:"memory,omitempty"`
}

// timingSamples are the durations a timing row summarises, each side as
// measured, in seconds.
type timingSamples struct {
	Unit string `json:"unit"`
	// ControllerName names the measured side: the controller, or runsc
	// in the runtimes scenario.
	ControllerName string `json:"controllerName"`
	// BaselineName names the side it is compared with, as the table does
	// ("sequential", "`docker exec`", "cold", "runc").
	BaselineName string    `json:"baselineName"`
	Controller   []float64 `json:"controller"`
	Baseline     []float64 `json:"baseline"`
}

// timing is the row of a scenario measured as durations: the controller's
// median and p95 against the baseline's median; the ratio compares medians.
// The row keeps both samples.
func timing(scenario string, controller, baseline sample, baselineName string) row {
	r := row{Scenario: scenario, Controller: medianP95(controller), Samples: &timingSamples{
		Unit: "s", ControllerName: "controller", BaselineName: baselineName,
		Controller: controller.seconds(), Baseline: baseline.seconds(),
	}}
	if len(baseline) == 0 {
		r.Baseline, r.Ratio = "-", "-"
		return r
	}
	r.Baseline = baselineName + " " + medianP95(baseline)
	r.Ratio = ratio(controller.median(), baseline.median())
	return r
}

func medianP95(s sample) string {
	if len(s) == 1 {
		return seconds(s[0])
	}
	return fmt.Sprintf("%s (p95 %s)", seconds(s.median()), seconds(s.p95()))
}

func seconds(d time.Duration) string {
	if d < time.Second {
		return fmt.Sprintf("%d ms", d.Milliseconds())
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func ratio(a, b time.Duration) string {
	if b <= 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fx", float64(a)/float64(b))
}

// writeTable prints the rows as one Markdown table.
func writeTable(w io.Writer, rows []row) {
	_, _ = fmt.Fprintln(w, "| Scenario | Controller | Baseline (docker CLI) | Ratio |")
	_, _ = fmt.Fprintln(w, "|---|---|---|---|")
	for _, r := range rows {
		_, _ = fmt.Fprintf(w, "| %s | %s | %s | %s |\n", r.Scenario, r.Controller, r.Baseline, r.Ratio)
	}
}
