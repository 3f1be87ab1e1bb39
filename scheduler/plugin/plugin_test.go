package plugin

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	fwk "k8s.io/kube-scheduler/framework"
	schedcache "k8s.io/kubernetes/pkg/scheduler/backend/cache"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/defaultbinder"
	"k8s.io/kubernetes/pkg/scheduler/framework/plugins/queuesort"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"
	schedmetrics "k8s.io/kubernetes/pkg/scheduler/metrics"
	tf "k8s.io/kubernetes/pkg/scheduler/testing/framework"

	"github.com/kube-reclaim/kube-reclaim/internal/testobj"
	"github.com/kube-reclaim/kube-reclaim/placement"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

const gi = int64(1) << 30

var testNames = reclaimable.MustNames(reclaimable.DefaultDomain)

// node publishes cpu millicores and mem bytes of room, written age ago, on
// a node of 8 cores and 8Gi.
func node(name string, cpu, mem int64, age time.Duration) *corev1.Node {
	return testobj.MakeNode().Name(name).Capacity("8", "8Gi").Room(cpu, mem).WrittenAt(time.Now().Add(-age)).Obj()
}

// pod asks cpu millicores and mem bytes of reclaimed resources, with the
// limits the pod webhook sets.
func pod(name, nodeName string, cpu, mem int64) *corev1.Pod {
	return testobj.MakePod().Namespace("batch").Name(name).UID("uid-"+name).Node(nodeName).
		Container("main", "").Reclaimed(cpu, mem).Enforced().Obj()
}

type fixture struct {
	fw     framework.Framework
	plugin *Plugin
	nodes  map[string]fwk.NodeInfo
}

// newFixture runs the plugin in a framework (queue sort and the default
// binder beside it, as in kube-scheduler) over informers of objs.
func newFixture(t *testing.T, args Args, objs ...runtime.Object) *fixture {
	t.Helper()
	schedmetrics.Register() // the framework records into them; once per process
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	client := fake.NewClientset(objs...)
	factory := informers.NewSharedInformerFactory(client, 0)
	args.PublisherLeaseName = "-"
	var nodes []*corev1.Node
	var pods []*corev1.Pod
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Node:
			nodes = append(nodes, o)
		case *corev1.Pod:
			pods = append(pods, o)
		}
	}
	f := &fixture{nodes: map[string]fwk.NodeInfo{}}
	newPlugin := func(ctx context.Context, _ runtime.Object, h framework.Handle) (framework.Plugin, error) {
		names, err := args.defaults()
		if err != nil {
			return nil, err
		}
		p, err := newPlugin(ctx, args, names, h, prometheus.NewRegistry())
		f.plugin = p
		return p, err
	}
	fw, err := tf.NewFramework(ctx, []tf.RegisterPluginFunc{
		tf.RegisterQueueSortPlugin(queuesort.Name, queuesort.New),
		tf.RegisterBindPlugin(defaultbinder.Name, defaultbinder.New),
		tf.RegisterPluginAsExtensions(Name, newPlugin, "PreFilter", "Filter", "Score", "Reserve"),
	}, "kube-reclaim-scheduler", frameworkruntime.WithClientSet(client), frameworkruntime.WithInformerFactory(factory),
		frameworkruntime.WithSnapshotSharedLister(schedcache.NewSnapshot(pods, nodes)))
	if err != nil {
		t.Fatal(err)
	}
	f.fw = fw
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	deadline := time.Now().Add(10 * time.Second)
	for !f.plugin.synced() {
		if time.Now().After(deadline) {
			t.Fatal("the plugin's handlers did not sync")
		}
		time.Sleep(10 * time.Millisecond)
	}
	for _, n := range nodes {
		ni := framework.NewNodeInfo()
		ni.SetNode(n)
		f.nodes[n.Name] = ni
	}
	return f
}

// filter runs PreFilter and then Filter on every node named; the status
// of each node, or of PreFilter when it stops the pod.
func (f *fixture) filter(t *testing.T, p *corev1.Pod, nodes ...string) (fwk.CycleState, *fwk.Status, map[string]*fwk.Status) {
	t.Helper()
	ctx := context.Background()
	state := framework.NewCycleState()
	_, st, _ := f.fw.RunPreFilterPlugins(ctx, state, p)
	if !st.IsSuccess() {
		return state, st, nil
	}
	out := map[string]*fwk.Status{}
	for _, n := range nodes {
		out[n] = f.fw.RunFilterPlugins(ctx, state, p, f.nodes[n])
	}
	return state, st, out
}

func TestFilterPassesOnlyNodesWithRoomAndSaysWhyNot(t *testing.T) {
	f := newFixture(t, Args{},
		node("roomy", 4000, 4*gi, time.Minute),
		node("full", 4000, 4*gi, time.Minute),
		node("stale", 4000, 4*gi, time.Hour),
		pod("holder", "full", 3500, gi))
	_, pre, got := f.filter(t, pod("p", "", 1000, gi), "roomy", "full", "stale")
	if !pre.IsSuccess() {
		t.Fatalf("PreFilter: %v", pre)
	}
	want := map[string]string{
		"roomy": "",
		"full":  "reclaimed-cpu: need 1000m, free 500m",
		"stale": "no reclaimed capacity: reclaimable annotation is stale",
	}
	for n, msg := range want {
		st := got[n]
		switch {
		case msg == "" && !st.IsSuccess():
			t.Errorf("%s: %v, want it passed", n, st)
		case msg != "" && (st.Code() != fwk.Unschedulable || !strings.Contains(st.Message(), msg)):
			t.Errorf("%s: %v, want Unschedulable with %q", n, st, msg)
		}
	}
}

func TestPreFilterSkipsOrRefusesPodsItCannotPlace(t *testing.T) {
	mismatch := pod("mismatch", "", 1000, gi)
	mismatch.Spec.Containers[0].Resources.Limits[testNames.CPU] = resource.MustParse("2")
	unenforced := pod("unenforced", "", 1000, gi)
	unenforced.Spec.Containers[0].Resources.Limits = corev1.ResourceList{testNames.CPU: resource.MustParse("1"), testNames.Memory: resource.MustParse("1Gi")}
	unenforced.Spec.Containers[0].Resources.Requests = unenforced.Spec.Containers[0].Resources.Limits.DeepCopy()
	native := testobj.MakePod().Namespace("web").Name("native").UID("uid-native").Container("main", "").Obj()
	tests := []struct {
		name string
		pod  *corev1.Pod
		code fwk.Code
		msg  string
	}{
		{"a pod asking no reclaimed resource skips the plugin and passes", native, fwk.Success, ""},
		{"requests different from limits can never be placed", mismatch, fwk.UnschedulableAndUnresolvable, placement.MismatchMessage(testNames)},
		{"a pod without the webhook's native limits is refused", unenforced, fwk.UnschedulableAndUnresolvable, "not enforced by kubelet limits"},
		{"an enforced reclaimed pod goes on to Filter (positive control)", pod("ok", "", 1000, gi), fwk.Success, ""},
	}
	f := newFixture(t, Args{}, node("n1", 500, gi, time.Minute))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, pre, got := f.filter(t, tt.pod, "n1")
			if pre.Code() != tt.code || !strings.Contains(pre.Message(), tt.msg) {
				t.Fatalf("PreFilter: %v, want %v with %q", pre, tt.code, tt.msg)
			}
			if tt.code != fwk.Success {
				return
			}
			// n1 has 500m: only the pod asking reclaimed room fails there.
			if asks := tt.pod != native; got["n1"].IsSuccess() == asks {
				t.Errorf("Filter on a node with 500m: %v (the pod asks reclaimed room: %v)", got["n1"], asks)
			}
		})
	}
}

func TestReserveHoldsTheRoomUntilUnreserve(t *testing.T) {
	f := newFixture(t, Args{}, node("n1", 1000, 4*gi, time.Minute))
	ctx := context.Background()
	first, second := pod("first", "", 600, gi), pod("second", "", 600, gi)
	state, _, got := f.filter(t, first, "n1")
	if !got["n1"].IsSuccess() {
		t.Fatalf("first pod on an empty node: %v", got["n1"])
	}
	if st := f.fw.RunReservePluginsReserve(ctx, state, first, "n1"); !st.IsSuccess() {
		t.Fatalf("Reserve: %v", st)
	}
	_, _, got = f.filter(t, second, "n1")
	if st := got["n1"]; st.Code() != fwk.Unschedulable || st.Message() != "reclaimed-cpu: need 600m, free 400m" {
		t.Errorf("second pod while the first is reserved: %v, want Unschedulable, need 600m, free 400m", st)
	}
	// Reserve checks again, atomically: a pod filtered before the room went
	// is refused there too.
	state2 := framework.NewCycleState()
	if _, st, _ := f.fw.RunPreFilterPlugins(ctx, state2, second); !st.IsSuccess() {
		t.Fatal(st)
	}
	if st := f.fw.RunReservePluginsReserve(ctx, state2, second, "n1"); st.Code() != fwk.Unschedulable {
		t.Errorf("Reserve of the second pod: %v, want Unschedulable", st)
	}
	f.fw.RunReservePluginsUnreserve(ctx, state, first, "n1")
	_, _, got = f.filter(t, second, "n1")
	if !got["n1"].IsSuccess() {
		t.Errorf("second pod after the first's Unreserve: %v, want it passed", got["n1"])
	}
}

func TestBoundPodsHoldTheirRoomThroughTheInformer(t *testing.T) {
	f := newFixture(t, Args{}, node("n1", 1000, 4*gi, time.Minute), pod("bound", "n1", 600, gi))
	if used, _ := f.plugin.cache.Held("n1"); used.CPUMilli != 600 {
		t.Fatalf("held on n1: %+v, want the bound pod's 600m", used)
	}
	_, _, got := f.filter(t, pod("p", "", 600, gi), "n1")
	if got["n1"].IsSuccess() {
		t.Error("a pod that fits only without the bound pod's room passed")
	}
	_, _, got = f.filter(t, pod("small", "", 400, gi), "n1")
	if !got["n1"].IsSuccess() {
		t.Errorf("a pod that fits beside the bound pod: %v", got["n1"])
	}
}

func TestScoreFollowsTheStrategy(t *testing.T) {
	for _, tt := range []struct {
		strategy, best string
	}{{placement.StrategySpread, "empty"}, {placement.StrategyBinpack, "busy"}} {
		t.Run(tt.strategy, func(t *testing.T) {
			f := newFixture(t, Args{Strategy: tt.strategy},
				node("empty", 4000, 4*gi, time.Minute), node("busy", 4000, 4*gi, time.Minute), pod("holder", "busy", 3000, 3*gi))
			p := pod("p", "", 500, 512<<20)
			state, _, _ := f.filter(t, p, "empty", "busy")
			scores, st := f.fw.RunScorePlugins(context.Background(), state, p, []fwk.NodeInfo{f.nodes["empty"], f.nodes["busy"]})
			if !st.IsSuccess() {
				t.Fatal(st)
			}
			best := scores[0]
			for _, s := range scores[1:] {
				if s.TotalScore > best.TotalScore {
					best = s
				}
			}
			if best.Name != tt.best || scores[0].TotalScore == scores[1].TotalScore {
				t.Errorf("scores %+v: want %s scored highest", scores, tt.best)
			}
		})
	}
}

func TestArgsRefuseWhatTheExtenderFlagsRefuse(t *testing.T) {
	for _, tt := range []struct {
		name string
		args Args
		want string
	}{
		{"unknown strategy", Args{Strategy: "random"}, `strategy: "random" is neither spread nor binpack`},
		{"negative stale-after", Args{StaleAfter: metav1.Duration{Duration: -time.Second}}, "must be positive"},
		{"bad resource domain", Args{ResourceDomain: "Not A Domain"}, "resourceDomain"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.args.defaults()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
	// Positive control: the zero value takes the defaults.
	a := Args{}
	if _, err := a.defaults(); err != nil || a.Strategy != placement.StrategySpread || a.StaleAfter.Duration != reclaimable.DefaultStaleAfter {
		t.Errorf("defaults: %+v, %v", a, err)
	}
}
