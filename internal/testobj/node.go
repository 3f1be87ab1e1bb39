package testobj

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// NodeWrapper builds a Node. The annotation setters (Room, Held, Pool,
// WrittenAt, ...) fill one reclaimable.Annotation, which Obj encodes with
// the annotation's own encoder, as the publisher writes it.
type NodeWrapper struct {
	corev1.Node
	names      reclaimable.Names
	annotation *reclaimable.Annotation
	raw        *string
}

// MakeNode starts a node with no name, no status and the resource names of
// the default domain.
func MakeNode() *NodeWrapper {
	return &NodeWrapper{names: defaultNames}
}

// Obj returns the node built, its annotation encoded.
func (n *NodeWrapper) Obj() *corev1.Node {
	value, ok := "", false
	switch {
	case n.raw != nil:
		value, ok = *n.raw, true
	case n.annotation != nil:
		v, err := n.annotation.Marshal()
		if err != nil {
			panic("testobj: " + err.Error())
		}
		value, ok = v, true
	}
	if ok {
		if n.Annotations == nil {
			n.Annotations = map[string]string{}
		}
		n.Annotations[n.names.Annotation] = value
	}
	return &n.Node
}

// Domain sets the resource names (the annotation's and Floor's); call it
// before Floor.
func (n *NodeWrapper) Domain(names reclaimable.Names) *NodeWrapper {
	n.names = names
	return n
}

// Name sets the node's name.
func (n *NodeWrapper) Name(name string) *NodeWrapper {
	n.Node.Name = name
	return n
}

// Label adds a label, such as the one a policy's pool selects.
func (n *NodeWrapper) Label(key, value string) *NodeWrapper {
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	n.Labels[key] = value
	return n
}

// NoAnnotations gives the node an empty, not nil, annotation map, as a node
// read from the API server may have.
func (n *NodeWrapper) NoAnnotations() *NodeWrapper {
	n.Annotations = map[string]string{}
	return n
}

// Capacity sets the native cpu and memory of status.capacity and, equal to
// it, of status.allocatable.
func (n *NodeWrapper) Capacity(cpu, memory string) *NodeWrapper {
	n.Status.Capacity = set(set(n.Status.Capacity, corev1.ResourceCPU, resource.MustParse(cpu)), corev1.ResourceMemory, resource.MustParse(memory))
	return n.Allocatable(cpu, memory)
}

// Allocatable sets the native cpu and memory of status.allocatable alone,
// for a node that keeps some of its capacity back (after Capacity).
func (n *NodeWrapper) Allocatable(cpu, memory string) *NodeWrapper {
	n.Status.Allocatable = set(set(n.Status.Allocatable, corev1.ResourceCPU, resource.MustParse(cpu)), corev1.ResourceMemory, resource.MustParse(memory))
	return n
}

// Floor sets the reclaimed resources of status.capacity and
// status.allocatable: the floor the publisher and the webhook write
// (max(room, held) when they agree with the annotation).
func (n *NodeWrapper) Floor(r reclaimable.Resources) *NodeWrapper {
	for _, l := range []*corev1.ResourceList{&n.Status.Capacity, &n.Status.Allocatable} {
		*l = set(*l, n.names.CPU, *resource.NewQuantity(r.CPUMilli, resource.DecimalSI))
		*l = set(*l, n.names.Memory, *resource.NewQuantity(r.MemoryBytes, resource.BinarySI))
	}
	return n
}

// Annotation sets the whole annotation, for one the setters below do not
// write (an explanation, a zero reason).
func (n *NodeWrapper) Annotation(a reclaimable.Annotation) *NodeWrapper {
	n.annotation, n.raw = &a, nil
	return n
}

// RawAnnotation sets the annotation's value as given, for a value the
// publisher would not write (empty, malformed, forged); Obj writes it even
// when empty.
func (n *NodeWrapper) RawAnnotation(value string) *NodeWrapper {
	n.raw, n.annotation = &value, nil
	return n
}

// Room publishes cpuMilli millicores and memBytes bytes of room, by the
// policy "usage" unless Policy says otherwise.
func (n *NodeWrapper) Room(cpuMilli, memBytes int64) *NodeWrapper {
	a := n.ann()
	a.CPUMilli, a.MemoryBytes = cpuMilli, memBytes
	return n
}

// Held records in the annotation what the node's reclaimed pods held when
// it was written.
func (n *NodeWrapper) Held(cpuMilli, memBytes int64) *NodeWrapper {
	n.ann().Held = &reclaimable.Resources{CPUMilli: cpuMilli, MemoryBytes: memBytes}
	return n
}

// Policy names the policy that computed the room.
func (n *NodeWrapper) Policy(name string) *NodeWrapper {
	n.ann().Policy = name
	return n
}

// Pool names the pool whose settings computed the room; the node's labels
// that select it are Label's.
func (n *NodeWrapper) Pool(name string) *NodeWrapper {
	n.ann().Pool = name
	return n
}

// WrittenAt sets when the publisher wrote the annotation.
func (n *NodeWrapper) WrittenAt(t time.Time) *NodeWrapper {
	n.ann().WriteTime = t
	return n
}

// MeasuredAt sets the time of the newest usage sample the room came from.
func (n *NodeWrapper) MeasuredAt(t time.Time) *NodeWrapper {
	n.ann().MetricsTime = t
	return n
}

// ann returns the annotation the setters fill, starting one by the policy
// "usage" (the default policy) when there is none.
func (n *NodeWrapper) ann() *reclaimable.Annotation {
	if n.annotation == nil {
		n.annotation, n.raw = &reclaimable.Annotation{Policy: "usage"}, nil
	}
	return n.annotation
}
