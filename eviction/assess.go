package eviction

// This file is the pure decision: what one node's measurements of one cycle
// say, given what the controller remembers of the node. No client-go, no
// clock: the publisher and the replay call it the same way (through
// Controller.Observe), and the tests call it directly.

import (
	"cmp"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Reasons an eviction names, in evictions_total{reason} and its Events.
const (
	PressureMemory        = "memory-pressure"
	PressureCPUStarvation = "cpu-starvation"
)

// Observation is what one node measured in one cycle.
type Observation struct {
	Node        string
	Allocatable reclaimable.Resources
	// Time is when the node was last measured: its newest node usage
	// sample (policy.Result.MetricsTime). Zero when it never was. An
	// observation older than the controller's MetricsStaleAfter is no
	// evidence of anything: no data is not pressure.
	Time time.Time
	// Used is the measured usage of every pod on the node, regular and
	// reclaimed: the sum of their newest fresh samples (working set for
	// memory).
	Used reclaimable.Resources
	// Reclaimed are the node's reclaimed pods. Observe does not keep the
	// slice: the caller may reuse it.
	Reclaimed []PodUsage
	// Settings are the node's pool's thresholds.
	Settings policy.EvictionSettings
	// Room is the room computed this cycle and Held what the reclaimed pods
	// hold: a room below what is held stops placement (extender) and
	// nothing more; they feed only the nodes_over_room gauge.
	Room, Held reclaimable.Resources
}

// PodUsage is one reclaimed pod as measured.
type PodUsage struct {
	UID types.UID
	// Grant is what the pod requests of the reclaimed resources.
	Grant reclaimable.Resources
	// Used is its newest fresh usage sample; Measured is false without one.
	Used     reclaimable.Resources
	Measured bool
}

// Params are the controller's settings Assess reads.
type Params struct {
	// Grace is how long memory use must stay above EvictAbove before the
	// first eviction of an episode.
	Grace time.Duration
	// Slack is taken off every duration compared with the cycle clock:
	// cycles start on a ticker but observe after their metrics reads,
	// whose duration varies, and a grace of exactly n periods would often
	// take n+1 without it.
	Slack time.Duration
	// StaleAfter is the publisher's --metrics-stale-after.
	StaleAfter time.Duration
}

// NodeState is what the controller remembers of one node between cycles;
// the zero value is a node with no history. Assess updates it.
type NodeState struct {
	// OverSince is when memory use was first seen above EvictAbove in the
	// current run of fresh cycles; zero when it is not above.
	OverSince time.Time
	// Pressure is set once memory use stayed above EvictAbove for the
	// grace, and stays set until use is back under EvictUntilBelow.
	Pressure bool
	// Starved holds, for each reclaimed pod starved in every fresh cycle
	// since, when that run began.
	Starved map[types.UID]time.Time
}

// Verdict is what a node's observation calls for.
type Verdict struct {
	// Fresh: the observation may evict at all.
	Fresh bool
	// Memory is set when memory must be freed now.
	Memory *MemoryVerdict
	// Starved are the reclaimed pods starved of CPU for the whole window,
	// the longest starved first.
	Starved []Starved
	// OverRoom: on fresh data, the reclaimed pods hold more than the room
	// (placement stops; nothing is evicted for it).
	OverRoom bool
}

// MemoryVerdict says how much memory must be freed and why.
type MemoryVerdict struct {
	// Used is the pods' measured memory; Above and Until the thresholds in
	// bytes, AboveShare and UntilShare as the policy file gives them.
	Used, Above, Until     int64
	AboveShare, UntilShare float64
	// Free is what must be freed to bring use under Until.
	Free int64
}

// Starved is one pod to move for CPU starvation.
type Starved struct {
	UID   types.UID
	Since time.Time
	// Used and Grant are its CPU, NodeUsed the node's pods' CPU, at the
	// last observation.
	Used, Grant, NodeUsed int64
}

// Assess decides what one node's observation at now calls for, and updates
// st.
//
// Memory: once the pods' measured memory has stayed above EvictAbove of
// allocatable for the grace, memory pressure holds until it is back under
// EvictUntilBelow; meanwhile the verdict asks to free the difference. CPU
// starvation (when enabled): a reclaimed pod whose usage stayed below
// PodBelow of its CPU grant while the node's pods used at least NodeAbove of
// allocatable CPU, in every fresh cycle of Window. A cycle on stale or
// missing data ends both: only fresh measurements may evict, and stale time
// never counts towards a grace or a window.
func (st *NodeState) Assess(obs *Observation, now time.Time, p Params) Verdict {
	var v Verdict
	v.Fresh = !obs.Time.IsZero() && now.Sub(obs.Time) <= policy.MetricsStaleAfter(p.StaleAfter)
	if !v.Fresh {
		*st = NodeState{}
		return v
	}
	v.OverRoom = Over(obs.Held, obs.Room)
	set := obs.Settings.OrDefault()
	v.Memory = st.memory(obs, set.MemoryPressure, now, p)
	if set.CPUStarvation.Enabled {
		v.Starved = st.starvation(obs, set.CPUStarvation, now, p)
	} else {
		st.Starved = nil
	}
	return v
}

func (st *NodeState) memory(obs *Observation, m policy.MemoryPressure, now time.Time, p Params) *MemoryVerdict {
	alloc := float64(obs.Allocatable.MemoryBytes)
	mv := MemoryVerdict{Used: obs.Used.MemoryBytes, Above: int64(m.EvictAbove * alloc), Until: int64(m.EvictUntilBelow * alloc),
		AboveShare: m.EvictAbove, UntilShare: m.EvictUntilBelow}
	switch {
	case mv.Used > mv.Above:
		if st.OverSince.IsZero() {
			st.OverSince = now
		}
		if now.Sub(st.OverSince)+p.Slack >= p.Grace {
			st.Pressure = true
		}
	case st.Pressure && mv.Used >= mv.Until:
		// Between the thresholds during an episode: go on freeing.
	default:
		st.OverSince, st.Pressure = time.Time{}, false
	}
	if !st.Pressure {
		return nil
	}
	mv.Free = mv.Used - mv.Until
	return &mv
}

func (st *NodeState) starvation(obs *Observation, c policy.CPUStarvation, now time.Time, p Params) []Starved {
	nodeUsed := obs.Used.CPUMilli
	saturated := float64(nodeUsed) >= c.NodeAbove*float64(obs.Allocatable.CPUMilli)
	if !saturated {
		st.Starved = nil
		return nil
	}
	prev := st.Starved
	st.Starved = make(map[types.UID]time.Time, len(prev))
	var out []Starved
	for _, pod := range obs.Reclaimed {
		// Unmeasured is not starved, and a pod granted no CPU cannot be.
		if !pod.Measured || pod.Grant.CPUMilli <= 0 || float64(pod.Used.CPUMilli) >= c.PodBelow*float64(pod.Grant.CPUMilli) {
			continue
		}
		since, ok := prev[pod.UID]
		if !ok {
			since = now
		}
		st.Starved[pod.UID] = since
		if now.Sub(since)+p.Slack >= c.Window {
			out = append(out, Starved{UID: pod.UID, Since: since, Used: pod.Used.CPUMilli, Grant: pod.Grant.CPUMilli, NodeUsed: nodeUsed})
		}
	}
	sortStarved(out)
	return out
}

// Measure builds the observation of a node from the policy's view of it
// (policyinput's Assembler) and the policy's result at now: the usage of
// every pod whose newest sample is fresh, and each reclaimed pod's.
// reclaimed is a buffer to reuse (nil is fine); the observation's Reclaimed
// is built in it.
func Measure(in *policy.Node, res policy.Result, held reclaimable.Resources, settings policy.EvictionSettings,
	now time.Time, staleAfter time.Duration, reclaimed []PodUsage) Observation {
	obs := Observation{Node: in.Name, Allocatable: in.Allocatable, Time: res.MetricsTime, Settings: settings,
		Room: res.Resources, Held: held, Reclaimed: reclaimed[:0]}
	staleAfter = policy.MetricsStaleAfter(staleAfter)
	for i := range in.Pods {
		p := &in.Pods[i]
		s, ok := newest(p)
		ok = ok && now.Sub(s.Time) <= staleAfter
		used := reclaimable.Resources{CPUMilli: s.CPUMilli, MemoryBytes: s.MemoryBytes}
		if ok {
			obs.Used = obs.Used.Add(used)
		}
		if p.Reclaimed {
			if !ok {
				used = reclaimable.Resources{}
			}
			obs.Reclaimed = append(obs.Reclaimed, PodUsage{UID: types.UID(p.UID), Grant: p.Grant, Used: used, Measured: ok})
		}
	}
	return obs
}

// newest is a pod's newest usage sample, read where the history keeps it.
func newest(p *policy.Pod) (policy.Sample, bool) {
	if p.Series.Live() {
		return p.Series.Newest()
	}
	if len(p.Samples) == 0 {
		return policy.Sample{}, false
	}
	return p.Samples[len(p.Samples)-1], true
}

func sortStarved(s []Starved) {
	slices.SortFunc(s, func(a, b Starved) int {
		if c := a.Since.Compare(b.Since); c != 0 {
			return c
		}
		return cmp.Compare(a.UID, b.UID)
	})
}
