package policyinput

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// TestAPodReportChangesOnlyTheRoomOfThePodsOwnNode: metrics.k8s.io does not
// say which kubelet reported a PodMetrics, so a report naming pod X may come
// from any node. What the assembler guarantees is that usage is credited
// only to the node the named pod is bound to, and only when it was measured
// after that pod was created: a report of pod X (bound to node a) never
// changes node b's room, and a pod of the same name recreated on b does not
// inherit usage measured before it existed.
func TestAPodReportChangesOnlyTheRoomOfThePodsOwnNode(t *testing.T) {
	n := names(t)
	t0 := time.Unix(1_700_000_000, 0).UTC()
	now := t0.Add(2 * time.Minute)
	alloc := reclaimable.Resources{CPUMilli: 8000, MemoryBytes: 16 << 30}
	reclaimed := list(string(n.CPU), "1000", string(n.Memory), "1073741824")
	regular := list("cpu", "1", "memory", "1Gi")
	// No cap and no minimum: every change of usage shows in the room.
	settings := policy.DefaultSettings()
	settings.CPU.MaxRatio, settings.Memory.MaxRatio = 1, 1
	settings.CPU.Minimum, settings.Memory.Minimum = 0, 0

	// boundTo is a running pod bound to node, created at created.
	boundTo := func(name, node string, req corev1.ResourceList, created time.Time) *Pod {
		p := pod(name, corev1.PodRunning, req)
		p.Spec.NodeName = node
		p.CreationTimestamp = metav1.NewTime(created)
		p.Status.StartTime = &metav1.Time{Time: created}
		return NewPod(n, p)
	}
	// reports adds a reading of pod name every 15 s from from to to.
	reports := func(a *Assembler, name string, from, to time.Time, cpu, mem string) {
		for at := from; !at.After(to); at = at.Add(15 * time.Second) {
			a.AddPodMetrics([]metricsv1beta1.PodMetrics{podMetrics(name, at, cpu, mem)})
		}
	}
	// Honest readings of pods end half a minute before now, so that later
	// ones are new to the history.
	honestEnd := now.Add(-30 * time.Second)
	// roomOfB computes node b's room from the nodes' readings and what
	// readings adds, with pods bound to b.
	roomOfB := func(readings func(*Assembler), records []func() *Pod) reclaimable.Resources {
		var podsB []*Pod
		for _, r := range records {
			podsB = append(podsB, r())
		}
		a := New(n)
		a.Resize(time.Hour, MinScrapeInterval)
		for at := t0; !at.After(now); at = at.Add(15 * time.Second) {
			a.AddNodeMetrics([]metricsv1beta1.NodeMetrics{nodeMetrics("a", at, "4", "8Gi"), nodeMetrics("b", at, "4", "8Gi")})
		}
		readings(a)
		// Node a first, as the publisher goes through every node; x is on a
		// unless a case recreates it on b.
		var podsA []*Pod
		if !slices.ContainsFunc(podsB, func(p *Pod) bool { return p.Name == "x" }) {
			podsA = append(podsA, boundTo("x", "a", reclaimed, t0.Add(-time.Hour)))
		}
		a.Node("a", alloc, alloc, podsA)
		in, _ := a.Node("b", alloc, alloc, podsB)
		return policy.Compute(&in, settings, now, time.Minute).Resources
	}
	// A record keeps the series it was assembled with: every run gets
	// records of its own.
	y := func() *Pod { return boundTo("y", "b", reclaimed, t0.Add(-time.Hour)) }
	// x recreated on node b (a StatefulSet pod moved) a minute into the run.
	recreated := t0.Add(time.Minute)
	xOnB := func() *Pod { return boundTo("x", "b", reclaimed, recreated) }
	regularXOnB := func() *Pod { return boundTo("x", "b", regular, recreated) }
	honestY := func(a *Assembler) { reports(a, "y", t0, honestEnd, "500m", "1Gi") }
	honest := func(a *Assembler) { honestY(a); reports(a, "x", t0, honestEnd, "500m", "1Gi") }

	tests := []struct {
		name string
		// podsB are the pods bound to b; base are the readings without the
		// case's, extra the case's.
		podsB       []func() *Pod
		base, extra func(*Assembler)
		wantChange  bool
	}{
		{"a forged report raising pod x's usage (x on a)", []func() *Pod{y}, honest,
			func(a *Assembler) { reports(a, "x", honestEnd.Add(15*time.Second), now, "64", "64Gi") }, false},
		{"a forged report lowering pod x's usage (x on a)", []func() *Pod{y}, honest,
			func(a *Assembler) { reports(a, "x", honestEnd.Add(15*time.Second), now, "0", "0") }, false},
		{"forged reports of x over the whole window (x on a)", []func() *Pod{y}, honestY,
			func(a *Assembler) { reports(a, "x", t0, now, "64", "64Gi") }, false},
		{"a report of a pod bound to no node", []func() *Pod{y}, honest,
			func(a *Assembler) { reports(a, "ghost", t0, now, "64", "64Gi") }, false},
		{"x recreated on b: usage measured before it existed (on a) is not credited to b", []func() *Pod{y, xOnB}, honestY,
			func(a *Assembler) { reports(a, "x", t0, now, "3", "6Gi") }, false},
		{"a regular pod of b named like x: x's usage before it existed is not its own", []func() *Pod{y, regularXOnB}, honestY,
			func(a *Assembler) { reports(a, "x", t0, now, "0", "0") }, false},
		// Positive controls: the same kind of readings changes b's room when
		// they are of b's own pods, measured while they existed.
		{"control: reports of pod y's usage (y on b)", []func() *Pod{y}, func(*Assembler) {},
			func(a *Assembler) { reports(a, "y", t0, now, "500m", "1Gi") }, true},
		{"control: x recreated on b, measured after it was created", []func() *Pod{y, xOnB}, honestY,
			func(a *Assembler) { reports(a, "x", recreated, now, "3", "6Gi") }, true},
		{"control: a regular pod of b named like x, measured after it was created", []func() *Pod{y, regularXOnB}, honestY,
			func(a *Assembler) { reports(a, "x", recreated, now, "0", "0") }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			base := roomOfB(tt.base, tt.podsB)
			if base.IsZero() {
				t.Fatal("b has no room without the case's readings: the case shows nothing")
			}
			got := roomOfB(func(a *Assembler) { tt.base(a); tt.extra(a) }, tt.podsB)
			if changed := got != base; changed != tt.wantChange {
				t.Errorf("b's room %+v with the readings, %+v without: changed %v, want %v", got, base, changed, tt.wantChange)
			}
		})
	}
}
