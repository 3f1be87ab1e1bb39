package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"sigs.k8s.io/yaml"

	"github.com/kube-reclaim/kube-reclaim/extender"
)

func TestVerbTimesSumsCodesPerRoute(t *testing.T) {
	text := `# HELP kube_reclaim_extender_http_request_duration_seconds Latency of HTTP requests by route and status code.
# TYPE kube_reclaim_extender_http_request_duration_seconds histogram
kube_reclaim_extender_http_request_duration_seconds_bucket{code="200",route="filter",le="0.001"} 90
kube_reclaim_extender_http_request_duration_seconds_bucket{code="200",route="filter",le="+Inf"} 100
kube_reclaim_extender_http_request_duration_seconds_sum{code="200",route="filter"} 0.5
kube_reclaim_extender_http_request_duration_seconds_count{code="200",route="filter"} 100
kube_reclaim_extender_http_request_duration_seconds_bucket{code="400",route="filter",le="+Inf"} 10
kube_reclaim_extender_http_request_duration_seconds_sum{code="400",route="filter"} 0.1
kube_reclaim_extender_http_request_duration_seconds_count{code="400",route="filter"} 10
kube_reclaim_extender_http_request_duration_seconds_bucket{code="200",route="bind",le="+Inf"} 100
kube_reclaim_extender_http_request_duration_seconds_sum{code="200",route="bind"} 2
kube_reclaim_extender_http_request_duration_seconds_count{code="200",route="bind"} 100
# TYPE kube_reclaim_webhook_http_request_duration_seconds histogram
kube_reclaim_webhook_http_request_duration_seconds_bucket{code="200",route="/mutate",le="+Inf"} 3
kube_reclaim_webhook_http_request_duration_seconds_sum{code="200",route="/mutate"} 9
kube_reclaim_webhook_http_request_duration_seconds_count{code="200",route="/mutate"} 3
`
	families, err := parseExposition(strings.NewReader(text))
	if err != nil {
		t.Fatal(err)
	}
	got := verbTimes(families, extenderDurationMetric, "route")
	for route, want := range map[string]verbTime{"filter": {0.6, 110}, "bind": {2, 100}} {
		if g := got[route]; math.Abs(g.sum-want.sum) > 1e-12 || g.count != want.count {
			t.Errorf("%s = %+v, want %+v", route, g, want)
		}
	}
	if _, ok := got["/mutate"]; ok {
		t.Error("another component's histogram was counted")
	}
	if _, err := parseExposition(strings.NewReader("kube_reclaim_extender_http_request_duration_seconds_sum{route=\"x\"} not-a-number\n")); err == nil {
		t.Error("a malformed exposition parsed without an error")
	}
}

func TestMeanDeltaIsPerRequestBetweenScrapes(t *testing.T) {
	before := map[string]verbTime{"/filter": {1, 100}, "/bind": {5, 50}}
	after := map[string]verbTime{"/filter": {1.5, 200}, "/bind": {5, 50}, "/prioritize": {0.2, 100}}
	got := meanDelta(before, after, 1000)
	want := map[string]float64{"/filter": 5, "/prioritize": 2}
	if len(got) != len(want) {
		t.Fatalf("meanDelta = %v, want %v (a route without new requests has no mean)", got, want)
	}
	for k, v := range want {
		if math.Abs(got[k]-v) > 1e-9 {
			t.Errorf("%s = %v ms, want %v ms", k, got[k], v)
		}
	}
}

func TestReadProcStatsOfThisProcess(t *testing.T) {
	s, err := readProcStats(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.RSSMB <= 0 || s.PeakMB < s.RSSMB || s.AnonMB <= 0 || s.AnonMB > s.RSSMB {
		t.Errorf("RSS %v MB, peak %v MB, anonymous %v MB: want 0 < anonymous <= RSS <= peak", s.RSSMB, s.PeakMB, s.AnonMB)
	}
	// Burn some CPU: the reading must see it.
	deadline := time.Now().Add(300 * time.Millisecond)
	for x := 0; time.Now().Before(deadline); x++ {
		_ = x
	}
	s2, err := readProcStats(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s2.CPU <= s.CPU {
		t.Errorf("CPU %v after %v: 300ms of spinning not seen", s2.CPU, s.CPU)
	}
	if _, err := readProcStats(1 << 30); err == nil {
		t.Error("no error for a process that does not exist")
	}
}

func TestLastLiveHeapReadsTheLastCollection(t *testing.T) {
	log := `time="2026-11-21T21:40:00Z" level=info msg="extender starting"
gc 12 @146.792s 1%: 2.7+265+0.005 ms clock, 5.5+0/144/218+0.011 ms cpu, 2022->2023->55 MB, 2749 MB goal, 0 MB stacks, 0 MB globals, 2 P
gc 13 @171.731s 1%: 4.3+319+0.004 ms clock, 8.6+4.2/173/433+0.009 ms cpu, 95->96->56 MB, 112 MB goal, 0 MB stacks, 0 MB globals, 2 P
time="2026-11-21T21:40:05Z" level=info msg="informers synced"
`
	if v, ok := lastLiveHeap(log); !ok || v != 56 {
		t.Errorf("lastLiveHeap = %v, %v; want 56, true", v, ok)
	}
	if _, ok := lastLiveHeap("no collection yet\n"); ok {
		t.Error("a log without gc lines gave a heap size")
	}
}

func TestCPUPerPodIsEachProcessesTimeBeyondItsBackgroundPerPod(t *testing.T) {
	before := map[string]time.Duration{"etcd": time.Second, "kube-apiserver": 2 * time.Second, "gone": time.Second}
	after := map[string]time.Duration{"etcd": 3 * time.Second, "kube-apiserver": 8 * time.Second, "new": time.Second}
	// Over 10 s: etcd used 0.2 cores, the apiserver 0.6, 0.8 in all.
	if got, want := cpuRate(before, after, 10*time.Second), map[string]float64{"etcd": 0.2, "kube-apiserver": 0.6, "all": 0.8}; !maps.EqualFunc(got, want, near) {
		t.Errorf("cpuRate = %v, want %v (a process missing at either end is left out)", got, want)
	}
	// The apiserver's background was 0.1 cores: 1 s of its 6 over 10 s.
	background := map[string]float64{"kube-apiserver": 0.1, "all": 0.1}
	got := cpuPerPod(before, after, background, 10*time.Second, 1000)
	if want := map[string]float64{"etcd": 2, "kube-apiserver": 5, "all": 7}; !maps.EqualFunc(got, want, near) {
		t.Errorf("cpuPerPod = %v, want %v", got, want)
	}
	if got := cpuPerPod(before, after, background, 10*time.Second, 0); got != nil {
		t.Errorf("no pod bound: %v, want nothing", got)
	}
}

func TestPerPodLeavesOutTheBackgroundBelowOneRequestInTwenty(t *testing.T) {
	before := map[string]float64{"POST pods": 10, "PUT leases": 100, "watch event pods": 0}
	after := map[string]float64{"POST pods": 1010, "PUT leases": 140, "watch event pods": 15000, "GET nodes": 1}
	got := perPod(before, after, 1000)
	if want := map[string]float64{"POST pods": 1, "watch event pods": 15}; !maps.EqualFunc(got, want, near) {
		t.Errorf("perPod = %v, want %v (under 0.05 per pod left out)", got, want)
	}
	if got := perPod(before, after, 0); len(got) != 0 {
		t.Errorf("no pod bound: %v, want nothing", got)
	}
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestByVerbListsOnlyTheVerbsCalledInCallOrder(t *testing.T) {
	tests := []struct {
		name string
		m    map[string]float64
		want string
	}{
		{"all three", map[string]float64{"bind": 300, "prioritize": 0.2, "filter": 0.3}, "filter 0.30 ms, prioritize 0.20 ms, bind 300.00 ms"},
		{"no prioritize call", map[string]float64{"bind": 300, "filter": 0.3}, "filter 0.30 ms, bind 300.00 ms"},
		{"a verb measured at zero is still listed", map[string]float64{"filter": 0}, "filter 0.00 ms"},
		{"nothing", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := byVerb(tt.m, "%.2f ms"); got != tt.want {
				t.Errorf("byVerb = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestMergePhasesRatesBothPhasesTogether(t *testing.T) {
	a := phaseResult{Kind: "reclaimed", Pods: 1000, Bound: 1000, CreateSeconds: 8, Seconds: 10, BindP50ms: 100, BindP99ms: 900,
		AlgorithmMeanMs: 4, CPUPerPodMs: map[string]float64{"all": 6}, ExtenderMeanMs: map[string]float64{"filter": 0.5},
		APIPerPod: map[string]float64{"POST pods": 1}}
	b := phaseResult{Kind: "reclaimed", Pods: 1000, Bound: 500, CreateSeconds: 12, Seconds: 15, BindP50ms: 300, BindP99ms: 700,
		AlgorithmMeanMs: 7, CPUPerPodMs: map[string]float64{"all": 9}, Note: "only 500 of 1000 pods bound",
		APIPerPod: map[string]float64{"POST pods": 2.5}}
	m := mergePhases([]phaseResult{a, b})
	// 1500 pods over 25 s; means weighted 1000:500.
	want := phaseResult{Kind: "reclaimed", Pods: 2000, Bound: 1500, CreateSeconds: 20, Seconds: 25, PodsPerSecond: 60,
		BindP50ms: 300, BindP99ms: 900, AlgorithmMeanMs: 5, Note: "only 500 of 1000 pods bound"}
	if m.Kind != want.Kind || m.Pods != want.Pods || m.Bound != want.Bound || m.CreateSeconds != want.CreateSeconds ||
		m.Seconds != want.Seconds || m.PodsPerSecond != want.PodsPerSecond || m.BindP50ms != want.BindP50ms ||
		m.BindP99ms != want.BindP99ms || m.AlgorithmMeanMs != want.AlgorithmMeanMs || m.Note != want.Note {
		t.Errorf("merged %+v, want %+v", m, want)
	}
	// The extender's mean comes from the one phase that measured it.
	if math.Abs(m.CPUPerPodMs["all"]-7) > 1e-9 || m.ExtenderMeanMs["filter"] != 0.5 || !near(m.APIPerPod["POST pods"], 1.5) {
		t.Errorf("weighted means: cpu %v, extender %v, API %v; want all 7, filter 0.5, POST pods 1.5", m.CPUPerPodMs, m.ExtenderMeanMs, m.APIPerPod)
	}
	if z := mergePhases(nil); z.Pods != 0 || z.Kind != "" || z.CPUPerPodMs != nil {
		t.Errorf("no phase merges to the zero result, got %+v", z)
	}
}

// The plugin topology schedules native pods on the default profile and
// reclaimed pods on the deployed plugin profile, in one process, with the
// publisher Lease check off (no publisher runs) and the rest of the
// plugin's deployed args kept.
func TestPluginProfilesAreTheDeployedOneBesideTheDefault(t *testing.T) {
	cfg, percentage, err := pluginProfiles()
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Profiles []configv1.KubeSchedulerProfile `json:"profiles"`
	}
	if err := yaml.UnmarshalStrict([]byte(cfg), &got); err != nil {
		t.Fatalf("%v:\n%s", err, cfg)
	}
	if len(got.Profiles) != 2 || *got.Profiles[0].SchedulerName != corev1.DefaultSchedulerName || *got.Profiles[1].SchedulerName != extender.SchedulerName {
		t.Fatalf("profiles %s, want %s and %s", cfg, corev1.DefaultSchedulerName, extender.SchedulerName)
	}
	if got.Profiles[0].Plugins != nil || len(got.Profiles[0].PluginConfig) != 0 {
		t.Errorf("the native pods' profile is not kube-scheduler's default: %s", cfg)
	}
	if percentage != 5 || got.Profiles[1].PercentageOfNodesToScore == nil || *got.Profiles[1].PercentageOfNodesToScore != percentage {
		t.Errorf("percentageOfNodesToScore %d, profile %v; want the deployed 5 in both", percentage, got.Profiles[1].PercentageOfNodesToScore)
	}
	var args map[string]any
	for _, pc := range got.Profiles[1].PluginConfig {
		if pc.Name == pluginName {
			if err := json.Unmarshal(pc.Args.Raw, &args); err != nil {
				t.Fatal(err)
			}
		}
	}
	if args["publisherLeaseName"] != "-" || args["strategy"] != "spread" || args["resourceDomain"] != "kube-reclaim.io" {
		t.Errorf("plugin args %v: want the Lease check off and the deployed strategy and domain kept", args)
	}
}

func TestSetPluginArgRefusesAProfileWithoutThePlugin(t *testing.T) {
	name := "x"
	p := configv1.KubeSchedulerProfile{SchedulerName: &name}
	if err := setPluginArg(&p, "publisherLeaseName", "-"); err == nil || !strings.Contains(err.Error(), "no KubeReclaim args") {
		t.Errorf("setPluginArg on a profile without the plugin: %v", err)
	}
}

func TestBusyPerPodCountsOnlyCallsAnswered429BetweenScrapes(t *testing.T) {
	scrape := func(bind429, filter429, bind200 int) map[string]*dto.MetricFamily {
		t.Helper()
		text := "# TYPE kube_reclaim_extender_http_request_duration_seconds histogram\n"
		for _, c := range []struct {
			code, route string
			n           int
		}{{"429", "bind", bind429}, {"429", "filter", filter429}, {"200", "bind", bind200}} {
			text += fmt.Sprintf("kube_reclaim_extender_http_request_duration_seconds_bucket{code=%q,route=%q,le=\"+Inf\"} %d\n", c.code, c.route, c.n)
			text += fmt.Sprintf("kube_reclaim_extender_http_request_duration_seconds_sum{code=%q,route=%q} 1\n", c.code, c.route)
			text += fmt.Sprintf("kube_reclaim_extender_http_request_duration_seconds_count{code=%q,route=%q} %d\n", c.code, c.route, c.n)
		}
		families, err := parseExposition(strings.NewReader(text))
		if err != nil {
			t.Fatal(err)
		}
		return families
	}
	got := busyPerPod(scrape(5, 2, 100), scrape(9, 2, 1100), 1000)
	if len(got) != 1 || math.Abs(got["bind"]-0.004) > 1e-12 {
		t.Errorf("busyPerPod = %v, want only bind at 4 calls in 1000 pods (0.004)", got)
	}
	if got := busyPerPod(scrape(5, 2, 100), scrape(5, 2, 1100), 1000); len(got) != 0 {
		t.Errorf("with no new 429: %v, want none", got)
	}
}
