package policyinput

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Pod is what kube-reclaim keeps of a pod to compute a node's room and to
// choose eviction victims: a few numbers instead of a whole Pod. The
// publisher caches 150,000 of them at 5,000 nodes, where a Pod, even trimmed
// to its containers' resources, costs kilobytes.
//
// It embeds ObjectMeta so that client-go's stores and indexers key it like
// the Pod it comes from; only Name, Namespace, UID, ResourceVersion (the
// reflector reads it from watch bookmarks), CreationTimestamp and
// DeletionTimestamp are set.
type Pod struct {
	metav1.ObjectMeta
	NodeName string
	// Requests are the effective native cpu/memory requests, overhead
	// included (reclaimable.NativeRequest).
	Requests reclaimable.Resources
	// Reclaimed are the effective requests of the reclaimed resources
	// (Names.PodRequest); zero for a regular pod.
	Reclaimed reclaimable.Resources
	// StartTime is when kubelet started the pod; zero before that.
	StartTime time.Time
	Priority  int32
	// Terminal: the pod has finished (Succeeded or Failed).
	Terminal bool
}

// NewPod keeps of pod what Pod holds, with the reclaimed requests read under
// names.
func NewPod(names reclaimable.Names, pod *corev1.Pod) *Pod {
	p := &Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			CreationTimestamp: pod.CreationTimestamp, DeletionTimestamp: pod.DeletionTimestamp},
		NodeName: pod.Spec.NodeName,
		Requests: reclaimable.NativeRequest(pod),
		Terminal: pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed,
	}
	p.Reclaimed, _ = names.PodRequest(pod)
	if pod.Status.StartTime != nil {
		p.StartTime = pod.Status.StartTime.Time
	}
	if pod.Spec.Priority != nil {
		p.Priority = *pod.Spec.Priority
	}
	return p
}

// PodRecords converts every *corev1.Pod to a *Pod, for an informer fed by
// package compactlist. Anything else (a record already, a watch bookmark's
// Pod is a Pod too) keeps its type.
func PodRecords(names reclaimable.Names) func(runtime.Object) runtime.Object {
	return func(obj runtime.Object) runtime.Object {
		if pod, ok := obj.(*corev1.Pod); ok {
			return NewPod(names, pod)
		}
		return obj
	}
}

// GetObjectKind and DeepCopyObject make a Pod a runtime.Object, which
// client-go's reflector requires of what a list or watch returns.
func (p *Pod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject returns a copy sharing nothing mutable with p.
func (p *Pod) DeepCopyObject() runtime.Object {
	c := *p
	p.DeepCopyInto(&c.ObjectMeta)
	return &c
}

// NonTerminalPods is the field selector of pods that have not finished: a
// finished pod neither holds its requests nor uses anything, so a cache of
// pods for the policy need not hold the many a cluster keeps around.
const NonTerminalPods = "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)
