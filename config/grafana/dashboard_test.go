// Package grafana holds the manager's Grafana dashboard, afe-sandbox.json,
// and its ConfigMap for Grafana's sidecar. This test checks the dashboard's
// shape (what Grafana needs to import it anywhere: a data source variable,
// panels that do not overlap, queries with their references) and dry-runs
// the ConfigMap on an API server. test/e2e evaluates every query against a
// real Prometheus scraping a live manager through a ticket's life.
package grafana

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"afe.dev/sandbox/hack/controlplane"
	"afe.dev/sandbox/test/testenv"
)

type target struct {
	Datasource struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	Expr         string `json:"expr"`
	RefID        string `json:"refId"`
	LegendFormat string `json:"legendFormat"`
}

type panel struct {
	ID          int    `json:"id"`
	Type        string `json:"type"`
	Title       string `json:"title"`
	Description string `json:"description"`
	Datasource  *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
	GridPos struct{ H, W, X, Y int } `json:"gridPos"`
	Targets []target                 `json:"targets"`
}

type dashboard struct {
	UID        string  `json:"uid"`
	Title      string  `json:"title"`
	Panels     []panel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

func load(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile("afe-sandbox.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("afe-sandbox.json: %v", err)
	}
	return d
}

// variable is a Grafana variable in a query: $name or ${name}.
var variable = regexp.MustCompile(`\$\{?([A-Za-z_]+)\}?`)

func TestDashboardShape(t *testing.T) {
	d := load(t)
	if d.UID != "afe-sandbox" || d.Title == "" {
		t.Errorf("uid %q, title %q: want the uid afe-sandbox and a title", d.UID, d.Title)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		vars[v.Name] = v.Type
	}
	if vars["datasource"] != "datasource" || vars["namespace"] != "query" {
		t.Errorf("variables %v: want a datasource variable (no data source is hard-coded) and a namespace one", vars)
	}
	// Grafana's own variables, and the dashboard's.
	known := map[string]bool{"__rate_interval": true, "__range": true, "__interval": true, "namespace": true}
	ids := map[int]bool{}
	cells := map[[2]int]string{}
	queries := 0
	for _, p := range d.Panels {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		g := p.GridPos
		if g.W <= 0 || g.H <= 0 || g.X < 0 || g.X+g.W > 24 {
			t.Errorf("panel %q: gridPos %+v outside Grafana's 24 columns", p.Title, g)
		}
		for x := g.X; x < g.X+g.W; x++ {
			for y := g.Y; y < g.Y+g.H; y++ {
				if other, ok := cells[[2]int{x, y}]; ok {
					t.Errorf("panel %q overlaps %q at %d,%d", p.Title, other, x, y)
				}
				cells[[2]int{x, y}] = p.Title
			}
		}
		if p.Type == "row" {
			continue
		}
		if p.Title == "" || len(p.Description) < 30 {
			t.Errorf("panel %d (%q): a title and a description that says what it reads are needed", p.ID, p.Title)
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q: its data source must be ${datasource}", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		refs := map[string]bool{}
		for _, q := range p.Targets {
			queries++
			if q.Expr == "" || q.RefID == "" || refs[q.RefID] || q.Datasource.UID != "${datasource}" {
				t.Errorf("panel %q: query %q (refId %q) needs an expression, a refId of its own and the ${datasource}", p.Title, q.Expr, q.RefID)
			}
			refs[q.RefID] = true
			for _, m := range variable.FindAllStringSubmatch(q.Expr, -1) {
				if !known[m[1]] {
					t.Errorf("panel %q: query %q uses $%s, which is not defined", p.Title, q.Expr, m[1])
				}
			}
		}
	}
	if queries < 20 {
		t.Errorf("%d queries: the dashboard was not read as expected", queries)
	}
}

// TestConfigMapPassesAServerSideDryRun applies config/grafana with
// --dry-run=server on a local API server.
func TestConfigMapPassesAServerSideDryRun(t *testing.T) {
	assets := testenv.RequireAssets(t, "kube-apiserver", "etcd")
	if _, err := exec.LookPath("kubectl"); err != nil {
		t.Fatal("kubectl is needed")
	}
	cp, err := controlplane.Start(t.TempDir(), assets)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	dir, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("kubectl", "--kubeconfig", cp.Kubeconfig, "apply", "-n", "default", "-k", dir, "--dry-run=server").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "configmap/afe-sandbox-dashboard created (server dry run)") {
		t.Fatalf("kubectl apply -k config/grafana --dry-run=server: %v\n%s", err, out)
	}
	rendered, err := exec.Command("kubectl", "kustomize", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v\n%s", err, rendered)
	}
	for _, want := range []string{"grafana_dashboard: \"1\"", "afe-sandbox.json: |"} {
		if !strings.Contains(string(rendered), want) {
			t.Errorf("the ConfigMap lacks %q:\n%.600s", want, rendered)
		}
	}
}
