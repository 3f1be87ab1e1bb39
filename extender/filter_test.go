package extender

import (
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kube-reclaim/kube-reclaim/test/metrictest"
)

// filterCluster: nodes with known room; see the comment on each.
func filterCluster() []runtime.Object {
	return []runtime.Object{
		node("roomy", 4000, 8*gi, time.Minute),       // free 3000m / 7Gi after "roomy-1"
		node("cpu-short", 500, 8*gi, time.Minute),    // free 500m / 8Gi
		node("mem-short", 4000, 512*mi, time.Minute), // free 4000m / 512Mi
		node("both-short", 500, 512*mi, time.Minute),
		node("busy", 4000, 8*gi, time.Minute),            // 3500m / 7Gi bound: free 500m / 1Gi
		node("finished", 2000, 2*gi, time.Minute),        // only terminal pods: free 2000m / 2Gi
		node("odd-bytes", 4000, 1000000000, time.Minute), // free 953.7Mi
		node("stale", 4000, 8*gi, 20*time.Minute),
		bigNode("missing").Obj(),
		bigNode("malformed").RawAnnotation("{not json").Obj(),
		pod("roomy-1", "roomy", 1000, gi),
		pod("busy-1", "busy", 2000, 4*gi),
		pod("busy-2", "busy", 1500, 3*gi),
		withPhase(pod("finished-1", "finished", 2000, 2*gi), corev1.PodSucceeded),
		withPhase(pod("finished-2", "finished", 2000, 2*gi), corev1.PodFailed),
		plainPod("native-only"), // bound nowhere, asks no reclaimed resource
	}
}

func TestFilter(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, filterCluster()...)
	const (
		staleMsg     = "no reclaimed capacity: reclaimable annotation is stale, not rewritten within --stale-after (annotation-too-old)"
		missingMsg   = "no reclaimed capacity: node has no reclaimable annotation (annotation-missing)"
		malformedMsg = "no reclaimed capacity: node's reclaimable annotation is malformed (annotation-malformed)"
	)
	tests := []struct {
		name       string
		pod        *corev1.Pod
		nodes      []string
		wantPassed []string
		wantFailed map[string]string
		wantUnres  map[string]string
	}{{
		name:       "nodes without room say exactly what is short",
		pod:        pod("p", "", 2000, 2*gi),
		nodes:      []string{"cpu-short", "roomy", "mem-short", "both-short"},
		wantPassed: []string{"roomy"},
		wantFailed: map[string]string{
			"cpu-short":  "reclaimed-cpu: need 2000m, free 500m",
			"mem-short":  "reclaimed-memory: need 2Gi, free 512Mi",
			"both-short": "reclaimed-cpu: need 2000m, free 500m; reclaimed-memory: need 2Gi, free 512Mi",
		},
	}, {
		name:       "requests of bound pods reduce the room",
		pod:        pod("p", "", 1000, gi),
		nodes:      []string{"busy", "roomy"},
		wantPassed: []string{"roomy"},
		wantFailed: map[string]string{"busy": "reclaimed-cpu: need 1000m, free 500m"},
	}, {
		name:       "a pod that fits exactly passes",
		pod:        pod("p", "", 500, gi),
		nodes:      []string{"busy"},
		wantPassed: []string{"busy"},
		wantFailed: map[string]string{},
	}, {
		name:       "succeeded and failed pods free their room",
		pod:        pod("p", "", 2000, 2*gi),
		nodes:      []string{"finished"},
		wantPassed: []string{"finished"},
		wantFailed: map[string]string{},
	}, {
		name:       "a pod asking only cpu ignores memory room",
		pod:        pod("p", "", 1000, 0),
		nodes:      []string{"mem-short", "cpu-short"},
		wantPassed: []string{"mem-short"},
		wantFailed: map[string]string{"cpu-short": "reclaimed-cpu: need 1000m, free 500m"},
	}, {
		name:       "inexact memory is rounded and given in bytes",
		pod:        pod("p", "", 100, 2*gi),
		nodes:      []string{"odd-bytes"},
		wantPassed: []string{},
		wantFailed: map[string]string{"odd-bytes": "reclaimed-memory: need 2Gi, free 953.7Mi (1000000000 bytes)"},
	}, {
		name:       "stale, missing and malformed annotations say why",
		pod:        pod("p", "", 100, mi),
		nodes:      []string{"stale", "missing", "malformed", "roomy"},
		wantPassed: []string{"roomy"},
		wantFailed: map[string]string{"stale": staleMsg, "missing": missingMsg, "malformed": malformedMsg},
	}, {
		// kube-scheduler drops every node the answer does not pass.
		name:       "unknown node names are left out of the answer, never invented",
		pod:        pod("p", "", 100, mi),
		nodes:      []string{"ghost", "roomy", "node-that-never-was"},
		wantPassed: []string{"roomy"},
		wantFailed: map[string]string{},
	}, {
		name:       "passing nodes keep the input order",
		pod:        pod("p", "", 100, mi),
		nodes:      []string{"roomy", "finished", "busy", "mem-short"},
		wantPassed: []string{"roomy", "finished", "busy", "mem-short"},
		wantFailed: map[string]string{},
	}, {
		name:       "a pod asking no reclaimed resource passes every known node, even stale ones",
		pod:        plainPod("p"),
		nodes:      []string{"ghost", "stale", "cpu-short"},
		wantPassed: []string{"stale", "cpu-short"},
		wantFailed: map[string]string{},
	}, {
		name:       "requests differing from limits fail every node, unresolvably",
		pod:        mismatched("p"),
		nodes:      []string{"roomy", "ghost"},
		wantPassed: []string{},
		wantFailed: map[string]string{},
		wantUnres: map[string]string{
			"roomy": "pod's kube-reclaim.io/reclaimed-cpu/kube-reclaim.io/reclaimed-memory requests differ from its limits (or a limit is missing): extended resources cannot be overcommitted, set requests equal to limits",
		},
	}, {
		name:       "an empty node list answers an empty result",
		pod:        pod("p", "", 100, mi),
		nodes:      []string{},
		wantPassed: []string{},
		wantFailed: map[string]string{},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f.t = t
			res := f.filter(tt.pod, tt.nodes...)
			if res.Error != "" {
				t.Fatalf("Error = %q", res.Error)
			}
			if res.NodeNames == nil || !reflect.DeepEqual(*res.NodeNames, tt.wantPassed) {
				t.Errorf("NodeNames = %v, want %v", deref(res.NodeNames), tt.wantPassed)
			}
			if !reflect.DeepEqual(map[string]string(res.FailedNodes), tt.wantFailed) {
				t.Errorf("FailedNodes = %#v\nwant %#v", res.FailedNodes, tt.wantFailed)
			}
			if len(res.FailedAndUnresolvableNodes) > 0 || len(tt.wantUnres) > 0 {
				if !reflect.DeepEqual(map[string]string(res.FailedAndUnresolvableNodes), tt.wantUnres) {
					t.Errorf("FailedAndUnresolvableNodes = %#v\nwant %#v", res.FailedAndUnresolvableNodes, tt.wantUnres)
				}
			}
		})
	}
}

func deref(p *[]string) []string {
	if p == nil {
		return nil
	}
	return *p
}

func TestFilterCountsFailuresByReason(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, filterCluster()...)
	f.filter(pod("p", "", 2000, 2*gi), "cpu-short", "mem-short", "both-short", "stale", "missing", "ghost", "roomy")
	f.filter(mismatched("q"), "roomy", "busy")
	for reason, want := range map[string]float64{
		"insufficient-cpu": 1, "insufficient-memory": 1, "insufficient-cpu-and-memory": 1,
		"annotation-too-old": 1, "annotation-missing": 1, "unknown-node": 1, "limits-mismatch": 2,
		"publisher-lease-expired": 0,
	} {
		if got := f.filtered(reason); got != want {
			t.Errorf("filtered_nodes_total{reason=%q} = %v, want %v", reason, got, want)
		}
	}
	if got := metrictest.Gathered(f.t, f.reg, "kube_reclaim_extender_http_request_duration_seconds", map[string]string{"route": "filter", "code": "200"}); got != 2 {
		t.Errorf("filter requests observed = %v, want 2", got)
	}
}

func TestFilterStaleness(t *testing.T) {
	// "fresh" was written 1 minute before t0 with --stale-after 10m.
	f := newFixture(t, fixtureOpts{}, node("fresh", 4000, 4*gi, time.Minute))
	p := pod("p", "", 1000, gi)
	const tooOld = "no reclaimed capacity: reclaimable annotation is stale, not rewritten within --stale-after (annotation-too-old)"
	const leaseDown = "no reclaimed capacity: publisher is down, its leader lease was not renewed (publisher-lease-expired)"
	steps := []struct {
		name string
		do   func()
		want string // "" passes
	}{
		{"fresh annotation passes", func() {}, ""},
		{"still fresh just before stale-after", func() { f.clock.Step(9*time.Minute - time.Second) }, ""},
		{"stale once stale-after has passed", func() { f.clock.Step(2 * time.Second) }, tooOld},
		{"fresh again after the publisher rewrites it", func() {
			n := node("fresh", 4000, 4*gi, -f.clock.Now().Sub(t0)) // written now
			if _, err := f.client.CoreV1().Nodes().Update(t.Context(), n, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			f.eventually("the rewritten annotation", func() bool { return f.free("fresh").CPUMilli == 4000 })
		}, ""},
		{"stale while the publisher lease is expired", func() { f.alive.Store(false) }, leaseDown},
		{"fresh when the lease is renewed", func() { f.alive.Store(true) }, ""},
	}
	for _, s := range steps {
		s.do()
		res := f.filter(p, "fresh")
		got := res.FailedNodes["fresh"]
		if got != s.want {
			t.Errorf("%s: FailedNodes[fresh] = %q, want %q", s.name, got, s.want)
		}
		if passed := len(deref(res.NodeNames)) == 1; passed != (s.want == "") {
			t.Errorf("%s: NodeNames = %v", s.name, deref(res.NodeNames))
		}
	}
}

func TestFilterFollowsInformerEvents(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, node("n1", 4000, 4*gi, time.Minute))
	ctx := t.Context()
	p := pod("p", "", 3000, gi)
	check := func(what string, want string) {
		t.Helper()
		f.eventually(what, func() bool { return f.filter(p, "n1").FailedNodes["n1"] == want })
	}
	check("empty node", "")
	running := pod("running", "n1", 2000, gi)
	if _, err := f.client.CoreV1().Pods("batch").Create(ctx, running, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	check("a bound pod takes room", "reclaimed-cpu: need 3000m, free 2000m")
	if _, err := f.client.CoreV1().Pods("batch").UpdateStatus(ctx, withPhase(running.DeepCopy(), corev1.PodSucceeded), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	check("a succeeded pod frees it", "")
	other := pod("other", "n1", 3500, gi)
	if _, err := f.client.CoreV1().Pods("batch").Create(ctx, other, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	check("another bound pod", "reclaimed-cpu: need 3000m, free 500m")
	if err := f.client.CoreV1().Pods("batch").Delete(ctx, "other", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	check("a deleted pod frees it", "")
	if err := f.client.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := f.client.CoreV1().Pods("batch").Delete(ctx, "running", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("a deleted node to be left out", func() bool {
		res := f.filter(p, "n1")
		return len(deref(res.NodeNames)) == 0 && len(res.FailedNodes) == 0
	})
}

// The scheduler's wire format: field names are capitalised (the types have no
// json tags).
func TestFilterWireFormat(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, filterCluster()...)
	body := `{"Pod":{"metadata":{"name":"p","namespace":"batch"},"spec":{"containers":[{"name":"c","resources":{` +
		`"requests":{"kube-reclaim.io/reclaimed-cpu":"2000"},"limits":{"kube-reclaim.io/reclaimed-cpu":"2000"}}}]}},` +
		`"Nodes":null,"NodeNames":["cpu-short","roomy"]}`
	rec := f.post("/filter", body)
	want := `{"Nodes":null,"NodeNames":["roomy"],"FailedNodes":{"cpu-short":"reclaimed-cpu: need 2000m, free 500m"},"FailedAndUnresolvableNodes":null,"Error":""}` + "\n"
	if rec.Code != 200 || rec.Body.String() != want {
		t.Errorf("got %d %s\nwant %s", rec.Code, rec.Body.String(), want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
	rec = f.post("/prioritize", body)
	want = `[{"Host":"cpu-short","Score":0},{"Host":"roomy","Score":6}]` + "\n"
	if rec.Code != 200 || rec.Body.String() != want {
		t.Errorf("got %d %s\nwant %s", rec.Code, rec.Body.String(), want)
	}
}
