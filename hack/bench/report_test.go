package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

func TestEvaluate(t *testing.T) {
	for _, tc := range []struct {
		name       string
		r          row
		wantStatus string
		wantRatio  float64 // -1: nil
	}{
		{"at-least goal met", row{Measured: 0.9, GoalOp: atLeast, Goal: 0.8}, statusPass, 1.125},
		{"at-least goal met exactly", row{Measured: 0.8, GoalOp: atLeast, Goal: 0.8}, statusPass, 1},
		{"at-least goal missed", row{Measured: 0.4, GoalOp: atLeast, Goal: 0.8}, statusFail, 0.5},
		{"relative goal compares with the baseline", row{Measured: 90, Baseline: 100, Relative: true, GoalOp: atLeast, Goal: 0.7}, statusPass, 0.9 / 0.7},
		{"relative goal missed", row{Measured: 50, Baseline: 100, Relative: true, GoalOp: atLeast, Goal: 0.8}, statusFail, 0.625},
		{"relative goal without baseline is missing, not failed", row{Measured: 50, Relative: true, GoalOp: atLeast, Goal: 0.8}, statusMissing, -1},
		{"below goal met", row{Measured: 2.5, GoalOp: below, Goal: 5}, statusPass, 2},
		{"below goal equal is missed", row{Measured: 5, GoalOp: below, Goal: 5}, statusFail, 1},
		{"below goal missed", row{Measured: 10, GoalOp: below, Goal: 5}, statusFail, 0.5},
		{"at-most goal equal is met", row{Measured: 2, GoalOp: atMost, Goal: 2}, statusPass, 1},
		{"at-most goal missed", row{Measured: 2.5, GoalOp: atMost, Goal: 2}, statusFail, 0.8},
		{"zero under a below goal passes without a ratio", row{Measured: 0, GoalOp: below, Goal: 5}, statusPass, -1},
		{"no goal is informational", row{Measured: 3}, statusInfo, -1},
		{"missing stays missing", row{Status: statusMissing, GoalOp: below, Goal: 5}, statusMissing, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.r.evaluate()
			if got.Status != tc.wantStatus {
				t.Errorf("status = %s, want %s", got.Status, tc.wantStatus)
			}
			switch {
			case tc.wantRatio < 0 && got.RatioToGoal != nil:
				t.Errorf("ratio = %v, want none", *got.RatioToGoal)
			case tc.wantRatio >= 0 && got.RatioToGoal == nil:
				t.Errorf("ratio = none, want %v", tc.wantRatio)
			case tc.wantRatio >= 0 && abs(*got.RatioToGoal-tc.wantRatio) > 1e-9:
				t.Errorf("ratio = %v, want %v", *got.RatioToGoal, tc.wantRatio)
			}
		})
	}
}

func TestCells(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    row
		want []string
	}{
		{
			name: "relative row shows the ratio to the baseline and a goal relative to it",
			r:    row{ID: "P2", What: "throughput", Measured: 120, Baseline: 200, Unit: "pods/s", Relative: true, GoalOp: atLeast, Goal: 0.8},
			want: []string{"P2", "throughput", "120 pods/s (0.60×)", "200 pods/s", ">= 0.80× baseline", "0.75", "FAIL"},
		},
		{
			name: "absolute row with a baseline",
			r:    row{ID: "P1", What: "p99", Measured: 3.2, Baseline: 1.1, Unit: "ms", GoalOp: below, Goal: 5},
			want: []string{"P1", "p99", "3.20 ms", "1.10 ms", "< 5.00 ms", "1.56", "pass"},
		},
		{
			name: "small values keep three significant digits",
			r:    row{ID: "P1", What: "cpu", Measured: 0.0432, Unit: "ms", GoalOp: atMost, Goal: 0.3},
			want: []string{"P1", "cpu", "0.0432 ms", "-", "<= 0.3 ms", "6.94", "pass"},
		},
		{
			name: "unitless value",
			r:    row{ID: "P4", What: "writes", Measured: 1.745, GoalOp: atMost, Goal: 2},
			want: []string{"P4", "writes", "1.75", "-", "<= 2.00", "1.15", "pass"},
		},
		{
			name: "zero under a below goal shows an infinite ratio",
			r:    row{ID: "P4", What: "zero", Measured: 0, Unit: "s", GoalOp: below, Goal: 0.5},
			want: []string{"P4", "zero", "0 s", "-", "< 0.5 s", "∞", "pass"},
		},
		{
			name: "informational row has no goal",
			r:    row{ID: "P4", What: "heap", Measured: 491.6, Unit: "MB"},
			want: []string{"P4", "heap", "492 MB", "-", "-", "-", "info"},
		},
		{
			name: "missing row shows dashes",
			r:    missing("P4", "rss", "not run"),
			want: []string{"P4", "rss", "-", "-", "-", "-", "missing"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.r.evaluate().cells()
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Errorf("cells =\n  %q\nwant\n  %q", got, tc.want)
			}
		})
	}
}

func TestRenderTableShowsMachineRowsAndNotes(t *testing.T) {
	rows := []row{
		row{ID: "P1", What: "p99 at 2000/s", Measured: 3, Unit: "ms", GoalOp: below, Goal: 5, Note: "noisy machine"}.evaluate(),
		missing("P2", "throughput", "cluster failed to start"),
	}
	var b bytes.Buffer
	renderTable(&b, machine{CPU: "Test CPU", Cores: 2, MemoryGiB: "8.0", Go: "go1.26", OS: "linux/amd64"}, rows)
	out := b.String()
	for _, want := range []string{
		"machine: Test CPU, 2 cores, 8.0 GiB, go1.26 linux/amd64",
		"id  what", "ratio to goal", "result",
		"P1  p99 at 2000/s", "3.00 ms", "< 5.00 ms", "1.67", "pass",
		"P2  throughput", "missing",
		"P1 p99 at 2000/s: noisy machine",
		"P2 throughput: cluster failed to start",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	header, first := lines[1], lines[2]
	if strings.Index(header, "measured") != strings.Index(first, "3.00 ms") {
		t.Errorf("columns are not aligned:\n%s\n%s", header, first)
	}
}

func TestRowJSONLeavesAnUndefinedRatioNull(t *testing.T) {
	b, err := json.Marshal(row{ID: "P4", Measured: 0, GoalOp: below, Goal: 0.5}.evaluate())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"ratioToGoal":null`) || !strings.Contains(string(b), `"status":"pass"`) {
		t.Errorf("JSON = %s", b)
	}
}

func TestBuildRowsMarksWhatDidNotRunAsMissing(t *testing.T) {
	rows := buildRows(nil, nil, nil, nil, nil, map[string]string{"scheduler": "cluster failed to start"})
	ids := map[string]bool{}
	for _, r := range rows {
		ids[r.ID] = true
		if r.Status != statusMissing {
			t.Errorf("%s %s: status %s without any measurement", r.ID, r.What, r.Status)
		}
		if r.ID == "P2" && r.Note != "cluster failed to start" {
			t.Errorf("P2 note = %q, want the scheduler's error", r.Note)
		}
	}
	for _, id := range []string{"P1", "P2", "P3", "P4"} {
		if !ids[id] {
			t.Errorf("no row for %s", id)
		}
	}
	// Each topology's P2 goal has its row, missing, when none ran.
	for _, topo := range topologies {
		if !slices.ContainsFunc(rows, func(r row) bool { return r.ID == "P2" && strings.Contains(r.What, string(topo)+" topology") }) {
			t.Errorf("no P2 row for the %s topology", topo)
		}
	}
}

func TestBuildRowsUsesTheMeasurements(t *testing.T) {
	lines := []benchLine{
		{Pkg: "github.com/kube-reclaim/kube-reclaim/webhook", Name: "BenchmarkHandler/patch", Metrics: map[string]float64{"cpu-ns/op": 45000}},
		{Pkg: "github.com/kube-reclaim/kube-reclaim/webhook", Name: "BenchmarkHandler/baseline", Metrics: map[string]float64{"cpu-ns/op": 2000}},
		{Pkg: "github.com/kube-reclaim/kube-reclaim/extender", Name: "BenchmarkFilterPrioritize/nodes=500", Metrics: map[string]float64{"both-p99-ns": 400000}},
		{Pkg: "github.com/kube-reclaim/kube-reclaim/extender", Name: "BenchmarkFilterPrioritize/nodes=5000", Metrics: map[string]float64{"both-p99-ns": 6e6}},
		{Pkg: "github.com/kube-reclaim/kube-reclaim/publisher", Name: "BenchmarkCycle/metrics=protobuf", Metrics: map[string]float64{"cpu-s/cycle": 0.4}},
		{Pkg: "github.com/kube-reclaim/kube-reclaim/publisher", Name: "BenchmarkCycleWrites/noise=10%", Metrics: map[string]float64{"writes/node/interval": 2.5}},
	}
	wh := &webhookResult{Conns: 8,
		Webhook:  []loadStep{{Target: 2000, Throughput: 2000, P99ms: 3}, {Target: 0, Throughput: 800}},
		Baseline: []loadStep{{Target: 2000, Throughput: 2000, P99ms: 2}, {Target: 0, Throughput: 1000}}}
	sched := &schedulerResult{Topology: topologyExtender, Nodes: 1000, Pods: 1000, Reclaimed: phaseResult{Kind: "reclaimed", PodsPerSecond: 90}, Native: phaseResult{Kind: "native", PodsPerSecond: 100}}
	got := map[string]string{}
	rss := &rssResult{Nodes: 5000, Pods: 150000, SumRSSMB: 350, PublisherCycles: 10, PublisherCPUPerCycle: 0.4}
	scale := &scaleResult{Nodes: 1000, Pods: 20000, PublisherCycles: 12, PublisherCPU: 0.2,
		Processes: []scaleProcess{{Role: "publisher", EndPeakMiB: 90}, {Role: "extender", EndPeakMiB: 85}}}
	low := &schedulerResult{Topology: topologyExtender, Nodes: 1000, Pods: 1000, Reclaimed: phaseResult{Kind: "reclaimed", PodsPerSecond: 50}, Native: phaseResult{Kind: "native", PodsPerSecond: 100}}
	plugin := []*schedulerResult{pluginRun(0.99, 0.1), pluginRun(1, 0.1), pluginRun(0.97, 0.1), pluginRun(0.98, 0.1), pluginRun(1.01, 0.1)}
	notes := map[string]string{}
	for _, r := range buildRows(lines, wh, []p2Set{{Topology: topologyExtender, Runs: []*schedulerResult{sched, low, nil}}, {Topology: topologyPlugin, Runs: plugin}},
		rss, scale, map[string]string{"scheduler": "cluster failed to start"}) {
		got[r.What] = r.Status
		notes[r.What] = r.Note
	}
	// A plugin run's row says what ran and leaves out the extender, which did not.
	pluginRow := "scheduling throughput, plugin topology: reclaimed pods via the plugin scheduler vs native pods, run 1 of 5 (info), 1000 kwok nodes, 1000 pods each"
	if n := notes[pluginRow]; !strings.Contains(n, "kube-reclaim-scheduler (kube-scheduler with the placement plugin)") || strings.Contains(n, "extender") {
		t.Errorf("plugin run's note %q: want the binary named and no extender", n)
	}
	for what, want := range map[string]string{
		"webhook max throughput, HTTPS keep-alive, ~33 KB review": statusPass,
		"webhook p99 latency at 2000 reviews/s":                   statusPass,
		"webhook handler CPU per review (BenchmarkHandler/patch)": statusPass,
		"scheduling throughput, extender topology: reclaimed pods via extender vs native pods, run 1 of 3 (info), 1000 kwok nodes, 1000 pods each": statusInfo,
		"scheduling throughput, extender topology: reclaimed pods via extender vs native pods, run 2 of 3 (info), 1000 kwok nodes, 1000 pods each": statusInfo,
		"scheduling throughput, extender topology: reclaimed pods via extender vs native pods, run 3 of 3 (info)":                                  statusMissing,
		// Two runs measured of the five the goal's median is of.
		"scheduling throughput, extender topology: reclaimed pods via extender / native pods, median of 3 consecutive runs, 1000 kwok nodes, 1000 pods per phase": statusMissing,
		pluginRow: statusInfo,
		// Five runs, median 0.99 against the plugin's 0.98.
		"scheduling throughput, plugin topology: reclaimed pods via the plugin scheduler / native pods, median of 5 consecutive runs, 1000 kwok nodes, 1000 pods per phase": statusPass,
		"extender filter+prioritize server time p99, 500 names, 30 pods/node":                                                                                               statusPass,
		"extender filter+prioritize server time p99, 5000 names, 30 pods/node":                                                                                              statusFail,
		"publisher process CPU per cycle, 5000 nodes / 150,000 pods, decoding included":                                                                                     statusPass,
		"publisher peak RSS (start-up included), real API server, 1000 kwok nodes / 20000 pods":                                                                             statusPass,
		"extender peak RSS (start-up included), real API server, 1000 kwok nodes / 20000 pods":                                                                              statusFail,
		"publisher process CPU per cycle, real API server, 1000 kwok nodes / 20000 pods":                                                                                    statusFail,
		"publisher API writes per node per refresh interval, usage noise ±10%":                                                                                              statusFail,
		"publisher API writes per node per refresh interval, usage noise ±3%":                                                                                               statusMissing,
	} {
		if got[what] != want {
			t.Errorf("%q: status %q, want %q (rows: %v)", what, got[what], want, got)
		}
	}
}

func TestScaleNotesSayWhatTheWindowHeld(t *testing.T) {
	for _, tc := range []struct {
		name         string
		observe, mid float64
		// says: text -> whether the notes must say it
		says map[string]bool
	}{
		{name: "a quick run reads no mid-window RSS and holds no refresh", observe: 30, says: map[string]bool{
			"30 s later: RSS 70 MiB": true, "too short for every node's refresh": true,
			"0 s later: RSS 60 MiB": false, "long enough": false}},
		{name: "the default window reads RSS at 3 minutes and holds every refresh", observe: 360, mid: 180, says: map[string]bool{
			"180 s later: RSS 60 MiB; 360 s later: RSS 70 MiB": true, "long enough for every node's refresh": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			scale := &scaleResult{Nodes: 1000, Pods: 20000, PublisherCycles: 24, PublisherCPU: 0.1, ObserveSeconds: tc.observe, MidSeconds: tc.mid,
				Processes: []scaleProcess{{Role: "publisher", StartRSSMiB: 50, MidRSSMiB: 60, EndRSSMiB: 70, EndPeakMiB: 70}}}
			var notes string
			for _, r := range buildRows(nil, nil, nil, nil, scale, nil) {
				if strings.Contains(r.What, "real API server") {
					notes += r.Note + "\n"
				}
			}
			for text, must := range tc.says {
				if strings.Contains(notes, text) != must {
					t.Errorf("notes say %q: %v, want %v:\n%s", text, !must, must, notes)
				}
			}
		})
	}
}

func TestPrintScaleShowsAnUnreadMidWindowRSSAsADash(t *testing.T) {
	for _, tc := range []struct {
		name string
		mid  float64
		want string
	}{
		{name: "read", mid: 180, want: "60"},
		{name: "window too short", mid: 0, want: "-"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out strings.Builder
			printScale(&out, &scaleResult{MidSeconds: tc.mid, Processes: []scaleProcess{{Role: "publisher", MidRSSMiB: 60, EndRSSMiB: 70}}})
			for _, line := range strings.Split(out.String(), "\n") {
				if f := strings.Fields(line); len(f) == 7 && f[0] == "publisher" {
					if f[4] != tc.want {
						t.Errorf("RSS at 3 minutes printed %q, want %q:\n%s", f[4], tc.want, out.String())
					}
					return
				}
			}
			t.Fatalf("no publisher row:\n%s", out.String())
		})
	}
}

func TestRSSNoteSaysWhetherTheHistoryFilledAndAtWhichRateThePublisherWrote(t *testing.T) {
	for _, tc := range []struct {
		observe float64
		qps     int
		want    string
	}{
		{observe: 150, want: "below its steady state"},
		{observe: fullHistory().Seconds() + 60, want: "long enough for the publisher's usage history to fill"},
		{observe: 150, want: "publisher at the deployed --kube-api-qps"},
		{observe: 150, qps: 1000, want: "publisher --kube-api-qps=1000: its writes come in bursts"},
	} {
		rss := &rssResult{Nodes: 5000, Pods: 150000, ObserveSeconds: tc.observe, PublisherQPS: tc.qps, Processes: []processResult{{Role: "publisher", PeakMB: 250}}}
		var notes string
		for _, r := range buildRows(nil, nil, nil, rss, nil, nil) {
			if strings.Contains(r.What, "peak RSS") {
				notes += r.Note
			}
		}
		if !strings.Contains(notes, tc.want) {
			t.Errorf("watched %.0f s: note %q lacks %q", tc.observe, notes, tc.want)
		}
	}
}
