package policyinput

import (
	"testing"
	"time"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// The compact record keeps every number the policy and victim choice read,
// with init containers, sidecars and overhead aggregated like the full pod.
func TestNewPodKeepsWhatThePolicyAndEvictionRead(t *testing.T) {
	n := names(t)
	always := corev1.ContainerRestartPolicyAlways
	prio := int32(-50)
	created := metav1.NewTime(time.Unix(1_700_000_000, 0))
	started := metav1.NewTime(created.Add(time.Minute))
	deleting := metav1.NewTime(created.Add(time.Hour))
	full := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "batch", Name: "p", UID: "u1", CreationTimestamp: created, DeletionTimestamp: &deleting,
			Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"big": "kilobytes"}, ResourceVersion: "42"},
		Spec: corev1.PodSpec{NodeName: "n1", Priority: &prio,
			Overhead: list("cpu", "10m", "memory", "1Mi"),
			InitContainers: []corev1.Container{
				{Name: "init", Resources: corev1.ResourceRequirements{Requests: list("cpu", "3")}},
				{Name: "sidecar", RestartPolicy: &always, Resources: corev1.ResourceRequirements{Requests: list("memory", "64Mi")}},
			},
			Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{
				Requests: list("cpu", "500m", string(n.CPU), "2000", string(n.Memory), "1024"),
				Limits:   list(string(n.CPU), "2000", string(n.Memory), "1024")}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &started},
	}
	got := NewPod(n, full)
	want := Pod{
		Namespace: "batch", Name: "p", UID: "u1", ResourceVersion: "42", Created: created.Unix(), Deleting: true,
		NodeName: "n1",
		// max(500m + sidecar 0, init 3000m) + overhead; memory 64Mi + overhead.
		Requests:  reclaimable.Resources{CPUMilli: 3010, MemoryBytes: 65 << 20},
		Reclaimed: reclaimable.Resources{CPUMilli: 2000, MemoryBytes: 1024},
		Started:   started.Unix(), Priority: -50,
	}
	if *got != want {
		t.Errorf("NewPod = %+v\nwant     %+v", *got, want)
	}
	if !got.CreationTime().Equal(created.Time) || !got.StartTime().Equal(started.Time) {
		t.Errorf("created %v, started %v; want %v, %v", got.CreationTime(), got.StartTime(), created.Time, started.Time)
	}
	full.Status.StartTime = nil
	if st := NewPod(n, full).StartTime(); !st.IsZero() {
		t.Errorf("a pod kubelet has not started started at %v", st)
	}
	// 150,000 records at 5,000 nodes: 144 bytes is an allocation size class,
	// and one field more would move every record to the next (160).
	if size := unsafe.Sizeof(Pod{}); size != 144 {
		t.Errorf("a record takes %d bytes, want 144", size)
	}
	for _, phase := range []corev1.PodPhase{corev1.PodSucceeded, corev1.PodFailed} {
		full.Status.Phase = phase
		if !NewPod(n, full).Terminal {
			t.Errorf("phase %s not terminal", phase)
		}
	}
}

// client-go's stores key the record like the Pod it replaces, the record is
// a runtime.Object whose copy shares nothing, and records pass unchanged.
func TestPodRecordsAreKeyedLikeThePodAndCopyable(t *testing.T) {
	convert := PodRecords(names(t))
	p := pod("a", corev1.PodRunning, nil)
	p.ResourceVersion = "12"
	rec, ok := convert(p).(*Pod)
	if !ok {
		t.Fatalf("converted to %T", convert(p))
	}
	if key, err := cache.MetaNamespaceKeyFunc(rec); err != nil || key != "ns/a" {
		t.Errorf("key = %q, %v; want ns/a", key, err)
	}
	if rec.ResourceVersion != "12" {
		t.Errorf("resourceVersion %q, want 12: the reflector reads it from bookmarks", rec.ResourceVersion)
	}
	if again := convert(rec); again != rec {
		t.Errorf("a record was converted again: %+v", again)
	}
	cp := rec.DeepCopyObject().(*Pod)
	cp.Deleting = true
	if *cp == *rec || rec.Deleting {
		t.Error("the copy is the original")
	}
}

func TestNonTerminalPodsIsAValidFieldSelector(t *testing.T) {
	sel, err := fields.ParseSelector(NonTerminalPods)
	if err != nil {
		t.Fatal(err)
	}
	for phase, want := range map[corev1.PodPhase]bool{corev1.PodRunning: true, corev1.PodPending: true, corev1.PodSucceeded: false, corev1.PodFailed: false} {
		if got := sel.Matches(fields.Set{"status.phase": string(phase)}); got != want {
			t.Errorf("phase %s matches = %v, want %v", phase, got, want)
		}
	}
}
