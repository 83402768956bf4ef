package e2e

import (
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/onsi/gomega/gexec"

	afev1 "afe.dev/sandbox/api/v1alpha1"
	"afe.dev/sandbox/test/dockertest"
)

// The dashboard (config/grafana) and the alerts (config/prometheus) against
// the real thing: Debian's Prometheus, on loopback, scrapes the suite's
// manager every second and loads the plain rules file while a ticket lives
// its whole life (Ready, a Run, an exec through the access API, a lost
// container, usage measured, suspended, Done and cleaned up); then every
// panel's query is evaluated through Prometheus' HTTP API over that life.
var _ = Describe("Monitoring a ticket's life with Prometheus", Ordered, func() {
	var (
		ns   string
		prom *promServer
	)

	BeforeAll(func() {
		prom = startPrometheus()
		ns = fmt.Sprintf("e2e-mon-%d", os.Getpid())
		mustKubectl("create", "namespace", ns)
	})

	AfterAll(func() {
		if prom != nil {
			prom.stop()
		}
		_, _ = kubectl("delete", "namespace", ns, "--wait=false")
	})

	It("serves every dashboard panel's series and evaluates every alert", func() {
		start := time.Now().Add(-2 * time.Second)
		By("scraping the manager")
		Eventually(prom.values).WithArguments(`up{job="afe"}`).Should(ConsistOf(1.0))

		By("living a ticket's life: Ready")
		mustKubectlStdin(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Ticket
metadata:
  name: watched
spec:
  sandbox:
    image: `+dockertest.TestImage+`
`, "apply", "-n", ns, "-f", "-")
		mustKubectl("wait", "-n", ns, "--for=condition=Ready", "ticket/watched", "--timeout=90s")

		By("a Run and an exec through the access API")
		mustKubectlStdin(`apiVersion: sandbox.afe.dev/v1alpha1
kind: Run
metadata:
  name: hello
spec:
  sandboxRef:
    name: watched
  script: |
    echo '{"answer": 42}'
`, "apply", "-n", ns, "-f", "-")
		mustKubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}=Completed", "run/hello", "--timeout=60s")
		afe := pluginWithoutDocker(ns)
		_, errs, code := afe("", "exec", "watched", "--", "true")
		Expect(code).To(BeZero(), errs)

		By("a lost container, recreated")
		Expect(dockertest.RemoveContainer("afe-" + ns + ".watched")).To(Succeed())
		mustKubectl("wait", "-n", ns, "--for=jsonpath={.status.recreations}=1", "sandbox/watched", "--timeout=60s")
		mustKubectl("wait", "-n", ns, "--for=condition=Ready", "sandbox/watched", "--timeout=60s")

		By("its usage measured (every --usage-period, 30 s here), and served to kubectl afe top")
		Eventually(prom.values, 90*time.Second, time.Second).
			WithArguments(`afe_sandbox_cpu_seconds_total{namespace="` + ns + `"}`).ShouldNot(BeEmpty())
		top, errs, code := afe("", "top")
		Expect(code).To(BeZero(), errs)
		Expect(top).To(MatchRegexp(`(?m)^watched\s+watched\s+[0-9]`), "its figures, from the manager's memory")
		// The CPU and Network panels take a rate over 15 s, which needs two
		// scrapes of a series; suspending removes the sandbox's series.
		for _, counter := range []string{"afe_sandbox_cpu_seconds_total", "afe_sandbox_network_receive_bytes_total"} {
			Eventually(prom.values, 30*time.Second, time.Second).
				WithArguments(`rate(` + counter + `{namespace="` + ns + `"}[15s])`).ShouldNot(BeEmpty())
		}

		By("suspended, then Done and cleaned up")
		mustKubectl("patch", "-n", ns, "sandbox/watched", "--type=merge", "-p", `{"spec":{"suspend":true}}`)
		mustKubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}="+string(afev1.SandboxSuspended), "sandbox/watched", "--timeout=60s")
		Eventually(prom.values).WithArguments(`afe_sandbox_status{namespace="` + ns + `",reason="Suspended"}`).ShouldNot(BeEmpty())
		mustKubectl("patch", "-n", ns, "ticket/watched", "--type=merge", "-p", `{"spec":{"state":"Done"}}`)
		mustKubectl("wait", "-n", ns, "--for=jsonpath={.status.phase}="+string(afev1.TicketFinished), "ticket/watched", "--timeout=90s")
		Eventually(prom.values).WithArguments(`afe_ticket_done_to_cleaned_seconds_count`).Should(ContainElement(BeNumerically(">", 0)))

		By("evaluating every panel's query over the life")
		// Scrapes and rule evaluations go on: what has no data yet is
		// looked at again, over the life up to then.
		// Queries that may have no data after this life: it has no egress.
		mayBeEmpty := func(expr string) bool { return strings.Contains(expr, `egress="true"`) }
		queries := dashboardQueries()
		var served map[string]bool
		Eventually(func(g Gomega) {
			end := time.Now()
			served = prom.metricNames()
			for _, name := range []string{"afe_sandbox_status", "afe_sandbox_status_recreations", "afe_docker_up", "afe_access_requests_total"} {
				g.Expect(served).To(HaveKey(name))
			}
			vars := strings.NewReplacer("$__rate_interval", "15s", "$__interval", "1s", "$namespace", ".*",
				"$__range", strconv.Itoa(int(end.Sub(start).Seconds())+1)+"s")
			var failures []string
			for _, q := range queries {
				expr := vars.Replace(q.expr)
				for _, name := range metricNamesIn(expr) {
					if !served[name] {
						failures = append(failures, fmt.Sprintf("%s: %s names %s, which the manager does not serve", q.panel, q.expr, name))
					}
				}
				series, err := prom.rangeQuery(expr, start, end)
				switch {
				case err != nil:
					failures = append(failures, fmt.Sprintf("%s: %s: %v", q.panel, q.expr, err))
				case !hasNumber(series) && !mayBeEmpty(expr):
					failures = append(failures, fmt.Sprintf("%s: %s has no data after a ticket's life", q.panel, q.expr))
				}
			}
			g.Expect(failures).To(BeEmpty(), strings.Join(failures, "\n"))
		}, 30*time.Second, time.Second).Should(Succeed())

		By("loading and evaluating every alert, on series the manager serves")
		rules := prom.rules()
		Expect(rules).To(HaveLen(13))
		// Series of others: the API server's, and the warm pools' (not
		// served until they are merged).
		external := map[string]bool{"aggregator_unavailable_apiservice": true, "afe_pool_members": true, "afe_pool_claims_total": true}
		for _, r := range rules {
			Expect(r.Health).To(Equal("ok"), "%s: %s", r.Name, r.LastError)
			for _, name := range metricNamesIn(r.Query) {
				Expect(served[name] || external[name]).To(BeTrue(), "alert %s reads %s, which the manager does not serve", r.Name, name)
			}
		}
	})
})

// promServer is Debian's prometheus, started on loopback for one test.
type promServer struct {
	session *gexec.Session
	base    string
}

// startPrometheus starts prometheus scraping the suite's manager every
// second, with the plain rules file. Without the binary (make promtool
// installs it) the spec is skipped, and fails under CI.
func startPrometheus() *promServer {
	bin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") != "" {
			Fail("prometheus is not installed (make promtool installs Debian's package)")
		}
		Skip("prometheus is not installed (make promtool installs Debian's package)")
	}
	dir := GinkgoT().TempDir()
	rules, err := filepath.Abs(filepath.Join(root, "config", "prometheus", "afe-sandbox.rules.yaml"))
	Expect(err).NotTo(HaveOccurred())
	config := fmt.Sprintf(`global:
  scrape_interval: 1s
  evaluation_interval: 1s
rule_files: [%q]
scrape_configs:
  - job_name: afe
    honor_labels: true
    static_configs:
      - targets: [%q]
`, rules, metricsAddr)
	Expect(os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600)).To(Succeed())
	addr := freeAddr()
	session, err := gexec.Start(exec.Command(bin,
		"--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+addr,
		"--log.level=warn",
	), GinkgoWriter, GinkgoWriter)
	Expect(err).NotTo(HaveOccurred())
	p := &promServer{session: session, base: "http://" + addr}
	Eventually(func() int {
		resp, err := http.Get(p.base + "/-/ready")
		if err != nil {
			return 0
		}
		_ = resp.Body.Close()
		return resp.StatusCode
	}, 30*time.Second).Should(Equal(http.StatusOK))
	return p
}

func (p *promServer) stop() {
	p.session.Interrupt()
	Eventually(p.session, 20*time.Second).Should(gexec.Exit())
}

// get calls the HTTP API and decodes its data, or returns its error.
func (p *promServer) get(path string, params url.Values, data any) error {
	resp, err := http.Get(p.base + path + "?" + params.Encode())
	if err != nil {
		return err
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Status    string          `json:"status"`
		ErrorType string          `json:"errorType"`
		Error     string          `json:"error"`
		Data      json.RawMessage `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return fmt.Errorf("%s: %s: %w", path, resp.Status, err)
	}
	if body.Status != "success" {
		return fmt.Errorf("%s: %s: %s", body.ErrorType, resp.Status, body.Error)
	}
	return json.Unmarshal(body.Data, data)
}

// promSeries is one series of a query's result: its samples as
// [time, "value"] pairs (one for an instant query).
type promSeries struct {
	Metric map[string]string `json:"metric"`
	Value  []any             `json:"value"`
	Values [][]any           `json:"values"`
}

// values are the values of an instant query's series now.
func (p *promServer) values(query string) ([]float64, error) {
	var data struct {
		Result []promSeries `json:"result"`
	}
	if err := p.get("/api/v1/query", url.Values{"query": {query}}, &data); err != nil {
		return nil, err
	}
	var out []float64
	for _, s := range data.Result {
		if len(s.Value) == 2 {
			v, _ := strconv.ParseFloat(fmt.Sprint(s.Value[1]), 64)
			out = append(out, v)
		}
	}
	return out, nil
}

func (p *promServer) rangeQuery(query string, start, end time.Time) ([]promSeries, error) {
	var data struct {
		Result []promSeries `json:"result"`
	}
	err := p.get("/api/v1/query_range", url.Values{"query": {query},
		"start": {strconv.FormatInt(start.Unix(), 10)}, "end": {strconv.FormatInt(end.Unix()+1, 10)}, "step": {"1"}}, &data)
	return data.Result, err
}

// hasNumber is true when some sample of the series is a number (not NaN):
// a quantile of no observation is NaN, and counts as no data.
func hasNumber(series []promSeries) bool {
	for _, s := range series {
		for _, v := range s.Values {
			if f, err := strconv.ParseFloat(fmt.Sprint(v[1]), 64); err == nil && !math.IsNaN(f) {
				return true
			}
		}
	}
	return false
}

// metricNames are the names of the series Prometheus holds, less its own.
func (p *promServer) metricNames() map[string]bool {
	var names []string
	Expect(p.get("/api/v1/label/__name__/values", url.Values{}, &names)).To(Succeed())
	out := map[string]bool{}
	for _, n := range names {
		if n != "up" && !strings.HasPrefix(n, "scrape_") && !strings.HasPrefix(n, "ALERTS") {
			out[n] = true
		}
	}
	return out
}

type promRule struct {
	Name      string `json:"name"`
	Query     string `json:"query"`
	Health    string `json:"health"`
	LastError string `json:"lastError"`
}

func (p *promServer) rules() []promRule {
	var data struct {
		Groups []struct {
			Rules []promRule `json:"rules"`
		} `json:"groups"`
	}
	Expect(p.get("/api/v1/rules", url.Values{}, &data)).To(Succeed())
	var out []promRule
	for _, g := range data.Groups {
		out = append(out, g.Rules...)
	}
	return out
}

type dashboardQuery struct{ panel, expr string }

// dashboardQueries are the queries of every panel of the dashboard.
func dashboardQueries() []dashboardQuery {
	data, err := os.ReadFile(filepath.Join(root, "config", "grafana", "afe-sandbox.json"))
	Expect(err).NotTo(HaveOccurred())
	var d struct {
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
	}
	Expect(json.Unmarshal(data, &d)).To(Succeed())
	var out []dashboardQuery
	for _, p := range d.Panels {
		for _, t := range p.Targets {
			out = append(out, dashboardQuery{panel: p.Title, expr: t.Expr})
		}
	}
	Expect(len(out)).To(BeNumerically(">=", 20))
	return out
}

var (
	promStrings  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)
	promMatchers = regexp.MustCompile(`\{[^}]*\}`)
	promRanges   = regexp.MustCompile(`\[[^\]]*\]`)
	promGrouping = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promIdent    = regexp.MustCompile(`[A-Za-z_:][A-Za-z0-9_:]*`)
	promKeywords = map[string]bool{"and": true, "or": true, "unless": true, "bool": true, "offset": true,
		"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true,
		"inf": true, "nan": true, "Inf": true, "NaN": true}
)

// metricNamesIn are the metric names a PromQL expression selects: its
// identifiers that are not functions, keywords, label names or numbers.
func metricNamesIn(expr string) []string {
	s := promStrings.ReplaceAllString(expr, `""`)
	s = promMatchers.ReplaceAllString(s, " ")
	s = promRanges.ReplaceAllString(s, " ")
	s = promGrouping.ReplaceAllString(s, " ")
	seen := map[string]bool{}
	for _, loc := range promIdent.FindAllStringIndex(s, -1) {
		name := s[loc[0]:loc[1]]
		if loc[0] > 0 && strings.ContainsAny(s[loc[0]-1:loc[0]], "0123456789.") {
			continue // an exponent or a unit of a number
		}
		if rest := strings.TrimLeft(s[loc[1]:], " \n\t"); strings.HasPrefix(rest, "(") || promKeywords[name] {
			continue
		}
		seen[name] = true
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func TestMetricNamesIn(t *testing.T) {
	for expr, want := range map[string]string{
		`sum by (le, egress) (rate(afe_sandbox_ready_seconds_bucket{egress="true",le=~"1|1[.]0"}[15s]))`:                "afe_sandbox_ready_seconds_bucket",
		`count(max by (namespace, sandbox) (max_over_time(x_total[1m]) - min_over_time(x_total[1m])) > 0) or vector(0)`: "x_total",
		`a / on (job) group_left (pod) b > bool 1e3`:                                                                    "a b",
		`histogram_quantile(0.9, rate(workqueue_queue_duration_seconds_bucket{controller=~"a|b"}[5m])) > 10`:            "workqueue_queue_duration_seconds_bucket",
		`-sum by (namespace) (rate(rx{namespace=~".*"}[15s]))`:                                                          "rx",
	} {
		if got := strings.Join(metricNamesIn(expr), " "); got != want {
			t.Errorf("metricNamesIn(%s) = %q, want %q", expr, got, want)
		}
	}
}
