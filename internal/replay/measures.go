package replay

import (
	"time"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Report is the outcome of a replay.
type Report struct {
	Trace   TraceSummary `json:"trace"`
	Results []Result     `json:"results"`
}

// TraceSummary describes the replayed trace.
type TraceSummary struct {
	Start time.Time `json:"start"`
	End   time.Time `json:"end"`
	Step  string    `json:"step"`
	Steps int       `json:"steps"`
	Pods  int       `json:"pods"`
	Nodes int       `json:"nodes"`
	// Packed: the file named no node; pods were packed first-fit decreasing.
	Packed      bool                  `json:"packed"`
	Allocatable reclaimable.Resources `json:"nodeAllocatable"`
	Quirks      Quirks                `json:"quirks"`
}

func summarize(tr *Trace) TraceSummary {
	s := TraceSummary{Start: tr.Start, End: tr.Start.Add(time.Duration(tr.Steps-1) * tr.Step), Step: tr.Step.String(),
		Steps: tr.Steps, Pods: len(tr.Pods), Nodes: len(tr.Nodes), Packed: tr.Packed, Quirks: tr.Quirks}
	if len(tr.Nodes) > 0 {
		s.Allocatable = tr.Nodes[0].Allocatable
	}
	return s
}

// Result is one contender's outcome.
type Result struct {
	Name     string `json:"name"`
	Describe string `json:"describe,omitempty"`
	// Baseline: computed outside the product's policy (baseline.go).
	Baseline bool         `json:"baseline"`
	Cluster  Measures     `json:"cluster"`
	Nodes    []NodeResult `json:"nodes"`
	// Timeline of one node (the first contender only).
	Timeline *Timeline `json:"timeline,omitempty"`
}

// NodeResult is one node's measures.
type NodeResult struct {
	Name     string `json:"name"`
	Pods     int    `json:"pods"`
	Measures `json:",inline"`
}

// Measures of one node, or of the cluster (every node's intervals together).
type Measures struct {
	// NodeIntervals: (node, step) pairs judged, each the time from one step
	// to the next during which the room written at the first was in force.
	NodeIntervals int              `json:"nodeIntervals"`
	CPU           ResourceMeasures `json:"cpu"`
	Memory        ResourceMeasures `json:"memory"`
	// Writes of the annotation (policy.Decide).
	Writes int `json:"writes"`
	// Evictions the eviction controller chose.
	Evictions int `json:"evictions"`
}

// ResourceMeasures are the measures of one resource (docs/design.md, "Replay").
type ResourceMeasures struct {
	// MeanRoom is the mean room in force per node-interval (millicores or bytes).
	MeanRoom float64 `json:"meanRoom"`
	// ReclaimedShare is the sum of the room in force over the sum of the
	// capacity regular work left unused (allocatable minus usage, at least 0).
	ReclaimedShare float64 `json:"reclaimedShare"`
	// Violations: node-intervals where the usage at the interval's end plus
	// the room in force exceeds allocatable; ViolationRate, their share.
	Violations    int     `json:"violations"`
	ViolationRate float64 `json:"violationRate"`
	// MeanExcess and MaxExcess: usage + room - allocatable over the
	// violations, as a share of allocatable.
	MeanExcess float64 `json:"meanExcess"`
	MaxExcess  float64 `json:"maxExcess"`
	// Episodes: runs of consecutive violations on one node; their mean and
	// longest duration.
	Episodes       int    `json:"episodes"`
	MeanEpisode    string `json:"meanEpisode"`
	LongestEpisode string `json:"longestEpisode"`
	// episode lengths in steps
	meanSteps float64
	maxSteps  int
}

// Timeline is one node's room and usage at every step.
type Timeline struct {
	Node        string                  `json:"node"`
	Start       time.Time               `json:"start"`
	Step        time.Duration           `json:"step"`
	Allocatable reclaimable.Resources   `json:"allocatable"`
	Usage       []reclaimable.Resources `json:"usage"`
	Room        []reclaimable.Resources `json:"room"`
	Evictions   []int                   `json:"evictions"`
	total       int
}

// resourceAcc sums one resource's intervals.
type resourceAcc struct {
	room, unused   float64
	violations     int
	excess, maxExc float64
	run            int
	episodes       int
	episodeSteps   int
	longest        int
}

type accumulator struct {
	intervals int
	cpu, mem  resourceAcc
	writes    int
	evictions int
}

// interval judges one node-interval: room was in force, usage followed.
func (a *accumulator) interval(room, usage, alloc reclaimable.Resources) {
	a.intervals++
	a.cpu.interval(room.CPUMilli, usage.CPUMilli, alloc.CPUMilli)
	a.mem.interval(room.MemoryBytes, usage.MemoryBytes, alloc.MemoryBytes)
}

func (r *resourceAcc) interval(room, usage, alloc int64) {
	r.room += float64(room)
	r.unused += float64(max(alloc-usage, 0))
	if over := usage + room - alloc; over > 0 {
		r.violations++
		e := float64(over) / float64(alloc)
		r.excess += e
		r.maxExc = max(r.maxExc, e)
		r.run++
		return
	}
	r.endRun()
}

func (r *resourceAcc) endRun() {
	if r.run > 0 {
		r.episodes++
		r.episodeSteps += r.run
		r.longest = max(r.longest, r.run)
		r.run = 0
	}
}

// finish closes the episodes still running at the end of the trace.
func (a *accumulator) finish() {
	a.cpu.endRun()
	a.mem.endRun()
}

func (a *accumulator) add(b *accumulator) {
	a.intervals += b.intervals
	a.writes += b.writes
	a.evictions += b.evictions
	for _, p := range [][2]*resourceAcc{{&a.cpu, &b.cpu}, {&a.mem, &b.mem}} {
		x, y := p[0], p[1]
		x.room += y.room
		x.unused += y.unused
		x.violations += y.violations
		x.excess += y.excess
		x.maxExc = max(x.maxExc, y.maxExc)
		x.episodes += y.episodes
		x.episodeSteps += y.episodeSteps
		x.longest = max(x.longest, y.longest)
	}
}

func (a *accumulator) measures(_ reclaimable.Resources, step time.Duration) Measures {
	return Measures{NodeIntervals: a.intervals, CPU: a.cpu.measures(a.intervals, step), Memory: a.mem.measures(a.intervals, step),
		Writes: a.writes, Evictions: a.evictions}
}

func (r *resourceAcc) measures(intervals int, step time.Duration) ResourceMeasures {
	m := ResourceMeasures{Violations: r.violations, MaxExcess: r.maxExc, Episodes: r.episodes, maxSteps: r.longest,
		LongestEpisode: (time.Duration(r.longest) * step).String(), MeanEpisode: "0s"}
	if intervals > 0 {
		m.MeanRoom = r.room / float64(intervals)
		m.ViolationRate = float64(r.violations) / float64(intervals)
	}
	if r.unused > 0 {
		m.ReclaimedShare = r.room / r.unused
	}
	if r.violations > 0 {
		m.MeanExcess = r.excess / float64(r.violations)
	}
	if r.episodes > 0 {
		m.meanSteps = float64(r.episodeSteps) / float64(r.episodes)
		m.MeanEpisode = (time.Duration(m.meanSteps * float64(step))).Round(time.Second).String()
	}
	return m
}
