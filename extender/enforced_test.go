package extender

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kube-reclaim/kube-reclaim/enforcement"
)

// enforced returns p as the pod webhook stores it: native limits of its
// grant and explicit native requests.
func enforced(p *corev1.Pod) *corev1.Pod {
	if _, err := enforcement.Enforce(&p.Spec, testNames); err != nil {
		panic(err)
	}
	return p
}

func enforcedCluster() []runtime.Object {
	return []runtime.Object{
		node("n1", 4000, 4*gi, time.Minute),
		node("n2", 4000, 4*gi, time.Minute),
	}
}

func TestFilterRequireEnforced(t *testing.T) {
	// What enforcement.Enforced says of pod("p", "", 1000, gi), whose one
	// container "main" has no native requests or limits.
	const notEnforcedMain = `pod's reclaimed containers are not enforced by kubelet limits: container "main": ` +
		`no explicit requests.cpu (set it, "0" when it has none), no limits.cpu (set it to its grant 1), ` +
		`no explicit requests.memory (set it, "0" when it has none), no limits.memory (set it to its grant 1Gi); ` +
		`create it through the kube-reclaim pod webhook, which sets them` +
		` (refused by the extender's --require-enforced: without native limits kubelet would not hold the pod to its grant)`
	highLimit := enforced(pod("p", "", 1000, gi))
	highLimit.Spec.Containers[0].Resources.Limits[corev1.ResourceMemory] = resource.MustParse("2Gi")
	tests := []struct {
		name        string
		require     bool
		pod         *corev1.Pod
		wantPassed  int
		wantUnres   string // the message every node gets; "" none
		wantRefusal float64
	}{
		{name: "a reclaimed pod without the webhook's limits fails every node with what it lacks",
			require: true, pod: pod("p", "", 1000, gi), wantUnres: notEnforcedMain, wantRefusal: 1},
		{name: "a pod the webhook enforced is placed", require: true, pod: enforced(pod("p", "", 1000, gi)), wantPassed: 2},
		{name: "a limit above the grant is not enforced", require: true, pod: highLimit,
			wantUnres: "limits.memory 2Gi is not within its grant 1Gi", wantRefusal: 1},
		{name: "a pod asking no reclaimed resource is never checked", require: true, pod: plainPod("p"), wantPassed: 2},
		{name: "requests differing from limits keep their own message", require: true, pod: mismatched("p"),
			wantUnres: "requests differ from its limits"},
		{name: "--require-enforced=false places a pod without limits", require: false, pod: pod("p", "", 1000, gi), wantPassed: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{requireEnforced: tt.require}, enforcedCluster()...)
			res := f.filter(tt.pod, "n1", "n2")
			if got := len(deref(res.NodeNames)); got != tt.wantPassed {
				t.Errorf("%d nodes passed, want %d (failed %v, unresolvable %v)", got, tt.wantPassed, res.FailedNodes, res.FailedAndUnresolvableNodes)
			}
			if tt.wantUnres != "" {
				if len(res.FailedAndUnresolvableNodes) != 2 {
					t.Fatalf("FailedAndUnresolvableNodes = %v, want both nodes", res.FailedAndUnresolvableNodes)
				}
				// One message for every node, so the FailedScheduling
				// event names it once.
				if m1, m2 := res.FailedAndUnresolvableNodes["n1"], res.FailedAndUnresolvableNodes["n2"]; m1 != m2 || !strings.Contains(m1, tt.wantUnres) {
					t.Errorf("messages %q and %q, want one message containing %q", m1, m2, tt.wantUnres)
				}
			}
			if got := testutil.ToFloat64(f.ext.server.metrics.notEnforced.WithLabelValues("filter")); got != tt.wantRefusal {
				t.Errorf("not_enforced_refusals_total{verb=filter} = %v, want %v", got, tt.wantRefusal)
			}
			if got, want := f.filtered("not-enforced"), 2*tt.wantRefusal; got != want {
				t.Errorf("filtered_nodes_total{reason=not-enforced} = %v, want %v", got, want)
			}
		})
	}
}

// A pod that reaches bind without the webhook's limits (a scheduler without
// the filter verb, or a stale filter answer) is refused there too, without
// a Binding call.
func TestBindRequireEnforced(t *testing.T) {
	for _, tt := range []struct {
		name      string
		require   bool
		pod       *corev1.Pod
		wantErr   string
		wantCalls int
	}{
		{"a pod without the webhook's limits is refused", true, pod("bare", "", 1000, gi), `container "main": no explicit requests.cpu`, 0},
		{"an enforced pod is bound", true, enforced(pod("bare", "", 1000, gi)), "", 1},
		{"--require-enforced=false binds a pod without limits", false, pod("bare", "", 1000, gi), "", 1},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{requireEnforced: tt.require}, append(enforcedCluster(), tt.pod)...)
			f.apiServerBinds(nil, nil)
			res := f.bind(tt.pod, "n1")
			if (tt.wantErr == "") != (res.Error == "") || !strings.Contains(res.Error, tt.wantErr) {
				t.Errorf("Error = %q, want %q", res.Error, tt.wantErr)
			}
			if got := f.bindingCalls(); got != tt.wantCalls {
				t.Errorf("%d Binding calls, want %d", got, tt.wantCalls)
			}
			want := 0.0
			if tt.wantErr != "" {
				want = 1
			}
			if got := testutil.ToFloat64(f.ext.server.metrics.notEnforced.WithLabelValues("bind")); got != want {
				t.Errorf("not_enforced_refusals_total{verb=bind} = %v, want %v", got, want)
			}
		})
	}
}
