package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	"github.com/kube-reclaim/kube-reclaim/internal/dashboards"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

const monitoringDir = "deploy/components/monitoring"

// promRule is the part of a PrometheusRule rule the tests read.
type promRule struct {
	Record      string            `json:"record"`
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

// monitoringRules returns the groups of the shipped PrometheusRule, as
// parsed rules and as the raw YAML promtool reads.
func monitoringRules(t *testing.T) ([]promRule, []byte) {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(root, monitoringDir, "prometheusrule.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var raw struct {
		Spec struct {
			Groups []map[string]any `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	rulesFile, err := yaml.Marshal(map[string]any{"groups": raw.Spec.Groups})
	if err != nil {
		t.Fatal(err)
	}
	var typed struct {
		Spec struct {
			Groups []struct {
				Rules []promRule `json:"rules"`
			} `json:"groups"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &typed); err != nil {
		t.Fatal(err)
	}
	var rules []promRule
	for _, g := range typed.Spec.Groups {
		rules = append(rules, g.Rules...)
	}
	if len(rules) == 0 {
		t.Fatal("the PrometheusRule has no rules")
	}
	return rules, rulesFile
}

// dashboardExprs returns every query of the committed dashboards.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, dashboards.Dir, "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards in %s: %v", dashboards.Dir, err)
	}
	var exprs []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			Panels []struct {
				Targets []struct {
					Expr string `json:"expr"`
				} `json:"targets"`
			} `json:"panels"`
		}
		if err := json.Unmarshal(data, &d); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, p := range d.Panels {
			for _, q := range p.Targets {
				exprs = append(exprs, q.Expr)
			}
		}
	}
	return exprs
}

func promtool(t *testing.T) *cluster.Promtool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	p, err := cluster.EnsurePromtool(ctx, os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// runTool runs bin in dir and returns its combined output.
func runTool(t *testing.T, dir, bin string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestMonitoringRules runs promtool on the shipped PrometheusRule: its
// groups pass `promtool check rules`, and every alert fires on the input
// series of testdata/monitoring-rules-test.yaml meant to fire it and stays
// quiet on those meant not to (`promtool test rules`).
func TestMonitoringRules(t *testing.T) {
	pt := promtool(t)
	rules, rulesFile := monitoringRules(t)
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "rules.yaml"), rulesFile, 0o644); err != nil {
		t.Fatal(err)
	}
	testFile, err := os.ReadFile(filepath.Join("testdata", "monitoring-rules-test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "test.yaml"), testFile, 0o644); err != nil {
		t.Fatal(err)
	}

	out, err := runTool(t, dir, pt.Promtool, "check", "rules", "rules.yaml")
	t.Logf("promtool check rules:\n%s", out)
	if err != nil {
		t.Fatalf("promtool check rules: %v", err)
	}
	out, err = runTool(t, dir, pt.Promtool, "test", "rules", "test.yaml")
	t.Logf("promtool test rules:\n%s", out)
	if err != nil {
		t.Fatalf("promtool test rules: %v", err)
	}

	// Every alert is tested both ways, each of its severities firing; and
	// it carries what the runbook and the pager need.
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []struct {
					ExpLabels map[string]string `json:"exp_labels"`
				} `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(testFile, &tests); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) == 0 {
				quiet[a.Alertname] = true
			}
			for _, e := range a.ExpAlerts {
				fires[a.Alertname+"/"+e.ExpLabels["severity"]] = true
			}
		}
	}
	for _, r := range rules {
		if r.Alert == "" {
			continue
		}
		sev := r.Labels["severity"]
		if !fires[r.Alert+"/"+sev] || !quiet[r.Alert] {
			t.Errorf("alert %s (%s): tested firing %v, tested quiet %v; want both", r.Alert, sev, fires[r.Alert+"/"+sev], quiet[r.Alert])
		}
		if !slices.Contains([]string{"critical", "warning", "info"}, sev) {
			t.Errorf("alert %s: severity %q, want critical, warning or info", r.Alert, sev)
		}
		for _, a := range []string{"summary", "description", "runbook_url"} {
			if strings.TrimSpace(r.Annotations[a]) == "" {
				t.Errorf("alert %s: no %s annotation", r.Alert, a)
			}
		}
	}
}

const runbookURL = "https://github.com/kube-reclaim/kube-reclaim/blob/main/docs/runbook.md#"

// runbookSections returns the body of every "## " section of a runbook,
// by heading.
func runbookSections(runbook string) map[string]string {
	sections := map[string]string{}
	for _, part := range strings.Split(runbook, "\n## ")[1:] {
		heading, body, _ := strings.Cut(part, "\n")
		sections[strings.TrimSpace(heading)] = body
	}
	return sections
}

// runbookProblems lists what the runbook lacks for the alerts: a section
// named after each, with Means, Check and Fix in that order, that its
// runbook_url points at (GitHub's anchor of a heading is its lower case);
// and a section that names no alert (left behind by a rename).
func runbookProblems(rules []promRule, runbook string) []string {
	sections := runbookSections(runbook)
	var bad []string
	alerts := map[string]bool{}
	for _, r := range rules {
		if r.Alert == "" {
			continue
		}
		alerts[r.Alert] = true
		if want := runbookURL + strings.ToLower(r.Alert); r.Annotations["runbook_url"] != want {
			bad = append(bad, fmt.Sprintf("alert %s: runbook_url %q, want %q", r.Alert, r.Annotations["runbook_url"], want))
		}
		body, ok := sections[r.Alert]
		if !ok {
			bad = append(bad, fmt.Sprintf("alert %s: no section \"## %s\" in the runbook", r.Alert, r.Alert))
			continue
		}
		at := 0
		for _, part := range []string{"**Means:**", "**Check:**", "**Fix:**"} {
			i := strings.Index(body[at:], part)
			if i < 0 {
				bad = append(bad, fmt.Sprintf("alert %s: its runbook section has no %s after the parts before it", r.Alert, part))
				break
			}
			at += i + len(part)
		}
	}
	for name := range sections {
		if !alerts[name] {
			bad = append(bad, fmt.Sprintf("runbook section %q names no alert", name))
		}
	}
	sort.Strings(bad)
	return bad
}

// TestMonitoringRunbook: every alert of the shipped PrometheusRule has a
// section in docs/runbook.md with what it means, what to check and how to
// fix it, and its runbook_url points there; every section is an alert's.
func TestMonitoringRunbook(t *testing.T) {
	rules, _ := monitoringRules(t)
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	runbook, err := os.ReadFile(filepath.Join(root, "docs", "runbook.md"))
	if err != nil {
		t.Fatal(err)
	}
	// Positive control: the same check reports a section without Fix, one
	// missing, a wrong runbook_url and a section of no alert.
	control := []promRule{
		{Alert: "KubeReclaimA", Annotations: map[string]string{"runbook_url": runbookURL + "kubereclaima"}},
		{Alert: "KubeReclaimB", Annotations: map[string]string{"runbook_url": runbookURL + "kubereclaimb"}},
		{Alert: "KubeReclaimC", Annotations: map[string]string{"runbook_url": runbookURL + "elsewhere"}},
	}
	controlBook := "# r\n\n## KubeReclaimA\n\n**Means:** m\n\n**Check:** c\n\n## KubeReclaimC\n\n**Means:** m **Check:** c **Fix:** f\n\n## KubeReclaimGone\n\n**Means:** m\n"
	if got := runbookProblems(control, controlBook); len(got) != 4 {
		t.Fatalf("the check missed a broken runbook: %q", got)
	}
	for _, b := range runbookProblems(rules, string(runbook)) {
		t.Error(b)
	}
	n := 0
	for _, r := range rules {
		if r.Alert != "" {
			n++
		}
	}
	t.Logf("%d alert rules, %d runbook sections", n, len(runbookSections(string(runbook))))
}

// promqlResult is what promqlnames prints for one expression.
type promqlResult struct {
	Expr  string   `json:"expr"`
	Names []string `json:"names"`
	Error string   `json:"error"`
}

// selectedNames parses exprs with the Prometheus parser (promqlnames).
func selectedNames(t *testing.T, bin string, exprs []string) []promqlResult {
	t.Helper()
	in, err := json.Marshal(exprs)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(context.Background(), bin)
	cmd.Stdin = bytes.NewReader(in)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("promqlnames: %v: %s", err, stderr.String())
	}
	var res []promqlResult
	if err := json.Unmarshal(out, &res); err != nil {
		t.Fatal(err)
	}
	if len(res) != len(exprs) {
		t.Fatalf("promqlnames answered %d results for %d expressions", len(res), len(exprs))
	}
	return res
}

// unknownSeries lists, for every expression, the parse error or each
// selected name that is not in known.
func unknownSeries(results []promqlResult, known map[string]bool) []string {
	var bad []string
	for _, r := range results {
		if r.Error != "" {
			bad = append(bad, fmt.Sprintf("%q does not parse: %s", r.Expr, r.Error))
			continue
		}
		for _, n := range r.Names {
			if !known[n] {
				bad = append(bad, fmt.Sprintf("%q selects %s, which no role exports", r.Expr, n))
			}
		}
	}
	return bad
}

// exportedSeries reads ep's /metrics and returns the names of its series:
// a histogram's _bucket, _sum and _count, a summary's own name, _sum and
// _count.
func exportedSeries(t *testing.T, ep stack.MetricsEndpoint) map[string]bool {
	t.Helper()
	families := scrapeFamilies(t, ep)
	names := map[string]bool{}
	for name, f := range families {
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		case dto.MetricType_SUMMARY:
			names[name], names[name+"_sum"], names[name+"_count"] = true, true, true
		default:
			names[name] = true
		}
	}
	return names
}

// scrapeFamilies reads ep's /metrics once and parses it.
func scrapeFamilies(t *testing.T, ep stack.MetricsEndpoint) map[string]*dto.MetricFamily {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body, err := stack.GetMetrics(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	return families
}

// gaugeValue reads the value of the gauge name whose labels include labels
// from ep's /metrics ("" matches a label that is absent or empty).
func gaugeValue(t *testing.T, ep stack.MetricsEndpoint, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	families := scrapeFamilies(t, ep)
	for _, m := range families[name].GetMetric() {
		have := map[string]string{}
		for _, l := range m.GetLabel() {
			have[l.GetName()] = l.GetValue()
		}
		match := true
		for k, v := range labels {
			match = match && have[k] == v
		}
		if match {
			return m.GetGauge().GetValue(), true
		}
	}
	return 0, false
}

// TestMonitoringNamesExportedSeries: every expression of the PrometheusRule
// and of the dashboards parses with the Prometheus parser and selects only
// series that the real roles export, read from their /metrics over HTTPS, or
// that a recording rule makes (and up, which Prometheus adds to every
// target). A renamed metric fails here.
func TestMonitoringNamesExportedSeries(t *testing.T) {
	pt := promtool(t)
	rules, _ := monitoringRules(t)
	exprs := dashboardExprs(t)
	known := map[string]bool{"up": true}
	for _, r := range rules {
		exprs = append(exprs, r.Expr)
		if r.Record != "" {
			known[r.Record] = true
		}
	}

	ctx := context.Background()
	c := cluster.StartForTest(t, cluster.Options{HeartbeatInterval: 4 * time.Second, NoMetricsServer: true, NoScheduler: true})
	const ns = "monitoring"
	framework.CreateNamespace(t, c, ns)
	nodes := framework.AddReadyNodes(t, c, 1, cluster.NodeSpec{NamePrefix: "mon", CPU: resource.MustParse("16"), Memory: resource.MustParse("64Gi")}, time.Minute)

	// The request policy needs no usage samples, so its room counts as
	// measured: capped at a tenth of allocatable the node offers 1.6 CPU,
	// and a reclaimed pod holding 4 puts it over its room, which dry-run
	// eviction counts. Labelled counters have no series before their first
	// event. The webhook reads the same file, so that it exports its
	// policy reloads.
	cfg := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(cfg, []byte("default:\n  policy: request\n  cpu:\n    maxRatio: 0.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	wh := registerWebhook(t, c, "--publisher-lease-name=", "--config="+cfg)
	wh.waitNodeReview(t, time.Minute)
	pub := framework.StartRole(t, c, "publisher", "publisher", "--config="+cfg, "--period=2s", "--per-node-metrics", "--leader-elect=false",
		"--eviction=dry-run", "--eviction-grace=2s")
	pod := framework.ReclaimedPod(ns, "batch", 4000, 4<<30)
	pod.Spec.NodeName = nodes[0]
	framework.CreatePod(t, c, pod)
	// No scheduler runs: this one stays Pending, which the extender counts.
	framework.CreatePod(t, c, framework.ReclaimedPod(ns, "waiting", 1000, 1<<30))

	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	ext := framework.StartRole(t, c, "extender", "extender", fmt.Sprintf("--listen-address=127.0.0.1:%d", port), "--publisher-lease-name=")
	// One call of each verb creates its request series, whatever it answers.
	for _, verb := range []string{"filter", "prioritize", "bind"} {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, fmt.Sprintf("http://127.0.0.1:%d/%s", port, verb), strings.NewReader("{}"))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("POST /%s: %v", verb, err)
		}
		resp.Body.Close()
	}

	endpoint := func(r *framework.Role) stack.MetricsEndpoint {
		ep, ok := stack.MetricsOf(r.HealthPort)
		if !ok {
			t.Fatalf("%s: no metrics endpoint", r.Name)
		}
		return ep
	}
	// Wait for the events the test set up: a publish and a dry-run eviction.
	if _, ok := framework.Poll(2*time.Minute, time.Second, func() bool {
		s := exportedSeries(t, endpoint(pub))
		return s["kube_reclaim_publisher_writes_total"] && s["kube_reclaim_publisher_evictions_total"]
	}); !ok {
		t.Fatal("the publisher never published and counted a dry-run eviction")
	}
	for _, r := range []*framework.Role{pub, wh.Role, ext} {
		for n := range exportedSeries(t, endpoint(r)) {
			known[n] = true
		}
	}
	// The value series carry what the cluster holds: the bound batch pod's
	// reclaimed CPU, per node and summed; the Pending one, counted by age.
	for _, want := range []struct {
		role   *framework.Role
		name   string
		labels map[string]string
		value  float64
	}{
		{pub, "kube_reclaim_publisher_cluster_held_cpu_millicores", nil, 4000},
		{pub, "kube_reclaim_publisher_held_cpu_millicores", map[string]string{"node": nodes[0]}, 4000},
		{pub, "kube_reclaim_publisher_pool_held_cpu_millicores", map[string]string{"pool": ""}, 4000},
		{ext, "kube_reclaim_extender_pending_reclaimed_pods", map[string]string{"age": "under-5m"}, 1},
	} {
		if got, ok := framework.Poll(30*time.Second, time.Second, func() bool {
			v, found := gaugeValue(t, endpoint(want.role), want.name, want.labels)
			return found && v == want.value
		}); !ok {
			v, _ := gaugeValue(t, endpoint(want.role), want.name, want.labels)
			t.Errorf("%s%v = %v after %s, want %v", want.name, want.labels, v, got, want.value)
		}
	}

	results := selectedNames(t, pt.PromQLNames, exprs)
	// Positive control: the same check reports a name no role exports and
	// an expression that does not parse.
	control := selectedNames(t, pt.PromQLNames, []string{"rate(kube_reclaim_publisher_no_such_metric_total[5m])", "sum(rate(x[5m])"})
	if bad := unknownSeries(control, known); len(bad) != 2 {
		t.Fatalf("the check missed a wrong name or a parse error: %q", bad)
	}

	bad := unknownSeries(results, known)
	sort.Strings(bad)
	for _, b := range bad {
		t.Error(b)
	}
	var selected []string
	for _, r := range results {
		for _, n := range r.Names {
			if !slices.Contains(selected, n) {
				selected = append(selected, n)
			}
		}
	}
	sort.Strings(selected)
	t.Logf("%d expressions (%d rules, the rest dashboard queries) select %d names: %s",
		len(results), len(rules), len(selected), strings.Join(selected, " "))
}
