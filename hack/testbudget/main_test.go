package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/onsi/ginkgo/v2/types"
)

const budgetDoc = `# Development

### Test budget

| part | fast engine | slow engine |
|---|---|---|
| phase prerequisites | 3m | 4m |
| phase controllers | 10m | 15m |
| controllers | 10m | 15m |
| ` + "`test/e2e`" + ` | 9m | 13m |
| each other package | 2m | 3m |
| total | 30m | 45m |

After the table.
| not | 1s | 1s |
`

func write(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadBudgetsReadsOnlyTheTable(t *testing.T) {
	fast, slow, err := readBudgets(write(t, t.TempDir(), "dev.md", budgetDoc))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]time.Duration{
		"phase prerequisites": 3 * time.Minute, "phase controllers": 10 * time.Minute, "controllers": 10 * time.Minute, "test/e2e": 9 * time.Minute,
		otherPackages: 2 * time.Minute, "total": 30 * time.Minute,
	}
	if d := cmp.Diff(want, fast); d != "" {
		t.Errorf("a fast engine's budgets (-want +got):\n%s", d)
	}
	if slow["total"] != 45*time.Minute || slow["test/e2e"] != 13*time.Minute || len(slow) != len(want) {
		t.Errorf("a slow engine's budgets: %v", slow)
	}
}

func TestReadRefusesMalformedInputs(t *testing.T) {
	dir := t.TempDir()
	cases := map[string]func() error{
		"no budget heading": func() error { _, _, err := readBudgets(write(t, dir, "a.md", "# Development\n")); return err },
		"a row without the slow engine's budget": func() error {
			_, _, err := readBudgets(write(t, dir, "b.md", budgetHeading+"\n\n| part | fast engine |\n| total | 20m |\n"))
			return err
		},
		"a stamp without time": func() error {
			_, err := readStamps(write(t, dir, "s1", "start 100\nsuites\n"))
			return err
		},
		"one stamp": func() error { _, err := readStamps(write(t, dir, "s2", "start 100\n")); return err },
		"a named file of two packages": func() error {
			_, err := readGoTest("e2e=" + write(t, dir, "two.log", "ok  \ta\t1.0s\nok  \tb\t2.0s\n"))
			return err
		},
		"a report that is not JSON": func() error {
			_, _, err := readGinkgo("controllers", write(t, dir, "r.json", "{"))
			return err
		},
	}
	for name, read := range cases {
		t.Run(name, func(t *testing.T) {
			if read() == nil {
				t.Error("no error")
			}
		})
	}
}

func TestReportPutsEachPhaseAndPackageAgainstItsBudget(t *testing.T) {
	dir := t.TempDir()
	budgets := write(t, dir, "dev.md", budgetDoc)
	stamps := write(t, dir, "stamps", "start 1000\nprerequisites 1120\ncontrollers 1900\npackages 2500\n")
	goTest := write(t, dir, "go-test.log", "ok  \tafe.dev/sandbox/access\t150.5s\nok  \tafe.dev/sandbox/internal/naming\t0.008s\n?   \tafe.dev/sandbox/cmd\t[no test files]\n"+
		"--- FAIL: TestX (0.00s)\nFAIL\tafe.dev/sandbox/docker\t30.0s\n")
	e2e := write(t, dir, "go-test-e2e.log", "ok  \tafe.dev/sandbox/test/e2e\t600.0s\n")
	second := write(t, dir, "go-test-e2e-own.log", "ok  \tafe.dev/sandbox/test/e2e\t300.0s\n")
	report, err := json.Marshal([]types.Report{{RunTime: 11 * time.Minute, SpecReports: types.SpecReports{
		{LeafNodeType: types.NodeTypeIt, ContainerHierarchyTexts: []string{"Folder"}, LeafNodeText: "recreates", RunTime: 90 * time.Second},
		{LeafNodeType: types.NodeTypeBeforeSuite, RunTime: time.Hour},
		{LeafNodeType: types.NodeTypeIt, ContainerHierarchyTexts: []string{"Egress", "under runsc"}, LeafNodeText: "scales", RunTime: 200 * time.Second},
		{LeafNodeType: types.NodeTypeIt, LeafNodeText: "quick", RunTime: time.Second},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	ginkgo := write(t, dir, "controllers.json", string(report))

	in := inputs{budgets: budgets, stamps: stamps, goTest: listFlag{goTest, e2e, "test/e2e own-plane=" + second}, suites: suiteFlags{{"controllers", ginkgo}, {"test/e2e", ginkgo}}, top: 2}
	var slowDay strings.Builder
	in.engine = 700 * time.Millisecond
	if err := run(&slowDay, in); err != nil {
		t.Fatal(err)
	}
	if words := strings.Join(strings.Fields(slowDay.String()), " "); !strings.Contains(words, "a slow engine: a plain docker run took 700ms") ||
		!strings.Contains(words, "phase controllers 13m0s / 15m0s phase packages 10m0s (no budget) total 25m0s / 45m0s") {
		t.Errorf("a slow engine's report does not hold its budgets:\n%s", slowDay.String())
	}
	var out strings.Builder
	in.engine = 250 * time.Millisecond
	if err := run(&out, in); err != nil {
		t.Fatal(err)
	}
	got := out.String()
	words := strings.Join(strings.Fields(got), " ")
	for _, want := range []string{
		"phase prerequisites 2m0s / 3m0s phase controllers 13m0s / 10m0s OVER by 3m0s phase packages 10m0s (no budget) total 25m0s / 30m0s",
		"controllers 11m0s / 10m0s OVER by 1m0s test/e2e 10m0s / 9m0s OVER by 1m0s test/e2e own-plane 5m0s / 2m0s OVER by 3m0s access 2m31s / 2m0s OVER by 31s docker 30s / 2m0s",
		"a fast engine: a plain docker run took 250ms",
		"and 1 more packages, each under a second",
		"5 over budget",
		"1. 3m20s controllers: Egress under runsc scales 2. 3m20s test/e2e: Egress under runsc scales",
	} {
		if !strings.Contains(words, want) {
			t.Errorf("the report lacks %q:\n%s", want, got)
		}
	}
	if strings.Count(got, "\n  test/e2e  ") != 1 {
		t.Errorf("a package with a go test line and a Ginkgo report is listed other than once:\n%s", got)
	}
	if strings.Contains(got, "quick") || strings.Contains(got, "1h0m0s") {
		t.Errorf("the report lists more than the 2 slowest specs, or a setup node:\n%s", got)
	}
}
