package main

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

// topology is how reclaimed pods are placed in a P2 run; native pods are
// scheduled by the same scheduler process in both.
type topology string

const (
	// topologyExtender: upstream kube-scheduler with the shipped profile,
	// calling the extender process (deploy/default).
	topologyExtender topology = "extender"
	// topologyPlugin: kube-reclaim-scheduler, kube-scheduler built with the
	// placement plugin, on deploy/plugin-scheduler's profile.
	topologyPlugin topology = "plugin"
)

// topologies are every topology P2 measures, in the order the table shows
// them.
var topologies = []topology{topologyExtender, topologyPlugin}

// goal is the P2 goal of the topology.
func (t topology) goal() goal {
	if t == topologyPlugin {
		return goals.PluginSchedulingRatio
	}
	return goals.SchedulingRatio
}

// via says how reclaimed pods are placed, for the table.
func (t topology) via() string {
	if t == topologyPlugin {
		return "via the plugin scheduler"
	}
	return "via extender"
}

// cpuLabel names what placementCPU measures.
func (t topology) cpuLabel() string {
	if t == topologyPlugin {
		return "kube-reclaim-scheduler CPU per reclaimed pod beyond a native one"
	}
	return "extender CPU per reclaimed pod"
}

// placementCPU is what placing a reclaimed pod costs in CPU, in ms: the
// extender's CPU per reclaimed pod; for the plugin, what the scheduler
// spends on a reclaimed pod beyond a native one (the plugin's share of the
// one process). 0 when not read.
func (t topology) placementCPU(r *schedulerResult) float64 {
	if t == topologyPlugin {
		rc, ok1 := r.Reclaimed.CPUPerPodMs[cluster.Scheduler]
		nc, ok2 := r.Native.CPUPerPodMs[cluster.Scheduler]
		if !ok1 || !ok2 {
			return 0
		}
		return rc - nc
	}
	return r.Reclaimed.CPUPerPodMs[stack.Extender]
}

// p2Set is one topology's consecutive runs and their judgement.
type p2Set struct {
	Topology topology           `json:"topology"`
	Runs     []*schedulerResult `json:"runs"`
	P2       p2Judgement        `json:"p2"`
}

// p2Run is what the P2 judgement takes of one run of `bench scheduler`.
type p2Run struct {
	// Measured is false for a run that failed; its figures are then 0.
	Measured bool    `json:"measured"`
	Ratio    float64 `json:"ratio"`
	// PlacementCPUPerPodMs is the topology's placementCPU, in ms; 0 when
	// not read.
	PlacementCPUPerPodMs float64 `json:"placementCpuPerPodMs"`
}

// p2Judgement is a topology's P2 goal judged on the median of consecutive
// runs.
type p2Judgement struct {
	Topology topology `json:"topology"`
	Runs     []p2Run  `json:"runs"`
	// Want is how many runs the goal's median is of.
	Want int `json:"want"`
	// Median and MedianPlacementCPUPerPodMs are over the measured runs.
	Median                     float64 `json:"median"`
	MedianPlacementCPUPerPodMs float64 `json:"medianPlacementCpuPerPodMs"`
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

// judgeP2 judges the topology's goal on the median of runs, in the order
// they ran; a nil run failed.
func judgeP2(t topology, runs []*schedulerResult) p2Judgement {
	g := t.goal()
	j := p2Judgement{Topology: t, Want: max(g.MedianOf, 1)}
	var ratios, cpu []float64
	for _, r := range runs {
		if r == nil || r.Native.PodsPerSecond == 0 {
			j.Runs = append(j.Runs, p2Run{})
			continue
		}
		run := p2Run{Measured: true, Ratio: r.Reclaimed.PodsPerSecond / r.Native.PodsPerSecond, PlacementCPUPerPodMs: t.placementCPU(r)}
		j.Runs = append(j.Runs, run)
		ratios = append(ratios, run.Ratio)
		if run.PlacementCPUPerPodMs != 0 {
			cpu = append(cpu, run.PlacementCPUPerPodMs)
		}
	}
	j.Median, j.MedianPlacementCPUPerPodMs = median(ratios), median(cpu)
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

// runsText lists each run's ratio and the placement's CPU per reclaimed pod.
func (j p2Judgement) runsText() string {
	var parts []string
	for i, r := range j.Runs {
		if !r.Measured {
			parts = append(parts, fmt.Sprintf("run %d failed", i+1))
			continue
		}
		parts = append(parts, fmt.Sprintf("%.2f (%s %.2f ms/pod)", r.Ratio, j.Topology, r.PlacementCPUPerPodMs))
	}
	return strings.Join(parts, ", ")
}

// row is the judgement as the results table's P2 row: the median ratio,
// judged against the topology's goal, with every run's ratio and the
// placement's CPU per reclaimed pod beside it.
func (j p2Judgement) row(nodes, pods int) row {
	g := j.Topology.goal()
	r := row{ID: "P2", What: fmt.Sprintf("scheduling throughput, %s topology: reclaimed pods %s / native pods, median of %d consecutive runs", j.Topology, j.Topology.via(), len(j.Runs)),
		Measured: j.Median, Unit: "× native", GoalOp: g.Op, Goal: g.Value,
		Note: fmt.Sprintf("runs: %s; median %s %.2f ms", j.runsText(), j.Topology.cpuLabel(), j.MedianPlacementCPUPerPodMs)}
	if nodes > 0 {
		r.What += fmt.Sprintf(", %d kwok nodes, %d pods per phase", nodes, pods)
	}
	if j.Status == statusMissing {
		r.Status = statusMissing
		r.Note = j.Note + "; " + r.Note
	}
	return r.evaluate()
}

// printP2 writes the judgements as `bench scheduler` ends, one table per
// topology, each with its goal.
func printP2(out io.Writer, js []p2Judgement) {
	for _, j := range js {
		g := j.Topology.goal()
		label := j.Topology.cpuLabel()
		fmt.Fprintf(out, "\nP2, %s topology, over %d consecutive runs (goal: median of %d %s native)\n%-6s %8s %*s\n",
			j.Topology, len(j.Runs), j.Want, g.Op+" "+fmt.Sprintf("%.2f×", g.Value), "run", "ratio", len(label)+3, label)
		for i, r := range j.Runs {
			if !r.Measured {
				fmt.Fprintf(out, "%-6d %8s %*s\n", i+1, "failed", len(label)+3, "-")
				continue
			}
			fmt.Fprintf(out, "%-6d %8.2f %*.2f ms\n", i+1, r.Ratio, len(label), r.PlacementCPUPerPodMs)
		}
		fmt.Fprintf(out, "%-6s %8.2f %*.2f ms\n", "median", j.Median, len(label), j.MedianPlacementCPUPerPodMs)
		fmt.Fprintf(out, "P2 %s: %s", j.Topology, j.Status)
		if j.Note != "" {
			fmt.Fprintf(out, " (%s)", j.Note)
		}
		fmt.Fprintln(out)
	}
}
