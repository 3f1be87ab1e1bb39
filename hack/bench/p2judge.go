package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

// p2Run is what the P2 judgement takes of one run of `bench scheduler`.
type p2Run struct {
	// Measured is false for a run that failed; its figures are then 0.
	Measured bool    `json:"measured"`
	Ratio    float64 `json:"ratio"`
	// ExtenderCPUPerPodMs is the extender's CPU per reclaimed pod bound,
	// beyond its background, in ms; 0 when not read.
	ExtenderCPUPerPodMs float64 `json:"extenderCpuPerPodMs"`
}

// p2Judgement is the P2 goal judged on the median of consecutive runs.
type p2Judgement struct {
	Runs []p2Run `json:"runs"`
	// Want is how many runs the goal's median is of.
	Want int `json:"want"`
	// Median and MedianExtenderCPUPerPodMs are over the measured runs.
	Median                    float64 `json:"median"`
	MedianExtenderCPUPerPodMs float64 `json:"medianExtenderCpuPerPodMs"`
	// Status: statusPass or statusFail when at least Want runs were
	// measured, statusMissing otherwise (a goal is met only when the runs
	// show it, and fewer runs do not).
	Status string `json:"status"`
	Note   string `json:"note,omitempty"`
}

// median returns the median of xs (the mean of the middle two for an even
// count), 0 for none.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// judgeP2 judges goals.SchedulingRatio on the median of runs, in the order
// they ran; a nil run failed.
func judgeP2(runs []*schedulerResult) p2Judgement {
	g := goals.SchedulingRatio
	j := p2Judgement{Want: max(g.MedianOf, 1)}
	var ratios, cpu []float64
	for _, r := range runs {
		if r == nil || r.Native.PodsPerSecond == 0 {
			j.Runs = append(j.Runs, p2Run{})
			continue
		}
		run := p2Run{Measured: true, Ratio: r.Reclaimed.PodsPerSecond / r.Native.PodsPerSecond, ExtenderCPUPerPodMs: r.Reclaimed.CPUPerPodMs[stack.Extender]}
		j.Runs = append(j.Runs, run)
		ratios = append(ratios, run.Ratio)
		if run.ExtenderCPUPerPodMs > 0 {
			cpu = append(cpu, run.ExtenderCPUPerPodMs)
		}
	}
	j.Median, j.MedianExtenderCPUPerPodMs = median(ratios), median(cpu)
	switch {
	case len(ratios) < j.Want:
		j.Status = statusMissing
		j.Note = fmt.Sprintf("%d of %d runs measured: the goal is on the median of %d consecutive runs", len(ratios), len(runs), j.Want)
	case (row{GoalOp: g.Op, Goal: g.Value, Measured: j.Median}).evaluate().Status == statusPass:
		j.Status = statusPass
	default:
		j.Status = statusFail
	}
	return j
}

// runsText lists each run's ratio and the extender's CPU per reclaimed pod.
func (j p2Judgement) runsText() string {
	var parts []string
	for i, r := range j.Runs {
		if !r.Measured {
			parts = append(parts, fmt.Sprintf("run %d failed", i+1))
			continue
		}
		parts = append(parts, fmt.Sprintf("%.2f (extender %.2f ms/pod)", r.Ratio, r.ExtenderCPUPerPodMs))
	}
	return strings.Join(parts, ", ")
}

// row is the judgement as the results table's P2 row: the median ratio,
// judged, with every run's ratio and the extender's CPU per reclaimed pod
// beside it.
func (j p2Judgement) row(nodes, pods int) row {
	g := goals.SchedulingRatio
	r := row{ID: "P2", What: fmt.Sprintf("scheduling throughput, reclaimed pods via extender / native pods, median of %d consecutive runs", len(j.Runs)),
		Measured: j.Median, Unit: "× native", GoalOp: g.Op, Goal: g.Value,
		Note: fmt.Sprintf("runs: %s; median extender CPU per reclaimed pod %.2f ms", j.runsText(), j.MedianExtenderCPUPerPodMs)}
	if nodes > 0 {
		r.What += fmt.Sprintf(", %d kwok nodes, %d pods per phase", nodes, pods)
	}
	if j.Status == statusMissing {
		r.Status = statusMissing
		r.Note = j.Note + "; " + r.Note
	}
	return r.evaluate()
}

// printP2 writes the judgement as `bench scheduler` ends.
func printP2(out io.Writer, j p2Judgement) {
	g := goals.SchedulingRatio
	fmt.Fprintf(out, "\nP2 over %d consecutive runs (goal: median of %d %s native)\n%-6s %8s %32s\n", len(j.Runs), j.Want, g.Op+" "+fmt.Sprintf("%.2f×", g.Value), "run", "ratio", "extender CPU per reclaimed pod")
	for i, r := range j.Runs {
		if !r.Measured {
			fmt.Fprintf(out, "%-6d %8s %32s\n", i+1, "failed", "-")
			continue
		}
		fmt.Fprintf(out, "%-6d %8.2f %29.2f ms\n", i+1, r.Ratio, r.ExtenderCPUPerPodMs)
	}
	fmt.Fprintf(out, "%-6s %8.2f %29.2f ms\n", "median", j.Median, j.MedianExtenderCPUPerPodMs)
	fmt.Fprintf(out, "P2: %s", j.Status)
	if j.Note != "" {
		fmt.Fprintf(out, " (%s)", j.Note)
	}
	fmt.Fprintln(out)
}
