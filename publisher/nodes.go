package publisher

import (
	"hash/maphash"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-reclaim/kube-reclaim/internal/compactlist"
	"github.com/kube-reclaim/kube-reclaim/internal/policyinput"
	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// nodeRecord is what the publisher keeps of a Node. A kubelet's Node
// carries its images, conditions and addresses, kilobytes each; trimmed to
// what the publisher reads it still held maps of quantities and the text of
// the publisher's own annotation, explanation included, a visible part of
// the heap at scale (docs/benchmarks.md, P4), where the record needs the
// name, labels (pools), four numbers, and the few values of the status and
// annotation that the write gate compares.
type nodeRecord struct {
	Name string
	// ResourceVersion is read by the reflector from watch bookmarks.
	ResourceVersion string
	Labels          map[string]string
	// Capacity and Allocatable are the native cpu and memory of the status.
	Capacity, Allocatable reclaimable.Resources
	// Status is the reclaimed resources the status carries (statusFloor).
	Status *reclaimable.Resources
	// Published is what the annotation says: nil when the node has none or
	// it does not parse.
	Published *policy.Published
	// annotation is a hash of the annotation's text, to tell whether it
	// changed (nodeRecords).
	annotation uint64
}

// nodeRecords converts every *corev1.Node to a *nodeRecord, for the node
// informer fed by package compactlist; anything else keeps its type. known
// returns the record the informer holds for a node, if any: a Node's
// resourceVersion moves on every kubelet heartbeat, its annotation only when
// the publisher writes it, so the JSON is parsed once per publish rather
// than on every heartbeat. The annotation is compared by a 64-bit hash with
// a seed of this process, not kept: a changed text that hashes alike, at
// odds of one in 2^64, would keep the values parsed before until the next
// publish.
func nodeRecords(names reclaimable.Names, known func(name string) *nodeRecord) compactlist.Convert {
	seed := maphash.MakeSeed()
	return func(obj runtime.Object) runtime.Object {
		node, ok := obj.(*corev1.Node)
		if !ok {
			return obj
		}
		text := node.Annotations[names.Annotation]
		r := &nodeRecord{Name: node.Name, ResourceVersion: node.ResourceVersion, Labels: node.Labels,
			Capacity: policyinput.Resources(node.Status.Capacity), Allocatable: policyinput.Resources(node.Status.Allocatable),
			Status: statusFloor(names, node), annotation: maphash.String(seed, text)}
		if old := known(node.Name); old != nil && old.annotation == r.annotation {
			r.Published = old.Published
		} else if a, err := reclaimable.Parse(text); err == nil {
			r.Published = &policy.Published{Room: a.Room(), Held: a.HeldOrZero(), WriteTime: a.WriteTime}
		}
		return r
	}
}

// storedNode returns the record store holds for name, if any.
func storedNode(store cache.Store, name string) *nodeRecord {
	obj, ok, err := store.GetByKey(name)
	if err != nil || !ok {
		return nil
	}
	r, _ := obj.(*nodeRecord)
	return r
}

// statusFloor returns the floor the node status carries, or
// nil when capacity or allocatable lacks one or they disagree: the publisher
// always writes both alike (see patchStatus), so anything else needs a write.
func statusFloor(names reclaimable.Names, node *corev1.Node) *reclaimable.Resources {
	get := func(name corev1.ResourceName) (int64, bool) {
		c, okC := node.Status.Capacity[name]
		a, okA := node.Status.Allocatable[name]
		return c.Value(), okC && okA && c.Cmp(a) == 0
	}
	cpu, okCPU := get(names.CPU)
	mem, okMem := get(names.Memory)
	if !okCPU || !okMem {
		return nil
	}
	return &reclaimable.Resources{CPUMilli: cpu, MemoryBytes: mem}
}

// GetObjectMeta lets client-go's stores and the reflector key the record
// like the Node it comes from.
func (r *nodeRecord) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Name: r.Name, ResourceVersion: r.ResourceVersion}
}

// GetObjectKind and DeepCopyObject make a record a runtime.Object, which
// client-go's reflector requires of what a list or watch returns.
func (r *nodeRecord) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies the record; the labels and values it points to are
// never changed, only replaced with the next record.
func (r *nodeRecord) DeepCopyObject() runtime.Object { c := *r; return &c }
