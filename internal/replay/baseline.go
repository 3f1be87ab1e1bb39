package replay

import (
	"fmt"
	"math"
	"time"

	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// This file holds what the evaluation compares the product with and the
// product's policy does not compute: baselines live here, never in package
// policy.

// Baseline is a room formula outside the product's policy.
type Baseline interface {
	// Room is the node's room from its allocatable and the usage and
	// requests of its regular pods up to now.
	Room(alloc reclaimable.Resources, in *baseInput) reclaimable.Resources
}

// baseInput keeps a node's recent usage (the same sums the node samples
// carry) and the requests of its present pods.
type baseInput struct {
	// usage holds the newest samples, newest last: at least the newest
	// keep (maxBaseSteps when zero), at most twice that, so that a push
	// copies the kept samples down only once per keep pushes.
	usage    []reclaimable.Resources
	keep     int
	requests reclaimable.Resources
}

const maxBaseSteps = 64

// historySteps is implemented by formulas that read more than maxBaseSteps
// samples back: the run keeps that many for every node.
type historySteps interface{ historySteps() int }

func (b *baseInput) push(usage, requests reclaimable.Resources) {
	keep := max(b.keep, maxBaseSteps)
	if len(b.usage) >= 2*keep {
		b.usage = b.usage[:copy(b.usage, b.usage[len(b.usage)-keep+1:])]
	}
	b.usage = append(b.usage, usage)
	b.requests = requests
}

// peak is the largest usage of each resource over the newest n samples.
func (b *baseInput) peak(n int) reclaimable.Resources {
	var p reclaimable.Resources
	for _, u := range b.usage[max(len(b.usage)-n, 0):] {
		p = p.Max(u)
	}
	return p
}

// windowSteps is how many samples a window of w at steps of step holds: this
// one and those up to w back.
func windowSteps(w, step time.Duration) int { return int(w/step) + 1 }

// RequestsMinusPeak is the room "requests minus peak usage, no margin": what
// the node's regular pods requested and did not use at their peak over the
// window (the samples from now - Window to now, as the policy's window).
type RequestsMinusPeak struct {
	Window, Step time.Duration
}

// Room implements Baseline.
func (r RequestsMinusPeak) Room(_ reclaimable.Resources, in *baseInput) reclaimable.Resources {
	p := in.peak(min(windowSteps(r.Window, r.Step), maxBaseSteps))
	return reclaimable.Resources{CPUMilli: max(in.requests.CPUMilli-p.CPUMilli, 0),
		MemoryBytes: max(in.requests.MemoryBytes-p.MemoryBytes, 0)}
}

// LongPeak is the usage policy's formula with a longer memory: allocatable
// x (1 - margin) minus the peak of regular usage over a window of hours or
// days, per resource, no minimum. A node whose regular usage is steady lends
// nearly all of what it leaves unused, one whose usage swings lends only what
// its highest swing of the window leaves. The policy's window stops at
// policy.MaxWindow (an hour) and the publisher's history at
// policy.MaxHistoryAge, so this is evaluation code: what a policy reading
// further back would give (docs/design.md, "Replay").
type LongPeak struct {
	CPUWindow, MemoryWindow time.Duration
	CPUMargin, MemoryMargin float64
	Step                    time.Duration
}

// Room implements Baseline.
func (l LongPeak) Room(alloc reclaimable.Resources, in *baseInput) reclaimable.Resources {
	c, m := in.peak(windowSteps(l.CPUWindow, l.Step)), in.peak(windowSteps(l.MemoryWindow, l.Step))
	lend := func(a int64, margin float64, peak int64) int64 {
		return max(a-int64(math.Ceil(float64(a)*margin))-peak, 0)
	}
	return reclaimable.Resources{CPUMilli: lend(alloc.CPUMilli, l.CPUMargin, c.CPUMilli),
		MemoryBytes: lend(alloc.MemoryBytes, l.MemoryMargin, m.MemoryBytes)}
}

func (l LongPeak) historySteps() int {
	return max(windowSteps(l.CPUWindow, l.Step), windowSteps(l.MemoryWindow, l.Step))
}

// Name says the formula's settings, as a frontier row names them.
func (l LongPeak) Name() string {
	return fmt.Sprintf("peak cpu %s +%.2f, memory %s +%.2f", ShortDuration(l.CPUWindow.String()), l.CPUMargin,
		ShortDuration(l.MemoryWindow.String()), l.MemoryMargin)
}

// KoordinatorSettings expresses Koordinator's default batch resource formula
// (usage policy: allocatable x reclaim threshold - high-priority usage -
// system usage, thresholds 60 % of CPU and 65 % of memory) as the product's
// policy settings: margins of 40 % and 35 %, no minimum, the newest sample
// alone (Koordinator reads the node's usage averaged over its report
// window, which a 5-minute sample already is), its 10 % update threshold.
func KoordinatorSettings() policy.Settings {
	s := policy.DefaultSettings()
	s.Policy = policy.PolicyUsage
	s.Window = time.Minute
	s.Peak = policy.PeakMax
	s.ChangeThreshold = 0.10
	s.CPU = policy.ResourceSettings{Margin: 0.40, MaxRatio: 1, Minimum: 0}
	s.Memory = policy.ResourceSettings{Margin: 0.35, MaxRatio: 1, Minimum: 0}
	return s
}

// Baselines are the contenders every replay runs beside the policies.
func Baselines(step time.Duration) []Contender {
	k := KoordinatorSettings()
	return []Contender{
		{Name: "koordinator", Settings: &k, Baseline: true, Describe: "baseline: Koordinator's default usage formula (reclaim thresholds 60% cpu, 65% memory), as policy settings"},
		{Name: "requests-minus-peak", Formula: RequestsMinusPeak{Window: policy.DefaultWindow, Step: step},
			Describe: "baseline: regular requests minus their peak usage over 5m, no margin (evaluation code, not a policy)"},
	}
}
