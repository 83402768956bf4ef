// Command testbudget prints what `make test` cost against its budget: each
// phase (the clock stamps the recipe writes), each package (the lines `go
// test` prints and the Ginkgo suites' JSON reports) and the slowest specs,
// beside the budgets of the table in docs/development.md. It is the last
// step of `make test`, so that a change that adds tests sees what they
// cost. It fails only on a missing or malformed input, never on time: a
// slow day is not a regression, and a red CI for it would not say what to
// fix.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

func main() {
	var in inputs
	flag.StringVar(&in.budgets, "budgets", "docs/development.md", "The file whose test budget table holds the budgets.")
	flag.StringVar(&in.stamps, "stamps", "bin/test-stamps", "The clock stamps the test recipe wrote, one 'phase unix-seconds' a line.")
	flag.Var(&in.goTest, "go-test", "A file of what `go test` printed: each package's time is its line 'ok PACKAGE SECONDSs' (repeatable).")
	flag.Var(&in.suites, "ginkgo", "A Ginkgo suite's JSON report, as package=path (repeatable).")
	flag.IntVar(&in.top, "top", 20, "How many of the slowest specs to list.")
	image := flag.String("engine-image", "afe/busybox:dev", "The image whose plain `docker run` tells a fast engine from a slow one (the budgets differ); empty takes the fast engine's.")
	flag.Parse()
	if *image != "" {
		took, err := engineSpeed(*image)
		if err != nil {
			fmt.Fprintln(os.Stderr, "testbudget: the engine's speed, unknown (the fast engine's budgets hold):", err)
		}
		in.engine = took
	}
	if err := run(os.Stdout, in); err != nil {
		fmt.Fprintln(os.Stderr, "testbudget:", err)
		os.Exit(1)
	}
}

// inputs are what the report is made of.
type inputs struct {
	budgets, stamps string
	goTest          listFlag
	suites          suiteFlags
	top             int
	// engine is the time of a plain docker run (0: unknown).
	engine time.Duration
}

// listFlag is a repeatable flag.
type listFlag []string

func (l *listFlag) String() string { return strings.Join(*l, ",") }

func (l *listFlag) Set(v string) error {
	*l = append(*l, v)
	return nil
}

// suiteFlags are the -ginkgo flags: package and report path.
type suiteFlags [][2]string

func (s *suiteFlags) String() string { return fmt.Sprint(*s) }

func (s *suiteFlags) Set(v string) error {
	pkg, path, ok := strings.Cut(v, "=")
	if !ok {
		return fmt.Errorf("%q is not package=path", v)
	}
	*s = append(*s, [2]string{pkg, path})
	return nil
}

func run(w io.Writer, in inputs) error {
	fast, slow, err := readBudgets(in.budgets)
	if err != nil {
		return err
	}
	budgets, day := fast, fmt.Sprintf("a fast engine: a plain docker run took %s", in.engine.Round(10*time.Millisecond))
	switch {
	case in.engine == 0:
		day = "the engine's speed unknown: the fast engine's"
	case in.engine >= slowEngine:
		budgets, day = slow, fmt.Sprintf("a slow engine: a plain docker run took %s", in.engine.Round(10*time.Millisecond))
	}
	phases, err := readStamps(in.stamps)
	if err != nil {
		return err
	}
	var packages []timing
	for _, path := range in.goTest {
		more, err := readGoTest(path)
		if err != nil {
			return err
		}
		packages = append(packages, more...)
	}
	var specs []spec
	for _, s := range in.suites {
		took, suiteSpecs, err := readGinkgo(s[0], s[1])
		if err != nil {
			return err
		}
		if !slices.ContainsFunc(packages, func(t timing) bool { return t.Name == s[0] }) {
			packages = append(packages, timing{Name: s[0], Took: took}) // go test's line, when there is one, counts its build too
		}
		specs = append(specs, suiteSpecs...)
	}
	_, _ = fmt.Fprintf(w, "make test against its budget (docs/development.md, %q; %s):\n", strings.TrimLeft(budgetHeading, "# "), day)
	report(w, budgets, phases, packages, slowest(specs, in.top))
	return nil
}

// report prints the phases, then the packages, each against its budget,
// then the slowest specs.
func report(w io.Writer, budgets map[string]time.Duration, phases, packages []timing, specs []spec) {
	over := 0
	for _, t := range phases {
		b, ok := budgets[t.Name]
		over += line(w, t, b, ok)
	}
	quick := 0
	for _, t := range sortByTime(packages) {
		b, ok := budgets[t.Name]
		if t.Took < time.Second && (!ok || b >= time.Second) {
			quick++
			continue
		}
		if !ok {
			b, ok = budgets[otherPackages]
		}
		over += line(w, t, b, ok)
	}
	if quick > 0 {
		_, _ = fmt.Fprintf(w, "  and %d more packages, each under a second\n", quick)
	}
	if over > 0 {
		_, _ = fmt.Fprintf(w, "%d over budget: find what was added (the specs below), or make the case for a new budget in docs/development.md\n", over)
	}
	if len(specs) > 0 {
		_, _ = fmt.Fprintf(w, "the %d slowest specs:\n", len(specs))
		for i, s := range specs {
			_, _ = fmt.Fprintf(w, "  %2d. %8s  %s: %s\n", i+1, round(s.Took), s.Package, s.Text)
		}
	}
}

// line prints one timing against its budget, and returns 1 when over it.
func line(w io.Writer, t timing, budget time.Duration, ok bool) int {
	text := fmt.Sprintf("  %-34s %8s", t.Name, round(t.Took))
	switch {
	case !ok:
		_, _ = fmt.Fprintln(w, text+"   (no budget)")
	case t.Took > budget:
		_, _ = fmt.Fprintf(w, "%s / %-8s OVER by %s\n", text, round(budget), round(t.Took-budget))
		return 1
	default:
		_, _ = fmt.Fprintf(w, "%s / %s\n", text, round(budget))
	}
	return 0
}

// round is a duration to the second, as the table shows it.
func round(d time.Duration) time.Duration { return d.Round(time.Second) }
