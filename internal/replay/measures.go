package replay

import (
	"slices"
	"time"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Report is the outcome of a replay.
type Report struct {
	Trace TraceSummary `json:"trace"`
	// BatchLifetime is how long a batch job runs when nobody evicts it.
	BatchLifetime string   `json:"batchLifetime"`
	Results       []Result `json:"results"`
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
	// Baseline: a reference to compare with, not a candidate default.
	Baseline bool     `json:"baseline"`
	Cluster  Measures `json:"cluster"`
	// Spread of the per-node measures.
	Spread Spread       `json:"spread"`
	Nodes  []NodeResult `json:"nodes"`
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
//
// A node-interval is a node and the time from one step to the next. Over it
// the room written at the first step is in force, and the batch pods placed
// up to the first step hold what they were granted: they keep it until they
// complete or are evicted, whatever the room does meanwhile. Both are judged
// against the regular usage at the second step.
type Measures struct {
	NodeIntervals int              `json:"nodeIntervals"`
	CPU           ResourceMeasures `json:"cpu"`
	Memory        ResourceMeasures `json:"memory"`
	// RegularHarm: node-intervals where regular memory use plus the batch
	// memory held exceeds allocatable, an OOM risk to regular work. It is
	// Memory.Violations under the name of what it means.
	RegularHarm     int     `json:"regularHarm"`
	RegularHarmRate float64 `json:"regularHarmRate"`
	// CPUShortfall is the share of the CPU granted to batch pods that
	// regular demand took back: Σ min(held, max(0, usage + held - allocatable))
	// over Σ held. Batch pods run at the minimum CPU weight, so the kernel
	// serves regular pods first and the batch pods get what is left.
	CPUShortfall float64 `json:"cpuShortfall"`
	// BatchPodHours: the time batch pods ran, summed over the pods.
	BatchPodHours float64 `json:"batchPodHours"`
	// Evictions the eviction controller chose, Completed the batch jobs that
	// ran their whole lifetime.
	Evictions int `json:"evictions"`
	Completed int `json:"completed"`
	// EvictionsPer100PodHours: evictions per 100 batch pod-hours.
	EvictionsPer100PodHours float64 `json:"evictionsPer100PodHours"`
	// StaleIntervals: node-intervals whose room was zero because the node's
	// usage samples were stale (Config.Outages); the batch pods stay.
	StaleIntervals int `json:"staleIntervals"`
	// StatusBelowHeld: node-intervals where the status (what kubelet admits
	// against) was below what batch pods held: a kubelet restart would have
	// rejected running pods. The floor keeps it at 0.
	StatusBelowHeld int `json:"statusBelowHeld"`
	// Writes of the annotation (policy.Decide).
	Writes int `json:"writes"`
}

// ResourceMeasures are the measures of one resource (docs/design.md, "Replay").
type ResourceMeasures struct {
	// MeanRoom is the mean room in force per node-interval (millicores or
	// bytes), MeanHeld the mean batch pods held.
	MeanRoom float64 `json:"meanRoom"`
	MeanHeld float64 `json:"meanHeld"`
	// ReclaimedShare is what batch pods held and could use, Σ min(held,
	// unused), over the capacity regular work left unused, Σ max(allocatable
	// - usage, 0). PublishedShare is the room in force over the same.
	ReclaimedShare float64 `json:"reclaimedShare"`
	PublishedShare float64 `json:"publishedShare"`
	// Violations: node-intervals where the usage at the interval's end plus
	// what batch pods held exceeds allocatable; ViolationRate, their share.
	Violations    int     `json:"violations"`
	ViolationRate float64 `json:"violationRate"`
	// MeanExcess and MaxExcess: usage + held - allocatable over the
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

// Spread is how a measure varies across nodes: its median and its worst node.
type Spread struct {
	CPUReclaimed            NodeSpread `json:"cpuReclaimed"`
	MemoryReclaimed         NodeSpread `json:"memoryReclaimed"`
	CPUViolationRate        NodeSpread `json:"cpuViolationRate"`
	CPUShortfall            NodeSpread `json:"cpuShortfall"`
	RegularHarm             NodeSpread `json:"regularHarm"`
	EvictionsPer100PodHours NodeSpread `json:"evictionsPer100PodHours"`
}

// NodeSpread is one measure's median over the nodes and its worst node (the
// least reclaimed, the most of anything else).
type NodeSpread struct {
	Median    float64 `json:"median"`
	Worst     float64 `json:"worst"`
	WorstNode string  `json:"worstNode"`
}

// spreadOf computes the spread of every node's measure; lowWorst: the
// smallest value is the worst.
func spreadOf(nodes []NodeResult, measure func(*Measures) float64, lowWorst bool) NodeSpread {
	if len(nodes) == 0 {
		return NodeSpread{}
	}
	vals := make([]float64, len(nodes))
	worst := 0
	for i := range nodes {
		vals[i] = measure(&nodes[i].Measures)
		if (lowWorst && vals[i] < vals[worst]) || (!lowWorst && vals[i] > vals[worst]) {
			worst = i
		}
	}
	s := NodeSpread{Worst: vals[worst], WorstNode: nodes[worst].Name}
	slices.Sort(vals)
	if n := len(vals); n%2 == 1 {
		s.Median = vals[n/2]
	} else {
		s.Median = (vals[n/2-1] + vals[n/2]) / 2
	}
	return s
}

func spread(nodes []NodeResult) Spread {
	return Spread{
		CPUReclaimed:            spreadOf(nodes, func(m *Measures) float64 { return m.CPU.ReclaimedShare }, true),
		MemoryReclaimed:         spreadOf(nodes, func(m *Measures) float64 { return m.Memory.ReclaimedShare }, true),
		CPUViolationRate:        spreadOf(nodes, func(m *Measures) float64 { return m.CPU.ViolationRate }, false),
		CPUShortfall:            spreadOf(nodes, func(m *Measures) float64 { return m.CPUShortfall }, false),
		RegularHarm:             spreadOf(nodes, func(m *Measures) float64 { return float64(m.RegularHarm) }, false),
		EvictionsPer100PodHours: spreadOf(nodes, func(m *Measures) float64 { return m.EvictionsPer100PodHours }, false),
	}
}

// Timeline is one node's usage, room and batch holdings at every step.
type Timeline struct {
	Node        string                  `json:"node"`
	Start       time.Time               `json:"start"`
	Step        time.Duration           `json:"step"`
	Allocatable reclaimable.Resources   `json:"allocatable"`
	Usage       []reclaimable.Resources `json:"usage"`
	Room        []reclaimable.Resources `json:"room"`
	// Held is what batch pods hold from the step to the next.
	Held      []reclaimable.Resources `json:"held"`
	Evictions []int                   `json:"evictions"`
	total     int
}

// resourceAcc sums one resource's intervals.
type resourceAcc struct {
	room, held, served, unused float64
	violations                 int
	excess, maxExc             float64
	run                        int
	episodes                   int
	episodeSteps               int
	longest                    int
}

type accumulator struct {
	intervals int
	cpu, mem  resourceAcc
	// shortfall is the CPU regular demand took back from the grants.
	shortfall       float64
	podSteps        int
	stale           int
	statusBelowHeld int
	writes          int
	evictions       int
	completed       int
}

// span is what one node-interval carries: the room and status in force,
// what batch pods held, how many there were, and whether the room was a
// stale zero.
type span struct {
	room, held, status reclaimable.Resources
	pods               int
	stale              bool
}

// interval judges one node-interval against the regular usage at its end.
func (a *accumulator) interval(s span, usage, alloc reclaimable.Resources) {
	a.intervals++
	a.podSteps += s.pods
	if s.stale {
		a.stale++
	}
	if s.status.CPUMilli < s.held.CPUMilli || s.status.MemoryBytes < s.held.MemoryBytes {
		a.statusBelowHeld++
	}
	over := a.cpu.interval(s.room.CPUMilli, s.held.CPUMilli, usage.CPUMilli, alloc.CPUMilli)
	a.shortfall += float64(min(over, s.held.CPUMilli))
	a.mem.interval(s.room.MemoryBytes, s.held.MemoryBytes, usage.MemoryBytes, alloc.MemoryBytes)
}

// interval adds one node-interval of a resource and returns by how much
// usage and held exceed allocatable (0 when they fit).
func (r *resourceAcc) interval(room, held, usage, alloc int64) int64 {
	unused := max(alloc-usage, 0)
	r.room += float64(room)
	r.held += float64(held)
	r.served += float64(min(held, unused))
	r.unused += float64(unused)
	over := usage + held - alloc
	if over <= 0 {
		r.endRun()
		return 0
	}
	r.violations++
	e := float64(over) / float64(alloc)
	r.excess += e
	r.maxExc = max(r.maxExc, e)
	r.run++
	return over
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
	a.shortfall += b.shortfall
	a.podSteps += b.podSteps
	a.stale += b.stale
	a.statusBelowHeld += b.statusBelowHeld
	a.writes += b.writes
	a.evictions += b.evictions
	a.completed += b.completed
	for _, p := range [][2]*resourceAcc{{&a.cpu, &b.cpu}, {&a.mem, &b.mem}} {
		x, y := p[0], p[1]
		x.room += y.room
		x.held += y.held
		x.served += y.served
		x.unused += y.unused
		x.violations += y.violations
		x.excess += y.excess
		x.maxExc = max(x.maxExc, y.maxExc)
		x.episodes += y.episodes
		x.episodeSteps += y.episodeSteps
		x.longest = max(x.longest, y.longest)
	}
}

func (a *accumulator) measures(step time.Duration) Measures {
	m := Measures{NodeIntervals: a.intervals, CPU: a.cpu.measures(a.intervals, step), Memory: a.mem.measures(a.intervals, step),
		Writes: a.writes, Evictions: a.evictions, Completed: a.completed, StaleIntervals: a.stale, StatusBelowHeld: a.statusBelowHeld,
		BatchPodHours: float64(a.podSteps) * step.Hours()}
	m.RegularHarm, m.RegularHarmRate = m.Memory.Violations, m.Memory.ViolationRate
	if a.cpu.held > 0 {
		m.CPUShortfall = a.shortfall / a.cpu.held
	}
	if m.BatchPodHours > 0 {
		m.EvictionsPer100PodHours = 100 * float64(a.evictions) / m.BatchPodHours
	}
	return m
}

func (r *resourceAcc) measures(intervals int, step time.Duration) ResourceMeasures {
	m := ResourceMeasures{Violations: r.violations, MaxExcess: r.maxExc, Episodes: r.episodes, maxSteps: r.longest,
		LongestEpisode: (time.Duration(r.longest) * step).String(), MeanEpisode: "0s"}
	if intervals > 0 {
		m.MeanRoom = r.room / float64(intervals)
		m.MeanHeld = r.held / float64(intervals)
		m.ViolationRate = float64(r.violations) / float64(intervals)
	}
	if r.unused > 0 {
		m.ReclaimedShare = r.served / r.unused
		m.PublishedShare = r.room / r.unused
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
