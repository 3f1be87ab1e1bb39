// Package testobj builds the Pods and Nodes kube-reclaim's tests need, in
// the way of kube-scheduler's test wrappers
// (k8s.io/kubernetes/pkg/scheduler/testing): a chain of setters that ends
// with Obj, as in
//
//	testobj.MakePod().Namespace("batch").Name("p").Node("n1").Reclaimed(500, 1<<30).Enforced().Obj()
//	testobj.MakeNode().Name("n1").Capacity("8", "8Gi").Room(4000, 4<<30).WrittenAt(t).Obj()
//
// so that what a reclaimed pod or an annotated node looks like is written
// once, with the words of the glossary in docs/design.md (room, held,
// floor). Only tests and the test harness under test/ import it: a setter
// panics on what it cannot build, which no production path may do
// (TestOnlyTestsImportTestobj checks).
package testobj

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-reclaim/kube-reclaim/enforcement"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// defaultNames are the resource names of the default domain, which every
// test but the webhook's uses.
var defaultNames = reclaimable.MustNames(reclaimable.DefaultDomain)

// PodWrapper builds a Pod. Setters of a container's fields act on the last
// container, adding one named "c" when the pod has none.
type PodWrapper struct {
	corev1.Pod
	names reclaimable.Names
}

// MakePod starts a pod with no name, no containers and the resource names
// of the default domain.
func MakePod() *PodWrapper {
	return &PodWrapper{names: defaultNames}
}

// Obj returns the pod built.
func (p *PodWrapper) Obj() *corev1.Pod {
	return &p.Pod
}

// Domain sets the resource names Reclaimed and Enforced use; call it before
// them.
func (p *PodWrapper) Domain(names reclaimable.Names) *PodWrapper {
	p.names = names
	return p
}

// Namespace sets the pod's namespace.
func (p *PodWrapper) Namespace(ns string) *PodWrapper {
	p.Pod.Namespace = ns
	return p
}

// Name sets the pod's name.
func (p *PodWrapper) Name(name string) *PodWrapper {
	p.Pod.Name = name
	return p
}

// UID sets the pod's UID, which the API server would give it.
func (p *PodWrapper) UID(uid string) *PodWrapper {
	p.Pod.UID = types.UID(uid)
	return p
}

// Label adds a label.
func (p *PodWrapper) Label(key, value string) *PodWrapper {
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels[key] = value
	return p
}

// CreatedAt sets the pod's creation timestamp.
func (p *PodWrapper) CreatedAt(t time.Time) *PodWrapper {
	p.CreationTimestamp = metav1.NewTime(t)
	return p
}

// Node binds the pod to node (spec.nodeName).
func (p *PodWrapper) Node(node string) *PodWrapper {
	p.Spec.NodeName = node
	return p
}

// NodeSelector adds a node selector term.
func (p *PodWrapper) NodeSelector(key, value string) *PodWrapper {
	if p.Spec.NodeSelector == nil {
		p.Spec.NodeSelector = map[string]string{}
	}
	p.Spec.NodeSelector[key] = value
	return p
}

// SchedulerName sets the scheduler that places the pod.
func (p *PodWrapper) SchedulerName(name string) *PodWrapper {
	p.Spec.SchedulerName = name
	return p
}

// Priority sets the pod's priority, as the admission of its priority class
// would.
func (p *PodWrapper) Priority(prio int32) *PodWrapper {
	p.Spec.Priority = &prio
	return p
}

// RestartPolicy sets the pod's restart policy.
func (p *PodWrapper) RestartPolicy(policy corev1.RestartPolicy) *PodWrapper {
	p.Spec.RestartPolicy = policy
	return p
}

// Phase sets the pod's phase.
func (p *PodWrapper) Phase(phase corev1.PodPhase) *PodWrapper {
	p.Status.Phase = phase
	return p
}

// StartedAt sets the time kubelet started the pod (status.startTime).
func (p *PodWrapper) StartedAt(t time.Time) *PodWrapper {
	start := metav1.NewTime(t)
	p.Status.StartTime = &start
	return p
}

// Container adds a container with name and image ("" for none); the
// container setters below act on it.
func (p *PodWrapper) Container(name, image string) *PodWrapper {
	p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: name, Image: image})
	return p
}

// Req adds native requests of cpu and memory to the last container, as a
// regular pod asks them; an empty amount is left out.
func (p *PodWrapper) Req(cpu, memory string) *PodWrapper {
	c := p.last()
	for name, amount := range map[corev1.ResourceName]string{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory} {
		if amount != "" {
			c.Resources.Requests = set(c.Resources.Requests, name, resource.MustParse(amount))
		}
	}
	return p
}

// Reclaimed makes the last container ask cpuMilli millicores and memBytes
// bytes of the reclaimed resources, requests equal to limits as extended
// resources must be; an amount of zero is left out, as a pod that does not
// ask for it.
func (p *PodWrapper) Reclaimed(cpuMilli, memBytes int64) *PodWrapper {
	c := p.last()
	if cpuMilli > 0 {
		q := *resource.NewQuantity(cpuMilli, resource.DecimalSI)
		c.Resources.Requests = set(c.Resources.Requests, p.names.CPU, q)
		c.Resources.Limits = set(c.Resources.Limits, p.names.CPU, q.DeepCopy())
	}
	if memBytes > 0 {
		q := *resource.NewQuantity(memBytes, resource.BinarySI)
		c.Resources.Requests = set(c.Resources.Requests, p.names.Memory, q)
		c.Resources.Limits = set(c.Resources.Limits, p.names.Memory, q.DeepCopy())
	}
	return p
}

// Resources sets the last container's requests and limits as given, for
// the shapes the other setters do not write.
func (p *PodWrapper) Resources(r corev1.ResourceRequirements) *PodWrapper {
	p.last().Resources = r
	return p
}

// Enforced writes what the pod webhook writes into a reclaimed pod:
// explicit native requests (zero when absent) and native limits equal to
// each container's grant. It is enforcement.Enforce itself, so a test sees
// the webhook's rule, not a copy of it.
func (p *PodWrapper) Enforced() *PodWrapper {
	if _, err := enforcement.Enforce(&p.Spec, p.names); err != nil {
		panic("testobj: " + err.Error())
	}
	return p
}

// last returns the last container, adding one named "c" when there is none.
func (p *PodWrapper) last() *corev1.Container {
	if len(p.Spec.Containers) == 0 {
		p.Container("c", "")
	}
	return &p.Spec.Containers[len(p.Spec.Containers)-1]
}

// set puts q in l under name, making l when it is nil.
func set(l corev1.ResourceList, name corev1.ResourceName, q resource.Quantity) corev1.ResourceList {
	if l == nil {
		l = corev1.ResourceList{}
	}
	l[name] = q
	return l
}
