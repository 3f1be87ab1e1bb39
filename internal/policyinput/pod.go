package policyinput

import (
	"time"
	"unique"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Pod is what kube-reclaim keeps of a pod to compute a node's room and to
// choose eviction victims: a few numbers instead of a whole Pod. The
// publisher caches 150,000 of them at 5,000 nodes, where a Pod, even trimmed
// to its containers' resources, costs kilobytes, and an embedded ObjectMeta
// alone 256 bytes: client-go's stores key the record through GetObjectMeta.
type Pod struct {
	Namespace, Name string
	UID             types.UID
	// ResourceVersion is read by the reflector from watch bookmarks.
	ResourceVersion string
	NodeName        string
	// Requests are the effective native cpu/memory requests, overhead
	// included (reclaimable.NativeRequest).
	Requests reclaimable.Resources
	// Reclaimed are the effective requests of the reclaimed resources
	// (Names.PodRequest); zero for a regular pod.
	Reclaimed reclaimable.Resources
	// Created is the pod's creation time and Started when kubelet started
	// it (zero before that), in Unix seconds: the API keeps both to the
	// second, and two time.Time took a fifth of a record (see
	// CreationTime and StartTime).
	Created, Started int64
	Priority         int32
	// Deleting: the pod has a deletion timestamp.
	Deleting bool
	// Terminal: the pod has finished (Succeeded or Failed).
	Terminal bool

	// series is the pod's usage history, found by the Assembler the first
	// time it assembles the pod and kept here so that later periods read
	// it without a lookup; only the Assembler's goroutine touches it.
	series policy.PodSeries
}

// NewPod keeps of pod what Pod holds, with the reclaimed requests read under
// names. Namespaces and node names, shared by many pods, are kept once.
func NewPod(names reclaimable.Names, pod *corev1.Pod) *Pod {
	p := &Pod{
		Namespace: intern(pod.Namespace), Name: pod.Name, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
		NodeName: intern(pod.Spec.NodeName),
		Requests: reclaimable.NativeRequest(pod),
		Created:  pod.CreationTimestamp.Unix(),
		Deleting: pod.DeletionTimestamp != nil,
		Terminal: pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed,
	}
	p.Reclaimed, _ = names.PodRequest(pod)
	if pod.Status.StartTime != nil && !pod.Status.StartTime.IsZero() {
		p.Started = pod.Status.StartTime.Unix()
	}
	if pod.Spec.Priority != nil {
		p.Priority = *pod.Spec.Priority
	}
	return p
}

// CreationTime is when the pod was created.
func (p *Pod) CreationTime() time.Time { return time.Unix(p.Created, 0) }

// StartTime is when kubelet started the pod; zero before that.
func (p *Pod) StartTime() time.Time {
	if p.Started == 0 {
		return time.Time{}
	}
	return time.Unix(p.Started, 0)
}

func intern(s string) string { return unique.Make(s).Value() }

// GetObjectMeta lets client-go's stores and the reflector key the record
// like the Pod it comes from.
func (p *Pod) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion}
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

// DeepCopyObject copies the record; it holds nothing mutable but itself.
func (p *Pod) DeepCopyObject() runtime.Object { c := *p; return &c }

// NonTerminalPods is the field selector of pods that have not finished: a
// finished pod neither holds its requests nor uses anything, so a cache of
// pods for the policy need not hold the many a cluster keeps around.
const NonTerminalPods = "status.phase!=" + string(corev1.PodSucceeded) + ",status.phase!=" + string(corev1.PodFailed)
