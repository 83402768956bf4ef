package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/onsi/ginkgo/v2/types"
)

// otherPackages is the budget row that holds for each package without a
// row of its own.
const otherPackages = "each other package"

// budgetHeading is the heading of the budget table in docs/development.md.
const budgetHeading = "### Test budget"

// timing is what one phase or package took.
type timing struct {
	Name string
	Took time.Duration
}

// spec is what one Ginkgo spec took.
type spec struct {
	Package, Text string
	Took          time.Duration
}

// readBudgets reads the table under the budget heading: | part | fast
// engine | slow engine |, each budget a Go duration (11m, 90s): the
// budgets of a day the engine is fast, and of one it is slow.
func readBudgets(path string) (fast, slow map[string]time.Duration, err error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	_, table, ok := strings.Cut("\n"+string(data), "\n"+budgetHeading+"\n")
	if !ok {
		return nil, nil, fmt.Errorf("%s has no %q", path, budgetHeading)
	}
	fast, slow = map[string]time.Duration{}, map[string]time.Duration{}
	inTable := false
	for _, line := range strings.Split(table, "\n") {
		if !strings.HasPrefix(line, "|") {
			if inTable {
				break
			}
			continue
		}
		inTable = true
		cells := strings.Split(strings.Trim(line, "| "), "|")
		if len(cells) < 3 {
			return nil, nil, fmt.Errorf("%s: %q is not | part | fast engine | slow engine |", path, line)
		}
		name := strings.Trim(strings.TrimSpace(cells[0]), "`")
		f, errFast := time.ParseDuration(strings.TrimSpace(cells[1]))
		s, errSlow := time.ParseDuration(strings.TrimSpace(cells[2]))
		if errFast != nil || errSlow != nil {
			continue // the header and its rule
		}
		fast[name], slow[name] = f, s
	}
	if len(fast) == 0 {
		return nil, nil, fmt.Errorf("%s: no budget under %q", path, budgetHeading)
	}
	return fast, slow, nil
}

// readStamps reads 'phase unix-seconds' lines: each phase ("phase NAME")
// took from the stamp before it to its own; "total" from the first to the
// last.
func readStamps(path string) ([]timing, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var phases []timing
	var first, prev time.Time
	s := bufio.NewScanner(f)
	for s.Scan() {
		name, sec, ok := strings.Cut(strings.TrimSpace(s.Text()), " ")
		n, err := strconv.ParseInt(sec, 10, 64)
		if !ok || err != nil {
			return nil, fmt.Errorf("%s: %q is not 'phase unix-seconds'", path, s.Text())
		}
		at := time.Unix(n, 0)
		if first.IsZero() {
			first = at
		} else {
			phases = append(phases, timing{Name: "phase " + name, Took: at.Sub(prev)})
		}
		prev = at
	}
	if err := s.Err(); err != nil {
		return nil, err
	}
	if len(phases) == 0 {
		return nil, fmt.Errorf("%s: fewer than two stamps", path)
	}
	return append(phases, timing{Name: "total", Took: prev.Sub(first)}), nil
}

// goTestLine is a package's result line of `go test`.
var goTestLine = regexp.MustCompile(`^(?:ok|FAIL)\s+(\S+)\s+([0-9.]+)s`)

// readGoTest reads each package's time from what `go test` printed, the
// module's prefix cut. A path given as NAME=PATH names the one package of
// its file NAME (a package run twice, each with a part of its tests).
func readGoTest(path string) ([]timing, error) {
	name, path, named := strings.Cut(path, "=")
	if !named {
		path = name
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var packages []timing
	for _, line := range strings.Split(string(data), "\n") {
		m := goTestLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		sec, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", path, line, err)
		}
		pkg := strings.TrimPrefix(m[1], "afe.dev/sandbox/")
		if named {
			pkg = name
		}
		packages = append(packages, timing{Name: pkg, Took: time.Duration(sec * float64(time.Second))})
	}
	if named && len(packages) != 1 {
		return nil, fmt.Errorf("%s holds %d packages' times, not the one of %s", path, len(packages), name)
	}
	return packages, nil
}

// readGinkgo reads a Ginkgo JSON report: the suite's time and each spec's.
func readGinkgo(pkg, path string) (time.Duration, []spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, nil, err
	}
	var reports []types.Report
	if err := json.Unmarshal(data, &reports); err != nil {
		return 0, nil, fmt.Errorf("%s: %w", path, err)
	}
	var took time.Duration
	var specs []spec
	for _, r := range reports {
		took += r.RunTime
		for _, s := range r.SpecReports {
			if s.LeafNodeType != types.NodeTypeIt {
				continue
			}
			text := strings.Join(append(slices.Clone(s.ContainerHierarchyTexts), s.LeafNodeText), " ")
			specs = append(specs, spec{Package: pkg, Text: text, Took: s.RunTime})
		}
	}
	return took, specs, nil
}

// slowest returns the n slowest specs, slowest first.
func slowest(specs []spec, n int) []spec {
	specs = slices.Clone(specs)
	slices.SortStableFunc(specs, func(a, b spec) int { return cmp.Compare(b.Took, a.Took) })
	return specs[:min(n, len(specs))]
}

// sortByTime returns the timings, longest first.
func sortByTime(ts []timing) []timing {
	ts = slices.Clone(ts)
	slices.SortStableFunc(ts, func(a, b timing) int { return cmp.Compare(b.Took, a.Took) })
	return ts
}
