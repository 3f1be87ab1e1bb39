package extender

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	k8stesting "k8s.io/client-go/testing"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
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

func TestBind(t *testing.T) {
	forbidden := apierrors.NewForbidden(podsGVR.GroupResource(), "p", errors.New("no"))
	unavailable := apierrors.NewInternalError(errors.New("etcd timeout"))
	tests := []struct {
		name string
		// pods exist in the cluster; bindPod is bound to node n1 (4000m / 4Gi).
		pods       []runtime.Object
		bindPod    *corev1.Pod
		apiErr     error
		wantErr    string // substring of ExtenderBindingResult.Error; "" succeeds
		wantCalls  int    // Binding API calls
		wantFree   reclaimable.Resources
		wantAssume int
		wantResult string
	}{{
		name:       "a pod that fits is bound and its room assumed until the informer shows it",
		bindPod:    pod("p", "", 3000, gi),
		wantCalls:  1,
		wantFree:   req(1000, 3*gi),
		wantAssume: 1,
		wantResult: bindSuccess,
	}, {
		name:       "a pod bigger than the room left is refused without an API call",
		pods:       []runtime.Object{pod("running", "n1", 3500, gi)},
		bindPod:    pod("p", "", 1000, gi),
		wantErr:    "node n1 has no room left for pod batch/p: reclaimed-cpu: need 1000m, free 500m",
		wantCalls:  0,
		wantFree:   req(500, 3*gi),
		wantResult: bindConflict,
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
	}, {
		name:       "a pod the informer shows bound already is refused",
		bindPod:    pod("p", "n2", 1000, gi),
		wantErr:    "pod batch/p is already bound to node n2",
		wantFree:   req(4000, 4*gi),
		wantResult: bindRejected,
	}, {
		name:       "a pod asking no reclaimed resource is bound without an assumption",
		bindPod:    plainPod("p"),
		wantCalls:  1,
		wantFree:   req(4000, 4*gi),
		wantResult: bindSuccess,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs := append([]runtime.Object{node("n1", 4000, 4*gi, time.Minute), node("n2", 4000, 4*gi, time.Minute), tt.bindPod}, tt.pods...)
			f := newFixture(t, fixtureOpts{}, objs...)
			f.withholdBinds(func(*corev1.Binding) error { return tt.apiErr })
			res := f.bind(tt.bindPod, "n1")
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
			if got := f.counter("kube_reclaim_extender_binds_total", map[string]string{"result": tt.wantResult}); got != 1 {
				t.Errorf("binds_total{result=%q} = %v, want 1", tt.wantResult, got)
			}
		})
	}
}

func TestBindSendsTheSchedulersPodUID(t *testing.T) {
	p := pod("p", "", 1000, gi)
	f := newFixture(t, fixtureOpts{}, node("n1", 4000, 4*gi, time.Minute), p)
	f.withholdBinds(nil)
	if res := f.bind(p, "n1"); res.Error != "" {
		t.Fatal(res.Error)
	}
	for _, a := range f.client.Actions() {
		if a.GetSubresource() == "binding" {
			b := a.(k8stesting.CreateAction).GetObject().(*corev1.Binding)
			if b.UID != p.UID || b.Name != "p" || b.Namespace != "batch" || b.Target.Kind != "Node" || b.Target.Name != "n1" {
				t.Errorf("Binding = %+v", b)
			}
		}
	}
	// A recreated pod (same name, other UID) is not bound in its place.
	res := f.bind(pod("p", "", 1000, gi).DeepCopy(), "n1")
	if res.Error != "" {
		t.Fatalf("same UID again: %s", res.Error)
	}
	other := pod("p", "", 1000, gi)
	other.UID = "another-uid"
	if res := f.bind(other, "n1"); !strings.Contains(res.Error, "not the UID another-uid the scheduler asked to bind") {
		t.Errorf("Error = %q", res.Error)
	}
}

func TestBindLooksUpPodsTheInformerHasNotSeen(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, node("n1", 4000, 4*gi, time.Minute))
	f.withholdBinds(nil)
	f.ext.server.pods = emptyPods{}
	p := pod("late", "", 3000, gi)
	if _, err := f.client.CoreV1().Pods("batch").Create(t.Context(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if res := f.bind(p, "n1"); res.Error != "" {
		t.Fatalf("Error = %q", res.Error)
	}
	if got := f.free("n1"); got != req(1000, 3*gi) {
		t.Errorf("free = %+v, want 1000m / 3Gi", got)
	}
	if res := f.bind(pod("absent", "", 1000, gi), "n1"); !strings.Contains(res.Error, `getting pod batch/absent: pods "absent" not found`) {
		t.Errorf("Error = %q", res.Error)
	}
	if got := f.counter("kube_reclaim_extender_bind_pod_lookups_total", map[string]string{"source": "api"}); got != 2 {
		t.Errorf("api lookups = %v, want 2", got)
	}
}

// A pod the informer has not delivered yet is bound from the record filter
// made of it: no GET, so binds cost one API call each. A pod filter never
// saw, or one of the same name with another UID, still needs the GET.
func TestBindUsesThePodFilterAdmittedInsteadOfAGet(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, node("n1", 4000, 4*gi, time.Minute))
	f.withholdBinds(nil)
	f.ext.server.pods = emptyPods{}
	p := pod("fresh", "", 3000, gi)
	if res := f.filter(p, "n1"); len(*res.NodeNames) != 1 {
		t.Fatalf("filter = %+v", res)
	}
	gets := func() int {
		n := 0
		for _, a := range f.client.Actions() {
			if a.GetVerb() == "get" && a.GetResource().Resource == "pods" {
				n++
			}
		}
		return n
	}
	if res := f.bind(p, "n1"); res.Error != "" {
		t.Fatalf("Error = %q", res.Error)
	}
	if got := gets(); got != 0 {
		t.Errorf("%d pod GETs for a pod filter admitted, want 0", got)
	}
	if got := f.free("n1"); got != req(1000, 3*gi) {
		t.Errorf("free = %+v, want 1000m / 3Gi: the bind reserved the filtered pod's request", got)
	}
	if got := f.counter("kube_reclaim_extender_bind_pod_lookups_total", map[string]string{"source": "filter"}); got != 1 {
		t.Errorf("filter lookups = %v, want 1", got)
	}
	// Control: the same name with another UID is not the filtered pod.
	other := pod("fresh", "", 1000, gi)
	other.UID = "recreated"
	if res := f.bind(other, "n1"); !strings.Contains(res.Error, "getting pod batch/fresh") {
		t.Errorf("Error = %q, want the GET's answer (the fake API has no such pod)", res.Error)
	}
	if got := gets(); got != 1 {
		t.Errorf("%d pod GETs, want 1 for the pod filter never saw", got)
	}
}

func TestFilteredPodsForgetsTheOldestBeyondItsSize(t *testing.T) {
	f := newFilteredPods(2)
	rec := func(name string) *podRecord {
		return &podRecord{namespace: "ns", name: name, uid: types.UID("uid-" + name)}
	}
	for _, n := range []string{"a", "b", "c"} {
		f.add(rec(n))
	}
	for name, want := range map[string]bool{"a": false, "b": true, "c": true} {
		if _, ok := f.get("ns", name, types.UID("uid-"+name)); ok != want {
			t.Errorf("%s kept = %v, want %v", name, ok, want)
		}
	}
	if _, ok := f.get("other", "b", "uid-b"); ok {
		t.Error("a record was returned for another namespace")
	}
	if len(f.byUID) != 2 {
		t.Errorf("%d records kept, want 2", len(f.byUID))
	}
}

type emptyPods struct{}

func (emptyPods) pod(string, string) (*podRecord, bool) { return nil, false }

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
		if got := f.counter("kube_reclaim_extender_assumption_confirm_duration_seconds", nil); got != 1 {
			t.Errorf("confirmations observed = %v, want 1", got)
		}
		if got := f.counter("kube_reclaim_extender_assumptions", nil); got != 0 {
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
		if got := f.counter("kube_reclaim_extender_assumptions", nil); got != 1 {
			t.Errorf("assumptions gauge = %v, want 1", got)
		}
		f.clock.Step(20 * time.Second)
		if gone := f.ext.cache.expire(f.clock.Now()); len(gone) != 0 {
			t.Errorf("expired at exactly the timeout: %v", gone)
		}
		if got := f.free("n1"); got != req(1000, 3*gi) {
			t.Errorf("free before expiry = %+v", got)
		}
		f.clock.Step(time.Millisecond)
		if gone := f.ext.cache.expire(f.clock.Now()); len(gone) != 1 || gone[0].pod != "batch/p" || gone[0].node != "n1" {
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
		go f.ext.cache.runExpiry(ctx, time.Millisecond)
		f.eventually("the expiry loop", func() bool {
			return f.counter("kube_reclaim_extender_assumptions_expired_total", nil) == 1
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
					want := room.Add(neg(booked[n]))
					mu.Unlock()
					if f.free(n) != want {
						return false
					}
				}
				return true
			})
			if got := f.counter("kube_reclaim_extender_binds_total", map[string]string{"result": bindSuccess}); int(got) != bound {
				t.Errorf("binds_total{result=success} = %v, want %d", got, bound)
			}
			t.Logf("bound %d of %d pods; conflicts %v", bound, tt.pods,
				f.counter("kube_reclaim_extender_binds_total", map[string]string{"result": bindConflict}))
		})
	}
}
