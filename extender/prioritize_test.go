package extender

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// Every node publishes 5000m / 5Gi; the pod asks 1000m / 1Gi.
func prioritizeCluster() []runtime.Object {
	return []runtime.Object{
		node("empty", 5000, 5*gi, time.Minute), // after placing: 4000m/4Gi left, 0.8 → 8
		node("half", 5000, 5*gi, time.Minute),  // 2000m/2Gi bound: 2000m/2Gi left, 0.4 → 4
		node("full", 5000, 5*gi, time.Minute),  // 4000m/4Gi bound: nothing left, 0 → 0
		node("mixed", 5000, 5*gi, time.Minute), // 0m/2Gi bound: cpu 0.8, memory 0.4 left → 6
		node("tiny", 500, 5*gi, time.Minute),   // the pod does not fit
		node("stale", 5000, 5*gi, time.Hour),
		pod("half-1", "half", 2000, 2*gi),
		pod("full-1", "full", 4000, 4*gi),
		pod("mixed-1", "mixed", 0, 2*gi),
	}
}

func TestPrioritize(t *testing.T) {
	nodes := []string{"full", "ghost", "half", "empty", "tiny", "mixed", "stale"}
	tests := []struct {
		name     string
		strategy string
		pod      *corev1.Pod
		want     []int64 // scores in the order of nodes
	}{{
		name:     "spread favours the most room left",
		strategy: StrategySpread,
		pod:      pod("p", "", 1000, gi),
		//        full ghost half empty tiny mixed stale
		want: []int64{0, 0, 4, 8, 0, 6, 0},
	}, {
		name:     "binpack favours the least room left",
		strategy: StrategyBinpack,
		pod:      pod("p", "", 1000, gi),
		want:     []int64{10, 0, 6, 2, 0, 4, 0},
	}, {
		name:     "a pod asking no reclaimed resource gets neutral scores",
		strategy: StrategyBinpack,
		pod:      plainPod("p"),
		want:     []int64{0, 0, 0, 0, 0, 0, 0},
	}, {
		name:     "a pod whose requests differ from limits gets neutral scores",
		strategy: StrategySpread,
		pod:      mismatched("p"),
		want:     []int64{0, 0, 0, 0, 0, 0, 0},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{strategy: tt.strategy}, prioritizeCluster()...)
			got := f.prioritize(tt.pod, nodes...)
			// ghost is unknown to the cache: left out, which kube-scheduler
			// scores as 0.
			want := extenderv1.HostPriorityList{}
			for i, n := range nodes {
				if n != "ghost" {
					want = append(want, extenderv1.HostPriority{Host: n, Score: tt.want[i]})
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("got  %v\nwant %v", got, want)
			}
		})
	}
}

func TestPrioritizeEmptyNodeList(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, prioritizeCluster()...)
	rec := f.post("/prioritize", extenderv1.ExtenderArgs{Pod: pod("p", "", 1000, gi), NodeNames: &[]string{}})
	if rec.Code != 200 || rec.Body.String() != "[]\n" {
		t.Errorf("got %d %q, want 200 \"[]\\n\"", rec.Code, rec.Body.String())
	}
}
