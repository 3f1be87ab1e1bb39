package placement

import (
	"math"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Strategies of Score.
const (
	// StrategySpread scores nodes with the most free highest.
	StrategySpread = "spread"
	// StrategyBinpack scores nodes with the least free highest.
	StrategyBinpack = "binpack"
)

// Fits reports whether req fits in st.
func Fits(st State, req reclaimable.Resources) bool {
	return st.Known && st.Fresh &&
		(req.CPUMilli <= 0 || req.CPUMilli <= st.Free.CPUMilli) &&
		(req.MemoryBytes <= 0 || req.MemoryBytes <= st.Free.MemoryBytes)
}

// Score scores a node 0..maxScore by what stays free after placing req: the
// mean of the CPU and memory fractions of the room that stay free. spread
// favours the most free, binpack the least. A node req
// does not fit in scores 0. The extender scores on its API's scale
// (MaxExtenderPriority), the plugin on the framework's (MaxNodeScore).
func Score(strategy string, st State, req reclaimable.Resources, maxScore int64) int64 {
	if !Fits(st, req) {
		return 0
	}
	f := (fraction(st.Free.CPUMilli-req.CPUMilli, st.Room.CPUMilli) +
		fraction(st.Free.MemoryBytes-req.MemoryBytes, st.Room.MemoryBytes)) / 2
	sc := int64(math.Round(f * float64(maxScore)))
	if strategy == StrategyBinpack {
		sc = maxScore - sc
	}
	return sc
}

// fraction is left/published clamped to [0, 1]; 0 when nothing is published.
func fraction(left, published int64) float64 {
	if published <= 0 || left <= 0 {
		return 0
	}
	return min(float64(left)/float64(published), 1)
}

// NativeAllocatable is the node's native CPU and memory room: the smaller
// of allocatable and capacity, each as the node lists it. A resource a list
// leaves out counts as 0, so a node that lists none gets no reclaimed room:
// the node writes its own status, and an annotation it may have written too
// is only trusted within what it declares.
func NativeAllocatable(node *corev1.Node) reclaimable.Resources {
	a, c := node.Status.Allocatable, node.Status.Capacity
	return reclaimable.Resources{
		CPUMilli:    min(a.Cpu().MilliValue(), c.Cpu().MilliValue()),
		MemoryBytes: min(a.Memory().Value(), c.Memory().Value()),
	}
}

// NodeOf is what the cache keeps of node, its annotation read under name.
func NodeOf(annotation string, node *corev1.Node) Node {
	v, present := node.Annotations[annotation]
	return Node{Name: node.Name, Annotation: v, Present: present, Allocatable: NativeAllocatable(node)}
}
