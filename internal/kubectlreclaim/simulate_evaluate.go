package kubectlreclaim

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// evaluate runs cfg's policy for the node, as the publisher's cycle does.
func evaluate(calc *policy.Calculator, in *policy.Node, node *corev1.Node, cfg *policy.Config, now time.Time,
	metricsStaleAfter time.Duration, shape reclaimable.Resources, explain bool) SimulatedResult {
	settings, pool := cfg.For(node.Labels)
	res := calc.Compute(in, settings, now, metricsStaleAfter)
	r := SimulatedResult{Policy: string(res.Policy), Pool: pool, Reclaimable: res.Resources, ZeroReason: res.ZeroReason,
		PodsFit: podsFit(res.Resources, shape)}
	cpu, okCPU := termValue(res.Explanation.CPU, policy.TermRegularPeakUsage)
	mem, okMem := termValue(res.Explanation.Memory, policy.TermRegularPeakUsage)
	if okCPU && okMem {
		r.RegularUsage = &reclaimable.Resources{CPUMilli: cpu, MemoryBytes: mem}
	}
	if explain {
		e := res.Explanation
		r.Explanation = &e
	}
	return r
}

func termValue(re reclaimable.ResourceExplanation, name string) (int64, bool) {
	for _, t := range re.Terms {
		if t.Name == name {
			return t.Value, true
		}
	}
	return 0, false
}

// podsFit is how many pods of shape fit in r; a zero component of the shape
// does not limit.
func podsFit(r, shape reclaimable.Resources) int64 {
	fit := int64(-1)
	if shape.CPUMilli > 0 {
		fit = r.CPUMilli / shape.CPUMilli
	}
	if shape.MemoryBytes > 0 {
		m := r.MemoryBytes / shape.MemoryBytes
		if fit < 0 || m < fit {
			fit = m
		}
	}
	return max(fit, 0)
}

func summarize(items []SimulatedNode, result func(*SimulatedNode) *SimulatedResult) SimulationSummary {
	s := SimulationSummary{Nodes: len(items)}
	zero := map[string]int{}
	for i := range items {
		n := &items[i]
		r := result(n)
		s.Allocatable = s.Allocatable.Add(n.Allocatable)
		s.Reclaimable = s.Reclaimable.Add(r.Reclaimable)
		s.PodsFit += r.PodsFit
		if r.ZeroReason != "" {
			zero[r.ZeroReason]++
		}
	}
	ratio := func(part, whole int64) float64 {
		if whole <= 0 {
			return 0
		}
		return float64(part) / float64(whole)
	}
	s.CPUPercent = 100 * ratio(s.Reclaimable.CPUMilli, s.Allocatable.CPUMilli)
	s.MemoryPercent = 100 * ratio(s.Reclaimable.MemoryBytes, s.Allocatable.MemoryBytes)
	// Total over the mean node is the share times the node count.
	s.CPUNodesWorth = float64(s.Nodes) * s.CPUPercent / 100
	s.MemoryNodesWorth = float64(s.Nodes) * s.MemoryPercent / 100
	for reason, n := range zero {
		s.ZeroNodes = append(s.ZeroNodes, ReasonCount{Reason: reason, Nodes: n})
	}
	slices.SortFunc(s.ZeroNodes, func(a, b ReasonCount) int { return strings.Compare(a.Reason, b.Reason) })
	return s
}

// Sort keys of simulate --sort-by, like those of nodes.
var simulateSortKeys = joinKeys(
	resourceKeys("reclaimable", func(n *SimulatedNode) *reclaimable.Resources { return &n.Reclaimable }),
	resourceKeys("allocatable", func(n *SimulatedNode) *reclaimable.Resources { return &n.Allocatable }),
	resourceKeys("usage", func(n *SimulatedNode) *reclaimable.Resources { return n.RegularUsage }),
	resourceKeys("difference", func(n *SimulatedNode) *reclaimable.Resources { return n.Difference }),
	resourceKeys("change", func(n *SimulatedNode) *reclaimable.Resources {
		if n.Compare == nil {
			return nil
		}
		return n.Compare.Change
	}),
)
