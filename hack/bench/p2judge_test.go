package main

import (
	"bytes"
	"cmp"
	"math"
	"slices"
	"strings"
	"testing"

	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

func TestMedianTakesTheMiddleOfTheSortedValues(t *testing.T) {
	for _, tc := range []struct {
		name string
		xs   []float64
		want float64
	}{
		{"none", nil, 0},
		{"one", []float64{0.8}, 0.8},
		{"odd count, unsorted", []float64{0.95, 0.79, 0.91, 0.85, 0.93}, 0.91},
		{"even count: the mean of the middle two", []float64{1, 0.8, 0.9, 0.7}, 0.85},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := median(tc.xs); math.Abs(got-tc.want) > 1e-12 {
				t.Errorf("median(%v) = %v, want %v", tc.xs, got, tc.want)
			}
		})
	}
}

// schedRun is an extender topology run whose reclaimed pods went at ratio ×
// the native rate and cost the extender extMs of CPU each.
func schedRun(ratio, extMs float64) *schedulerResult {
	return &schedulerResult{Topology: topologyExtender, Nodes: 1000, Pods: 1000, Native: phaseResult{Kind: "native", PodsPerSecond: 100},
		Reclaimed: phaseResult{Kind: "reclaimed", PodsPerSecond: 100 * ratio, CPUPerPodMs: map[string]float64{stack.Extender: extMs, "all": 9}}}
}

// pluginRun is a plugin topology run whose reclaimed pods went at ratio ×
// the native rate and cost the scheduler extraMs of CPU more than a native
// pod.
func pluginRun(ratio, extraMs float64) *schedulerResult {
	return &schedulerResult{Topology: topologyPlugin, Nodes: 1000, Pods: 1000,
		Native:    phaseResult{Kind: "native", PodsPerSecond: 100, CPUPerPodMs: map[string]float64{cluster.Scheduler: 2, "all": 9}},
		Reclaimed: phaseResult{Kind: "reclaimed", PodsPerSecond: 100 * ratio, CPUPerPodMs: map[string]float64{cluster.Scheduler: 2 + extraMs, "all": 9}}}
}

func TestP2IsJudgedOnTheMedianOfTheRuns(t *testing.T) {
	for _, g := range []goal{goals.SchedulingRatio, goals.PluginSchedulingRatio} {
		if g.MedianOf != 5 {
			t.Fatalf("a P2 goal is on the median of %d runs; issue 39 decided 5", g.MedianOf)
		}
	}
	for _, tc := range []struct {
		name       string
		topo       topology
		runs       []*schedulerResult
		status     string
		median     float64
		medianCPU  float64
		noteSays   string
		notMeasure int
	}{
		{name: "two runs below the goal, the median above it: met",
			runs:   []*schedulerResult{schedRun(0.80, 1.2), schedRun(0.95, 1.6), schedRun(0.92, 1.4), schedRun(0.85, 1.8), schedRun(0.91, 1.3)},
			status: statusPass, median: 0.91, medianCPU: 1.4},
		{name: "two runs above the goal, the median below it: not met",
			runs:   []*schedulerResult{schedRun(0.95, 1), schedRun(0.85, 1), schedRun(0.89, 1), schedRun(0.97, 1), schedRun(0.80, 1)},
			status: statusFail, median: 0.89, medianCPU: 1},
		{name: "the median exactly at the goal: met",
			runs:   []*schedulerResult{schedRun(0.9, 1), schedRun(0.9, 1), schedRun(0.9, 1), schedRun(0.8, 1), schedRun(1, 1)},
			status: statusPass, median: 0.9, medianCPU: 1},
		{name: "a failed run leaves four: not judged, whatever they show",
			runs:   []*schedulerResult{schedRun(1, 1), nil, schedRun(1, 1), schedRun(1, 1), schedRun(1, 1)},
			status: statusMissing, median: 1, medianCPU: 1, noteSays: "4 of 5 runs measured", notMeasure: 1},
		{name: "one quick run: not judged",
			runs:   []*schedulerResult{schedRun(0.95, 2)},
			status: statusMissing, median: 0.95, medianCPU: 2, noteSays: "median of 5"},
		{name: "a run without a native rate is not measured",
			runs:   []*schedulerResult{schedRun(1, 1), schedRun(1, 1), schedRun(1, 1), schedRun(1, 1), {Nodes: 1000}},
			status: statusMissing, median: 1, medianCPU: 1, notMeasure: 1},
		{name: "more runs than asked: the median of all",
			runs:   []*schedulerResult{schedRun(0.5, 1), schedRun(0.5, 1), schedRun(0.5, 1), schedRun(1, 1), schedRun(1, 1), schedRun(1, 1), schedRun(1, 1)},
			status: statusPass, median: 1, medianCPU: 1},
		{name: "the plugin is held to its own goal: a median that meets the extender's does not meet it",
			topo:   topologyPlugin,
			runs:   []*schedulerResult{pluginRun(0.95, 0.2), pluginRun(0.99, 0.1), pluginRun(0.96, 0.3), pluginRun(1.02, 0.1), pluginRun(0.93, 0.4)},
			status: statusFail, median: 0.96, medianCPU: 0.2},
		{name: "the plugin's median at its goal: met, its CPU the scheduler's beyond a native pod",
			topo:   topologyPlugin,
			runs:   []*schedulerResult{pluginRun(0.98, 0.5), pluginRun(1.01, 0.25), pluginRun(0.97, 0.75), pluginRun(0.98, 0.5), pluginRun(1.05, 0.25)},
			status: statusPass, median: 0.98, medianCPU: 0.5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topo := cmp.Or(tc.topo, topologyExtender)
			j := judgeP2(topo, tc.runs)
			if j.Status != tc.status || math.Abs(j.Median-tc.median) > 1e-9 || math.Abs(j.MedianPlacementCPUPerPodMs-tc.medianCPU) > 1e-9 {
				t.Errorf("judgeP2 = %s, median %v, placement %v ms; want %s, %v, %v ms", j.Status, j.Median, j.MedianPlacementCPUPerPodMs, tc.status, tc.median, tc.medianCPU)
			}
			if !strings.Contains(j.Note, tc.noteSays) {
				t.Errorf("note %q does not say %q", j.Note, tc.noteSays)
			}
			if len(j.Runs) != len(tc.runs) {
				t.Fatalf("%d runs judged, %d given", len(j.Runs), len(tc.runs))
			}
			unmeasured := 0
			for _, r := range j.Runs {
				if !r.Measured {
					unmeasured++
				}
			}
			if unmeasured != tc.notMeasure {
				t.Errorf("%d runs not measured, want %d", unmeasured, tc.notMeasure)
			}
			// The table's row carries the same verdict, the topology's goal and every run.
			r := j.row(1000, 1000)
			if r.Status != tc.status || r.Measured != j.Median || r.ID != "P2" || r.Goal != topo.goal().Value {
				t.Errorf("row %+v, want status %s, the median %v and goal %v", r, tc.status, j.Median, topo.goal().Value)
			}
			if !strings.Contains(r.What, string(topo)+" topology") {
				t.Errorf("row %q does not name the %s topology", r.What, topo)
			}
			if strings.Count(r.Note, "ms/pod") != len(tc.runs)-tc.notMeasure || !strings.Contains(r.Note, "median "+topo.cpuLabel()) {
				t.Errorf("row note %q: want each measured run's ratio and placement CPU, and their median", r.Note)
			}
		})
	}
}

func TestPrintP2ShowsEachTopologysRunsMedianAndGoal(t *testing.T) {
	var out bytes.Buffer
	printP2(&out, []p2Judgement{
		judgeP2(topologyExtender, []*schedulerResult{schedRun(0.88, 1.25), nil, schedRun(0.93, 1.75), schedRun(0.91, 1.5), schedRun(0.95, 1.5)}),
		judgeP2(topologyPlugin, []*schedulerResult{pluginRun(0.99, 0.5), pluginRun(1.01, 0.25), pluginRun(0.97, 0.75), pluginRun(0.98, 0.5), pluginRun(1.05, 0.25)}),
	})
	for _, want := range []string{
		"P2, extender topology, over 5 consecutive runs (goal: median of 5 >= 0.90× native)",
		"extender CPU per reclaimed pod",
		"1          0.88                           1.25 ms",
		"2        failed",
		"median     0.92                           1.50 ms",
		"P2 extender: missing (4 of 5 runs measured",
		"P2, plugin topology, over 5 consecutive runs (goal: median of 5 >= 0.98× native)",
		"kube-reclaim-scheduler CPU per reclaimed pod beyond a native one",
		"median     0.99",
		"P2 plugin: pass",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printP2 lacks %q:\n%s", want, out.String())
		}
	}
}

func TestParseTopologiesTakesKnownNamesOnce(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    []topology
		wantErr string
	}{
		{in: "extender,plugin", want: []topology{topologyExtender, topologyPlugin}},
		{in: " plugin ", want: []topology{topologyPlugin}},
		{in: "extender,kwok", wantErr: `unknown topology "kwok"`},
		{in: "", wantErr: "unknown topology"},
		{in: "plugin,plugin", wantErr: "named twice"},
	} {
		got, err := parseTopologies(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("parseTopologies(%q) = %v, %v; want an error saying %q", tc.in, got, err, tc.wantErr)
			}
			continue
		}
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("parseTopologies(%q) = %v, %v; want %v", tc.in, got, err, tc.want)
		}
	}
}
