package extender

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/metrictest"
)

func TestMain(m *testing.M) {
	// The fake clientset's watchers panic when 100 events are queued; the
	// concurrency tests produce hundreds at once.
	watch.DefaultChanSize = 100000
	logrus.SetLevel(logrus.ErrorLevel)
	os.Exit(m.Run())
}

var podsGVR = corev1.SchemeGroupVersion.WithResource("pods")

// bindOutcome decides what the fake API server does with a Binding:
// nil applies it (the informer then shows the pod bound), an error rejects it.
type bindOutcome func(b *corev1.Binding) error

// apiServerBinds makes the fake clientset handle pods/binding like the API
// server: it sets spec.nodeName (so the informer confirms the bind), and
// refuses a pod that is already bound. Every applied Binding is passed to
// applied while the fake's lock is held (so calls are serialised).
func (f *fixture) apiServerBinds(outcome bindOutcome, applied func(*corev1.Binding)) {
	f.client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := action.(k8stesting.CreateAction)
		if !ok || ca.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b := ca.GetObject().(*corev1.Binding)
		if outcome != nil {
			if err := outcome(b); err != nil {
				return true, nil, err
			}
		}
		obj, err := f.client.Tracker().Get(podsGVR, b.Namespace, b.Name)
		if err != nil {
			return true, nil, err
		}
		p := obj.(*corev1.Pod).DeepCopy()
		if b.UID != "" && b.UID != p.UID {
			return true, nil, apierrors.NewConflict(podsGVR.GroupResource(), b.Name, errors.New("UID precondition failed"))
		}
		if p.Spec.NodeName != "" {
			return true, nil, apierrors.NewConflict(podsGVR.GroupResource(), b.Name,
				fmt.Errorf("pod %s is already assigned to node %q", b.Name, p.Spec.NodeName))
		}
		p.Spec.NodeName, p.Status.Phase = b.Target.Name, corev1.PodRunning
		if err := f.client.Tracker().Update(podsGVR, p, b.Namespace); err != nil {
			return true, nil, err
		}
		if applied != nil {
			applied(b)
		}
		return true, b, nil
	})
}

// withholdBinds accepts Bindings without ever showing the pod bound, like an
// API server whose watch lags forever.
func (f *fixture) withholdBinds(errFor func(*corev1.Binding) error) {
	f.client.PrependReactor("create", "pods", func(action k8stesting.Action) (bool, runtime.Object, error) {
		ca, ok := action.(k8stesting.CreateAction)
		if !ok || ca.GetSubresource() != "binding" {
			return false, nil, nil
		}
		b := ca.GetObject().(*corev1.Binding)
		if errFor != nil {
			if err := errFor(b); err != nil {
				return true, nil, err
			}
		}
		return true, b, nil
	})
}

func (f *fixture) bindingCalls() int {
	n := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "create" && a.GetSubresource() == "binding" {
			n++
		}
	}
	return n
}

// otherScheduler is bindPod of another scheduler.
func otherScheduler(p *corev1.Pod) *corev1.Pod {
	p.Spec.SchedulerName = "someone-elses-scheduler"
	return p
}

func TestBind(t *testing.T) {
	forbidden := apierrors.NewForbidden(podsGVR.GroupResource(), "p", errors.New("no"))
	unavailable := apierrors.NewInternalError(errors.New("etcd timeout"))
	tests := []struct {
		name string
		// pods exist in the cluster; bindPod is bound to node n1 (4000m / 4Gi).
		pods    []runtime.Object
		bindPod *corev1.Pod
		// filtered are the nodes the extender's filter passed for bindPod
		// (nil: n1), filterAge before the bind.
		filtered   []string
		filterAge  time.Duration
		noUID      bool
		apiErr     error
		wantErr    string // substring of ExtenderBindingResult.Error; "" succeeds
		wantCalls  int    // Binding API calls
		wantFree   reclaimable.Resources
		wantAssume int
		wantResult string
		wantReason string // bind_refusals_total reason; "" for none
	}{{
		name:       "a pod that fits is bound and its room assumed until the informer shows it",
		bindPod:    pod("p", "", 3000, gi),
		wantCalls:  1,
		wantFree:   req(1000, 3*gi),
		wantAssume: 1,
		wantResult: bindSuccess,
	}, {
		name:       "a filter verdict just within its time to live binds",
		bindPod:    pod("p", "", 3000, gi),
		filterAge:  filterPassTTL,
		wantCalls:  1,
		wantFree:   req(1000, 3*gi),
		wantAssume: 1,
		wantResult: bindSuccess,
	}, {
		name:       "a pod bigger than the room left is refused without an API call",
		pods:       []runtime.Object{pod("running", "n1", 3500, gi)},
		bindPod:    pod("p", "", 1000, gi),
		wantErr:    "node n1 has no room left for pod batch/p: reclaimed-cpu: need 1000m, free 500m",
		wantFree:   req(500, 3*gi),
		wantResult: bindConflict,
		wantReason: refusedNoRoom,
	}, {
		name:       "a definite API rejection returns the room at once",
		bindPod:    pod("p", "", 3000, gi),
		apiErr:     forbidden,
		wantErr:    "binding pod batch/p to node n1: ",
		wantCalls:  1,
		wantFree:   req(4000, 4*gi),
		wantResult: bindAPIError,
	}, {
		name:       "an API failure of unknown outcome keeps the room assumed",
		bindPod:    pod("p", "", 3000, gi),
		apiErr:     unavailable,
		wantErr:    "etcd timeout",
		wantCalls:  1,
		wantFree:   req(1000, 3*gi),
		wantAssume: 1,
		wantResult: bindAPIError,
	}, {
		name:       "a pod whose requests differ from its limits is refused",
		bindPod:    mismatched("p"),
		wantErr:    "requests differ from its limits",
		wantFree:   req(4000, 4*gi),
		wantResult: bindRejected,
		wantReason: refusedMismatch,
	}, {
		name:       "a pod the informer shows bound already is refused",
		bindPod:    pod("p", "n2", 1000, gi),
		wantErr:    "pod batch/p is already bound to node n2",
		wantFree:   req(4000, 4*gi),
		wantResult: bindRejected,
		wantReason: refusedBound,
	}, {
		name:       "a pod asking no reclaimed resource is refused: it is not this extender's to place",
		bindPod:    plainPod("p"),
		wantErr:    "pod batch/p asks no kube-reclaim.io/reclaimed-cpu or kube-reclaim.io/reclaimed-memory",
		wantFree:   req(4000, 4*gi),
		wantResult: bindRejected,
		wantReason: refusedNoRequest,
	}, {
		name:       "a pod of another scheduler is refused, even one asking reclaimed resources",
		bindPod:    otherScheduler(pod("p", "", 1000, gi)),
		wantErr:    `pod batch/p names scheduler "someone-elses-scheduler", not one this extender binds for (--scheduler-name)`,
		wantFree:   req(4000, 4*gi),
		wantResult: bindRejected,
		wantReason: refusedScheduler,
	}, {
		name:       "a pod of another scheduler asking nothing reclaimed is refused",
		bindPod:    otherScheduler(plainPod("p")),
		wantErr:    "not one this extender binds for",
		wantFree:   req(4000, 4*gi),
		wantResult: bindRejected,
		wantReason: refusedScheduler,
	}, {
		name:       "a node the filter did not pass for the pod is refused",
		bindPod:    pod("p", "", 1000, gi),
		filtered:   []string{"n2"},
		wantErr:    "node n1 was not passed by this extender's filter for pod batch/p (UID uid-p) within 2m0s",
		wantFree:   req(4000, 4*gi),
		wantResult: bindRejected,
		wantReason: refusedNotFiltered,
	}, {
		name:       "a pod the filter never saw is refused",
		bindPod:    pod("p", "", 1000, gi),
		filtered:   []string{},
		wantErr:    "was not passed by this extender's filter",
		wantFree:   req(4000, 4*gi),
		wantResult: bindRejected,
		wantReason: refusedNotFiltered,
	}, {
		name:       "a filter verdict older than its time to live is refused",
		bindPod:    pod("p", "", 1000, gi),
		filterAge:  filterPassTTL + time.Millisecond,
		wantErr:    "was not passed by this extender's filter",
		wantFree:   req(4000, 4*gi),
		wantResult: bindRejected,
		wantReason: refusedNotFiltered,
	}, {
		name:       "a bind naming no pod UID is refused",
		bindPod:    pod("p", "", 1000, gi),
		noUID:      true,
		wantErr:    "pod batch/p: the bind names no PodUID",
		wantFree:   req(4000, 4*gi),
		wantResult: bindRejected,
		wantReason: refusedNoUID,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := append([]runtime.Object{node("n1", 4000, 4*gi, time.Minute), node("n2", 4000, 4*gi, time.Minute), tt.bindPod}, tt.pods...)
			f := newFixture(t, fixtureOpts{}, objs...)
			f.withholdBinds(func(*corev1.Binding) error { return tt.apiErr })
			filtered := tt.filtered
			if filtered == nil {
				filtered = []string{"n1"}
			}
			f.admit(tt.bindPod, filtered...)
			f.clock.Step(tt.filterAge)
			p := tt.bindPod.DeepCopy()
			if tt.noUID {
				p.UID = ""
			}
			res := f.bindOnly(p, "n1")
			switch {
			case tt.wantErr == "" && res.Error != "":
				t.Errorf("Error = %q, want success", res.Error)
			case tt.wantErr != "" && !strings.Contains(res.Error, tt.wantErr):
				t.Errorf("Error = %q, want it to contain %q", res.Error, tt.wantErr)
			}
			if got := f.bindingCalls(); got != tt.wantCalls {
				t.Errorf("Binding calls = %d, want %d", got, tt.wantCalls)
			}
			if got := f.free("n1"); got != tt.wantFree {
				t.Errorf("free = %+v, want %+v", got, tt.wantFree)
			}
			if got := f.assumptions(); got != tt.wantAssume {
				t.Errorf("assumptions = %d, want %d", got, tt.wantAssume)
			}
			if got := testutil.ToFloat64(f.ext.server.metrics.binds.WithLabelValues(tt.wantResult)); got != 1 {
				t.Errorf("binds_total{result=%q} = %v, want 1", tt.wantResult, got)
			}
			refusals := f.bindRefusals()
			if want := testutil.ToFloat64(f.ext.server.metrics.bindRefusals.WithLabelValues(tt.wantReason)); tt.wantReason == "" && refusals != 0 || tt.wantReason != "" && (refusals != 1 || want != 1) {
				t.Errorf("bind_refusals_total: %v in all, want 1 of reason %q only", refusals, tt.wantReason)
			}
		})
	}
}

// --scheduler-name lists the schedulers whose pods bind places; the
// default is the shipped kube-reclaim-scheduler.
func TestBindServesTheConfiguredSchedulerNames(t *testing.T) {
	mine, theirs, shipped := pod("mine", "", 1000, gi), pod("theirs", "", 1000, gi), pod("shipped", "", 1000, gi)
	mine.Spec.SchedulerName, theirs.Spec.SchedulerName = "default-scheduler", "other"
	for _, tt := range []struct {
		name   string
		names  []string
		wantOK map[string]bool
	}{
		{"the default serves kube-reclaim-scheduler only", nil, map[string]bool{"shipped": true}},
		{"several names serve each of them", []string{"default-scheduler", SchedulerName}, map[string]bool{"mine": true, "shipped": true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{schedulerNames: tt.names}, node("n1", 8000, 8*gi, time.Minute), mine, theirs, shipped)
			f.withholdBinds(nil)
			for _, p := range []*corev1.Pod{mine, theirs, shipped} {
				res := f.bind(p, "n1")
				if ok := res.Error == ""; ok != tt.wantOK[p.Name] {
					t.Errorf("%s (scheduler %q): Error = %q, want bound %v", p.Name, p.Spec.SchedulerName, res.Error, tt.wantOK[p.Name])
				}
			}
		})
	}
}

// kube-scheduler sends the pod's UID with every bind.
func TestBindSendsTheSchedulersPodUID(t *testing.T) {
	p := pod("p", "", 1000, gi)
	f := newFixture(t, fixtureOpts{}, node("n1", 4000, 4*gi, time.Minute), p)
	f.apiServerBinds(nil, nil)
	// A recreated pod (same name, other UID, the informer still shows the
	// first): the API server holds no pod of the UID the scheduler named,
	// so nothing is bound in its place.
	other := pod("p", "", 1000, gi)
	other.UID = "another-uid"
	if res := f.bind(other, "n1"); !strings.Contains(res.Error, "the API server holds no such pod: the pod of that name has UID uid-p") {
		t.Errorf("Error = %q, want a refusal naming the stored UID", res.Error)
	}
	// Positive control: the scheduler's own UID binds.
	if res := f.bind(p, "n1"); res.Error != "" {
		t.Fatal(res.Error)
	}
	var uids []types.UID
	for _, a := range f.client.Actions() {
		if a.GetSubresource() == "binding" {
			b := a.(k8stesting.CreateAction).GetObject().(*corev1.Binding)
			uids = append(uids, b.UID)
			if b.Name != "p" || b.Namespace != "batch" || b.Target.Kind != "Node" || b.Target.Name != "n1" {
				t.Errorf("Binding = %+v", b)
			}
		}
	}
	if !reflect.DeepEqual(uids, []types.UID{"uid-p"}) {
		t.Errorf("Binding UIDs = %v, want uid-p only", uids)
	}
}

// A pod the informer has not delivered yet (kube-scheduler's watch is
// ahead of the extender's) is bound as a GET from the API server shows it,
// never as the filter body said: the body may be anyone's. A pod the API
// server does not hold, or holds otherwise than the filter judged it, is
// refused without a Binding.
func TestBindJudgesAPodTheInformerHasNotDeliveredAsTheAPIServerHoldsIt(t *testing.T) {
	fresh := pod("fresh", "", 3000, gi)
	foreign := otherScheduler(pod("foreign", "", 1000, gi))
	small := pod("small", "", 1000, gi)
	tests := []struct {
		name string
		// filterBody is the pod of the filter call before the bind.
		filterBody *corev1.Pod
		wantErr    string // "": bound
		wantReason string
		wantFree   reclaimable.Resources
	}{
		{name: "the pod as the API server holds it binds", filterBody: fresh, wantFree: req(1000, 3*gi)},
		{name: "a pod the API server does not hold is refused", filterBody: pod("invented", "", 1000, gi),
			wantErr: "the API server holds no such pod", wantReason: refusedPodGone, wantFree: req(4000, 4*gi)},
		{name: "a pod of another scheduler claimed to be of this one is refused", filterBody: func() *corev1.Pod {
			p := foreign.DeepCopy()
			p.Spec.SchedulerName = SchedulerName
			return p
		}(), wantErr: "is not the one the API server holds", wantReason: refusedFilterDisagrees, wantFree: req(4000, 4*gi)},
		{name: "a pod claimed to ask less than it does is refused", filterBody: pod("small", "", 100, mi),
			wantErr: "is not the one the API server holds", wantReason: refusedFilterDisagrees, wantFree: req(4000, 4*gi)},
		// Positive control of the two above: the same pods as stored.
		{name: "the small pod as stored binds", filterBody: small, wantFree: req(3000, 3*gi)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, fixtureOpts{}, node("n1", 4000, 4*gi, time.Minute), fresh, foreign, small)
			f.withholdBinds(nil)
			f.blindInformer()
			if res := f.filter(tt.filterBody, "n1"); len(deref(res.NodeNames)) != 1 {
				t.Fatalf("filter = %+v", res)
			}
			res := f.bindOnly(tt.filterBody, "n1")
			switch {
			case tt.wantErr == "" && res.Error != "":
				t.Fatalf("Error = %q, want success", res.Error)
			case !strings.Contains(res.Error, tt.wantErr):
				t.Fatalf("Error = %q, want it to contain %q", res.Error, tt.wantErr)
			}
			wantCalls := 0
			if tt.wantErr == "" {
				wantCalls = 1
			}
			if got, gets := f.bindingCalls(), f.podGets(); got != wantCalls || gets != 1 {
				t.Errorf("%d Binding calls and %d pod GETs, want %d and 1", got, gets, wantCalls)
			}
			if got := f.free("n1"); got != tt.wantFree {
				t.Errorf("free = %+v, want %+v: the room of the pod as stored", got, tt.wantFree)
			}
			if got := testutil.ToFloat64(f.ext.server.metrics.bindFromAPI); got != 1 {
				t.Errorf("bind_pod_lookups_total{source=api} = %v, want 1", got)
			}
			if tt.wantReason != "" {
				if got := testutil.ToFloat64(f.ext.server.metrics.bindRefusals.WithLabelValues(tt.wantReason)); got != 1 {
					t.Errorf("bind_refusals_total{reason=%q} = %v, want 1", tt.wantReason, got)
				}
			}
		})
	}
}

// A forged filter of a pod kube-scheduler filtered, with the pod's UID but
// another body, neither replaces the scheduler's verdict nor is bound
// against, whether the informer holds the pod or not yet.
func TestAForgedFilterOfARealPodDoesNotReplaceItsVerdict(t *testing.T) {
	for _, blind := range []bool{false, true} {
		t.Run(fmt.Sprintf("informer has not delivered the pod: %v", blind), func(t *testing.T) {
			p := pod("p", "", 1000, gi)
			f := newFixture(t, fixtureOpts{}, node("n1", 4000, 4*gi, time.Minute), node("n2", 4000, 4*gi, time.Minute), p)
			f.withholdBinds(nil)
			if blind {
				f.blindInformer()
			}
			f.filter(p, "n1")
			forged := p.DeepCopy()
			forged.ResourceVersion = "forged"
			forged.Spec.Containers[0].Resources = pod("x", "", 100, mi).Spec.Containers[0].Resources
			f.filter(forged, "n2")
			if got := testutil.ToFloat64(f.ext.server.metrics.filterNotRecorded); got != 1 {
				t.Errorf("filter_verdicts_not_recorded_total = %v, want 1", got)
			}
			if res := f.bindOnly(p, "n2"); !strings.Contains(res.Error, "was not passed by this extender's filter") {
				t.Errorf("bind to the forged filter's node: Error = %q, want a refusal", res.Error)
			}
			// The scheduler's verdict stands: its bind goes through.
			if res := f.bindOnly(p, "n1"); res.Error != "" {
				t.Errorf("the scheduler's bind: %q", res.Error)
			}
			if got := f.free("n1"); got != req(3000, 3*gi) {
				t.Errorf("free = %+v, want 3000m / 3Gi: the stored pod's request", got)
			}
		})
	}
}

// The filter's verdict authorises exactly the nodes it passed: a pod that
// fits one node but not another binds only to the first, and a later
// filter of the same pod replaces the earlier verdict.
func TestBindFollowsTheFiltersVerdict(t *testing.T) {
	p := pod("p", "", 2000, gi)
	f := newFixture(t, fixtureOpts{}, node("roomy", 4000, 4*gi, time.Minute), node("small", 1000, 4*gi, time.Minute), node("other", 4000, 4*gi, time.Minute), p)
	f.withholdBinds(nil)
	if res := f.filter(p, "roomy", "small"); !reflect.DeepEqual(deref(res.NodeNames), []string{"roomy"}) {
		t.Fatalf("filter passed %v, want roomy", deref(res.NodeNames))
	}
	for _, n := range []string{"small", "other"} {
		if res := f.bindOnly(p, n); !strings.Contains(res.Error, "was not passed by this extender's filter") {
			t.Errorf("bind to %s: Error = %q, want a refusal", n, res.Error)
		}
	}
	f.filter(p, "other")
	if res := f.bindOnly(p, "roomy"); !strings.Contains(res.Error, "was not passed by this extender's filter") {
		t.Errorf("bind to roomy after a later filter passed only other: Error = %q, want a refusal", res.Error)
	}
	if res := f.bindOnly(p, "other"); res.Error != "" {
		t.Errorf("bind to other: %q", res.Error)
	}
	if got := f.bindingCalls(); got != 1 {
		t.Errorf("%d Binding calls, want 1", got)
	}
}

func TestFilteredPodsForgetsTheOldestBeyondItsSize(t *testing.T) {
	rec := func(name string) *podRecord {
		return &podRecord{namespace: "ns", name: name, uid: types.UID("uid-" + name)}
	}
	kept := func(f *filteredPods, name, node string) bool {
		_, ok := f.passed("ns", name, types.UID("uid-"+name), node, t0)
		return ok
	}
	t.Run("beyond its pods", func(t *testing.T) {
		f := newFilteredPods(2, 100)
		for _, n := range []string{"a", "b", "c"} {
			f.add(rec(n), []string{"n1"}, t0, nil)
		}
		for name, want := range map[string]bool{"a": false, "b": true, "c": true} {
			if got := kept(f, name, "n1"); got != want {
				t.Errorf("%s kept = %v, want %v", name, got, want)
			}
		}
		if _, ok := f.passed("other", "b", "uid-b", "n1", t0); ok {
			t.Error("a record was returned for another namespace")
		}
		if pods, nodes := f.counts(); pods != 2 || nodes != 2 {
			t.Errorf("%d pods and %d nodes kept, want 2 and 2", pods, nodes)
		}
	})
	t.Run("beyond its nodes", func(t *testing.T) {
		f := newFilteredPods(100, 5)
		f.add(rec("a"), []string{"n1", "n2"}, t0, nil)
		f.add(rec("b"), []string{"n1", "n2"}, t0, nil)
		f.add(rec("c"), []string{"n1", "n2"}, t0, nil) // a goes
		f.add(rec("d"), []string{"n1", "n2", "n3", "n4", "n5", "n6"}, t0, nil)
		for name, want := range map[string]bool{"a": false, "b": false, "c": false, "d": true} {
			if got := kept(f, name, "n1"); got != want {
				t.Errorf("%s kept = %v, want %v", name, got, want)
			}
		}
		if kept(f, "d", "n6") {
			t.Error("d's sixth node was kept beyond the bound of 5")
		}
		if pods, nodes := f.counts(); pods != 1 || nodes != 5 {
			t.Errorf("%d pods and %d nodes kept, want 1 and 5", pods, nodes)
		}
	})
	t.Run("a later filter of a pod replaces its verdict", func(t *testing.T) {
		f := newFilteredPods(3, 4)
		f.add(rec("a"), []string{"n1", "n2", "n3"}, t0, nil)
		f.add(rec("a"), []string{"n4"}, t0, nil)
		f.add(rec("b"), []string{"n1", "n2", "n3"}, t0, nil) // fits: a's first verdict no longer counts
		if kept(f, "a", "n1") || !kept(f, "a", "n4") || !kept(f, "b", "n3") {
			t.Error("want a on n4 only and b on n3")
		}
		if pods, nodes := f.counts(); pods != 2 || nodes != 4 {
			t.Errorf("%d pods and %d nodes kept, want 2 and 4", pods, nodes)
		}
		if held := len(f.ring[0].passed); held != 0 {
			t.Errorf("the replaced record still holds %d names", held)
		}
		// The replaced record's ring slot goes first, and with it nothing.
		f.add(rec("c"), nil, t0, nil)
		f.add(rec("d"), nil, t0, nil)
		if !kept(f, "b", "n1") {
			t.Error("b forgotten, want the replaced slot dropped before it")
		}
	})
	t.Run("a pod with names longer than the API allows is not kept", func(t *testing.T) {
		f := newFilteredPods(3, 10)
		long := rec(strings.Repeat("x", maxNameBytes+1))
		f.add(long, []string{"n1"}, t0, nil)
		f.add(rec("a"), []string{"n1"}, t0, nil) // positive control
		if _, ok := f.passed("ns", long.name, long.uid, "n1", t0); ok || !kept(f, "a", "n1") {
			t.Errorf("long kept %v, a kept %v; want only a", ok, kept(f, "a", "n1"))
		}
	})
	t.Run("the caller's slice is copied", func(t *testing.T) {
		f := newFilteredPods(3, 10)
		names := []string{"n1"}
		f.add(rec("a"), names, t0, nil)
		names[0] = "n9"
		if !kept(f, "a", "n1") || kept(f, "a", "n9") {
			t.Error("the record follows the caller's reused slice")
		}
	})
}

// A filter's verdict is kept for bind only for a pod that agrees with the
// stored one, so that a body anyone can send does not take the place of
// the scheduler's.
func TestFilteredPodsKeepOnlyVerdictsThatAgreeWithTheStoredPod(t *testing.T) {
	genuine := newPodRecord(testNames, pod("p", "", 1000, gi))
	forged := newPodRecord(testNames, pod("p", "", 100, mi))
	for _, tt := range []struct {
		name string
		// old is recorded first (on n1) with no stored pod; nil: none.
		old *podRecord
		// rec is then recorded on n2, with stored as the informer's record.
		rec, stored  *podRecord
		wantRecorded bool
		wantNode     string // the node the kept verdict passed
	}{
		{name: "a first verdict, the informer blind", rec: forged, wantRecorded: true, wantNode: "n2"},
		{name: "a later verdict of the same pod replaces the earlier", old: genuine, rec: genuine, wantRecorded: true, wantNode: "n2"},
		{name: "a disagreeing verdict does not replace one while the informer is blind", old: genuine, rec: forged, wantNode: "n1"},
		{name: "a disagreeing verdict is not kept once the informer holds the pod", rec: forged, stored: genuine, wantNode: ""},
		{name: "nor does it replace the stored pod's", old: genuine, rec: forged, stored: genuine, wantNode: "n1"},
		{name: "the stored pod's replaces a forged first one", old: forged, rec: genuine, stored: genuine, wantRecorded: true, wantNode: "n2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFilteredPods(10, 100)
			if tt.old != nil && !f.add(tt.old, []string{"n1"}, t0, nil) {
				t.Fatal("the first verdict was not recorded")
			}
			if got := f.add(tt.rec, []string{"n2"}, t0, tt.stored); got != tt.wantRecorded {
				t.Errorf("recorded = %v, want %v", got, tt.wantRecorded)
			}
			var node string
			for _, n := range []string{"n1", "n2"} {
				if _, ok := f.passed("batch", "p", "uid-p", n, t0); ok {
					node += n
				}
			}
			if node != tt.wantNode {
				t.Errorf("the kept verdict passed %q, want %q", node, tt.wantNode)
			}
		})
	}
}

type emptyPods struct{}

func (emptyPods) pod(string, string) (*podRecord, bool) { return nil, false }

// blindInformer makes the server see an empty pod informer, as when
// kube-scheduler's watch is ahead of the extender's.
func (f *fixture) blindInformer() {
	f.ext.server.pods, f.ext.server.args.pods = emptyPods{}, emptyPods{}
}

// podGets counts the GETs of pods sent to the API server.
func (f *fixture) podGets() int {
	n := 0
	for _, a := range f.client.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "pods" && a.GetSubresource() == "" {
			n++
		}
	}
	return n
}

func TestAssumptionLifecycle(t *testing.T) {
	ctx := t.Context()
	t.Run("confirmed when the informer shows the pod bound", func(t *testing.T) {
		p := pod("p", "", 3000, gi)
		f := newFixture(t, fixtureOpts{}, node("n1", 4000, 4*gi, time.Minute), p)
		f.apiServerBinds(nil, nil)
		if res := f.bind(p, "n1"); res.Error != "" {
			t.Fatal(res.Error)
		}
		f.eventually("the informer to confirm the bind", func() bool { return f.assumptions() == 0 })
		// Counted once, through the informer.
		if got := f.free("n1"); got != req(1000, 3*gi) {
			t.Errorf("free = %+v, want 1000m / 3Gi", got)
		}
		if got := metrictest.HistogramCount(t, f.ext.server.metrics.cache.AssumptionConfirmed); got != 1 {
			t.Errorf("confirmations observed = %v, want 1", got)
		}
		if got := metrictest.Gathered(f.t, f.reg, "kube_reclaim_extender_assumptions", nil); got != 0 {
			t.Errorf("assumptions gauge = %v", got)
		}
	})
	t.Run("expires after assume-timeout when the informer never shows the pod", func(t *testing.T) {
		p := pod("p", "", 3000, gi)
		f := newFixture(t, fixtureOpts{assumeTimeout: 20 * time.Second}, node("n1", 4000, 4*gi, time.Minute), p)
		f.withholdBinds(nil)
		if res := f.bind(p, "n1"); res.Error != "" {
			t.Fatal(res.Error)
		}
		if got := metrictest.Gathered(f.t, f.reg, "kube_reclaim_extender_assumptions", nil); got != 1 {
			t.Errorf("assumptions gauge = %v, want 1", got)
		}
		f.clock.Step(20 * time.Second)
		if gone := f.ext.cache.Expire(f.clock.Now()); len(gone) != 0 {
			t.Errorf("expired at exactly the timeout: %v", gone)
		}
		if got := f.free("n1"); got != req(1000, 3*gi) {
			t.Errorf("free before expiry = %+v", got)
		}
		f.clock.Step(time.Millisecond)
		if gone := f.ext.cache.Expire(f.clock.Now()); len(gone) != 1 || gone[0].Pod != "batch/p" || gone[0].Node != "n1" {
			t.Errorf("expired = %+v, want batch/p on n1", gone)
		}
		if got := f.free("n1"); got != req(4000, 4*gi) {
			t.Errorf("free after expiry = %+v, want everything", got)
		}
	})
	t.Run("expiry loop counts expired assumptions", func(t *testing.T) {
		p := pod("p", "", 3000, gi)
		f := newFixture(t, fixtureOpts{assumeTimeout: 20 * time.Second}, node("n1", 4000, 4*gi, time.Minute), p)
		f.withholdBinds(nil)
		if res := f.bind(p, "n1"); res.Error != "" {
			t.Fatal(res.Error)
		}
		f.clock.Step(time.Minute)
		go f.ext.cache.RunExpiry(ctx, time.Millisecond)
		f.eventually("the expiry loop", func() bool {
			return testutil.ToFloat64(f.ext.server.metrics.cache.AssumptionsExpired) == 1
		})
	})
	t.Run("ends when the pod is deleted", func(t *testing.T) {
		p := pod("p", "", 3000, gi)
		f := newFixture(t, fixtureOpts{}, node("n1", 4000, 4*gi, time.Minute), p)
		f.withholdBinds(nil)
		if res := f.bind(p, "n1"); res.Error != "" {
			t.Fatal(res.Error)
		}
		if err := f.client.CoreV1().Pods("batch").Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		f.eventually("the deletion", func() bool { return f.assumptions() == 0 })
		if got := f.free("n1"); got != req(4000, 4*gi) {
			t.Errorf("free = %+v, want everything", got)
		}
	})
	t.Run("a retried bind replaces the pod's earlier assumption", func(t *testing.T) {
		p := pod("p", "", 3000, gi)
		f := newFixture(t, fixtureOpts{}, node("n1", 4000, 4*gi, time.Minute), node("n2", 4000, 4*gi, time.Minute), p)
		fail := true
		f.withholdBinds(func(*corev1.Binding) error {
			if fail {
				return apierrors.NewTimeoutError("binding", 1)
			}
			return nil
		})
		if res := f.bind(p, "n1"); res.Error == "" {
			t.Fatal("want the first bind to fail")
		}
		fail = false
		if res := f.bind(p, "n2"); res.Error != "" {
			t.Fatal(res.Error)
		}
		if f.free("n1") != req(4000, 4*gi) || f.free("n2") != req(1000, 3*gi) || f.assumptions() != 1 {
			t.Errorf("free n1 %+v n2 %+v, assumptions %d; want only n2 holding the pod", f.free("n1"), f.free("n2"), f.assumptions())
		}
	})
	t.Run("the informer seeing the pod before the Binding call returns is not counted twice", func(t *testing.T) {
		p := pod("p", "", 3000, gi)
		f := newFixture(t, fixtureOpts{}, node("n1", 4000, 4*gi, time.Minute), p)
		f.apiServerBinds(nil, func(b *corev1.Binding) {
			// Wait, inside the Binding call, until the informer has confirmed.
			f.eventually("confirmation during the call", func() bool { return f.assumptions() == 0 })
		})
		if res := f.bind(p, "n1"); res.Error != "" {
			t.Fatal(res.Error)
		}
		if got, n := f.free("n1"), f.assumptions(); got != req(1000, 3*gi) || n != 0 {
			t.Errorf("free = %+v with %d assumptions, want 1000m / 3Gi and none", got, n)
		}
	})
}

// Hundreds of concurrent binds (and filters) never put more on a node than
// it publishes, whatever the API answers.
func TestConcurrentBindsNeverOverbook(t *testing.T) {
	const nodes = 10
	room := req(10000, 10*gi)
	tests := []struct {
		name string
		pods int
		size func(r *rand.Rand) reclaimable.Resources
		// apiErr: nil binds, otherwise the API's answer.
		apiErr func(i int) error
		// wantBound, when > 0, is the exact number of pods bound.
		wantBound int
	}{{
		name: "identical pods fill every node exactly",
		pods: 300,
		size: func(*rand.Rand) reclaimable.Resources { return req(1000, gi) },
		// 10 per node.
		wantBound: 100,
	}, {
		name: "random sizes",
		pods: 400,
		size: func(r *rand.Rand) reclaimable.Resources {
			return req(100+r.Int64N(2900), 100*mi+r.Int64N(3*gi))
		},
	}, {
		name: "random sizes with rejected and unknown API outcomes",
		pods: 400,
		size: func(r *rand.Rand) reclaimable.Resources {
			return req(100+r.Int64N(2900), 100*mi+r.Int64N(3*gi))
		},
		apiErr: func(i int) error {
			switch i % 7 {
			case 3:
				return apierrors.NewForbidden(podsGVR.GroupResource(), "x", errors.New("denied"))
			case 5:
				// Outcome unknown: the room stays assumed, so it counts too.
				return apierrors.NewServiceUnavailable("overloaded")
			}
			return nil
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rng := rand.New(rand.NewPCG(1, uint64(tt.pods)))
			objs := []runtime.Object{}
			nodeNames := make([]string, nodes)
			for i := range nodes {
				nodeNames[i] = fmt.Sprintf("n%02d", i)
				objs = append(objs, node(nodeNames[i], room.CPUMilli, room.MemoryBytes, time.Minute))
			}
			pods := make([]*corev1.Pod, tt.pods)
			index := map[string]int{}
			for i := range pods {
				r := tt.size(rng)
				pods[i] = pod(fmt.Sprintf("p%03d", i), "", r.CPUMilli, r.MemoryBytes)
				index[pods[i].Name] = i
				objs = append(objs, pods[i])
			}
			f := newFixture(t, fixtureOpts{}, objs...)
			// Every call at once: the lock is under test here, not the slots.
			f.ext.server.setMaxInFlight(tt.pods+20, tt.pods+20)

			var mu sync.Mutex
			booked := map[string]reclaimable.Resources{} // node → requests of pods the API bound or may have bound
			var bound int
			var overbooked []string
			account := func(b *corev1.Binding) {
				mu.Lock()
				defer mu.Unlock()
				r, _ := testNames.PodRequest(pods[index[b.Name]])
				sum := booked[b.Target.Name].Add(r)
				booked[b.Target.Name] = sum
				if sum.CPUMilli > room.CPUMilli || sum.MemoryBytes > room.MemoryBytes {
					overbooked = append(overbooked, fmt.Sprintf("%s: %+v", b.Target.Name, sum))
				}
			}
			f.apiServerBinds(func(b *corev1.Binding) error {
				if tt.apiErr == nil {
					return nil
				}
				err := tt.apiErr(index[b.Name])
				if err != nil && !definitelyNotBound(err) {
					account(b) // the API may have bound it: it must fit too
				}
				return err
			}, func(b *corev1.Binding) {
				account(b)
				mu.Lock()
				bound++
				mu.Unlock()
			})

			var wg sync.WaitGroup
			start := make(chan struct{})
			for i, p := range pods {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					n := nodeNames[i%nodes]
					if tt.wantBound == 0 {
						n = nodeNames[rand.IntN(nodes)]
					}
					f.bind(p, n)
				}()
			}
			// Filters and prioritizes race with the binds.
			for range 20 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					<-start
					for range 10 {
						f.filter(pods[0], nodeNames...)
						f.prioritize(pods[1], nodeNames...)
					}
				}()
			}
			close(start)
			wg.Wait()

			if len(overbooked) > 0 {
				t.Fatalf("over-booked: %v", overbooked)
			}
			if tt.wantBound > 0 && bound != tt.wantBound {
				t.Errorf("bound %d pods, want exactly %d (room for 10 per node)", bound, tt.wantBound)
			}
			if bound == 0 {
				t.Fatal("nothing bound")
			}
			// Once the informer caught up, the extender's own sums agree
			// with what the API bound.
			f.eventually("the informer to confirm every bind", func() bool {
				for _, n := range nodeNames {
					mu.Lock()
					want := room.Add(reclaimable.Resources{CPUMilli: -booked[n].CPUMilli, MemoryBytes: -booked[n].MemoryBytes})
					mu.Unlock()
					if f.free(n) != want {
						return false
					}
				}
				return true
			})
			if got := testutil.ToFloat64(f.ext.server.metrics.binds.WithLabelValues(bindSuccess)); int(got) != bound {
				t.Errorf("binds_total{result=success} = %v, want %d", got, bound)
			}
			t.Logf("bound %d of %d pods; conflicts %v", bound, tt.pods,
				testutil.ToFloat64(f.ext.server.metrics.binds.WithLabelValues(bindConflict)))
		})
	}
}
