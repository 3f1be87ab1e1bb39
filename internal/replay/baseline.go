package replay

import (
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
	usage    []reclaimable.Resources // newest last, at most maxBaseSteps
	requests reclaimable.Resources
}

const maxBaseSteps = 64

func (b *baseInput) push(usage, requests reclaimable.Resources) {
	if len(b.usage) == maxBaseSteps {
		copy(b.usage, b.usage[1:])
		b.usage = b.usage[:maxBaseSteps-1]
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

// RequestsMinusPeak is the room "requests minus peak usage, no margin": what
// the node's regular pods requested and did not use at their peak over the
// window (the samples from now - Window to now, as the policy's window).
type RequestsMinusPeak struct {
	Window, Step time.Duration
}

// Room implements Baseline.
func (r RequestsMinusPeak) Room(_ reclaimable.Resources, in *baseInput) reclaimable.Resources {
	n := min(int(r.Window/r.Step)+1, maxBaseSteps)
	p := in.peak(n)
	return reclaimable.Resources{CPUMilli: max(in.requests.CPUMilli-p.CPUMilli, 0),
		MemoryBytes: max(in.requests.MemoryBytes-p.MemoryBytes, 0)}
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
