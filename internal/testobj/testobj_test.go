package testobj

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-reclaim/kube-reclaim/enforcement"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

func TestReclaimedPodReadsAsTheRolesReadIt(t *testing.T) {
	p := MakePod().Namespace("batch").Name("p").Node("n1").Reclaimed(1500, 1<<30).Enforced().Obj()
	if got, mismatch := defaultNames.PodRequest(p); got != (reclaimable.Resources{CPUMilli: 1500, MemoryBytes: 1 << 30}) || mismatch {
		t.Errorf("PodRequest = %+v (mismatch %v), want 1500m and 1Gi, requests equal to limits", got, mismatch)
	}
	if got := reclaimable.NativeRequest(p); !got.IsZero() {
		t.Errorf("native request = %+v, want zero as the webhook writes it", got)
	}
	if err := enforcement.Enforced(&p.Spec, defaultNames); err != nil {
		t.Errorf("Enforced() built a pod the webhook's rule does not accept: %v", err)
	}
	// Positive control: without Enforced the same pod is not enforced.
	if bare := MakePod().Reclaimed(1500, 1<<30).Obj(); enforcement.Enforced(&bare.Spec, defaultNames) == nil {
		t.Error("a pod without native limits reads as enforced")
	}
	if p.Namespace != "batch" || p.Name != "p" || p.Spec.NodeName != "n1" || len(p.Spec.Containers) != 1 {
		t.Errorf("pod = %s/%s on %q with %d containers", p.Namespace, p.Name, p.Spec.NodeName, len(p.Spec.Containers))
	}
}

func TestRegularPodAsksNoReclaimedResource(t *testing.T) {
	p := MakePod().Name("web").Req("250m", "64Mi").Obj()
	if defaultNames.IsReclaimedPod(p) {
		t.Error("a regular pod reads as reclaimed")
	}
	if got := reclaimable.NativeRequest(p); got != (reclaimable.Resources{CPUMilli: 250, MemoryBytes: 64 << 20}) {
		t.Errorf("native request = %+v, want 250m and 64Mi", got)
	}
}

func TestNodeAnnotationIsThePublishersEncoding(t *testing.T) {
	written := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	n := MakeNode().Name("n1").Label("pool", "batch").Capacity("8", "16Gi").Allocatable("7500m", "15Gi").
		Room(2000, 4<<30).Held(500, 1<<30).Pool("batch").WrittenAt(written).Floor(reclaimable.Resources{CPUMilli: 2000, MemoryBytes: 4 << 30}).Obj()
	a, err := reclaimable.Parse(n.Annotations[defaultNames.Annotation])
	if err != nil {
		t.Fatal(err)
	}
	want := reclaimable.Annotation{CPUMilli: 2000, MemoryBytes: 4 << 30, Policy: "usage", Pool: "batch", WriteTime: written,
		Held: &reclaimable.Resources{CPUMilli: 500, MemoryBytes: 1 << 30}}
	if a.CPUMilli != want.CPUMilli || a.MemoryBytes != want.MemoryBytes || a.Policy != want.Policy || a.Pool != want.Pool ||
		!a.WriteTime.Equal(written) || a.Held == nil || *a.Held != *want.Held {
		t.Errorf("annotation = %+v, want %+v", a, want)
	}
	alloc, capacity := n.Status.Allocatable, n.Status.Capacity
	if alloc.Cpu().MilliValue() != 7500 || capacity.Cpu().MilliValue() != 8000 || capacity.Memory().Value() != 16<<30 {
		t.Errorf("allocatable %v, capacity %v", alloc, capacity)
	}
	for _, l := range []corev1.ResourceList{alloc, capacity} {
		if q := l[defaultNames.CPU]; q.Value() != 2000 {
			t.Errorf("floor cpu = %v, want 2000", q.String())
		}
	}
	if n.Labels["pool"] != "batch" {
		t.Errorf("labels = %v", n.Labels)
	}
	// A raw value is written as given, and a node without annotation setters has none.
	if raw := MakeNode().RawAnnotation("{not json").Obj(); raw.Annotations[defaultNames.Annotation] != "{not json" {
		t.Errorf("raw annotation = %q", raw.Annotations[defaultNames.Annotation])
	}
	if bare := MakeNode().Name("b").Obj(); bare.Annotations != nil {
		t.Errorf("bare node annotations = %v, want none", bare.Annotations)
	}
}
