package e2e

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kube-reclaim/kube-reclaim/eviction"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

const (
	// evictionGrace is the publisher's default grace: two periods.
	evictionGrace = 2 * period
	// Each batch pod of testEviction is granted evictPodCPU and
	// evictPodMem and measurably uses evictPodUse of memory (its kwok
	// ResourceUsage) and evictPodUseCPU.
	evictPodCPU    = 1000
	evictPodMem    = 4 * gib
	evictPodUse    = 3 * gib
	evictPodUseCPU = 500
	// cpuRise is the service pod's CPU in the first phase: near the node's
	// 16 cores, so that the room falls below what the batch pods hold.
	cpuRise = 15000
	// pressureShare is the share of allocatable memory the node's pods use
	// in the second phase: above the default evictAbove (90 %). Freeing
	// down to evictUntilBelow (85 %), 7 % of 64Gi = 4.5Gi, takes two batch
	// pods of 3Gi: one does not suffice.
	pressureShare = 0.92
)

// evictionOrder is the order the shedding node's batch pods must go in:
// lowest priority first, then the youngest.
var evictionOrder = []string{"low-young", "low-old", "high-young", "high-old"}

func sorted(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}

// testEviction: with the publisher's default --eviction (on), reclaimed
// pods on two nodes, one of them under a PodDisruptionBudget.
//
// First a regular pod's CPU rises to near the node's allocatable, memory
// untouched: the room falls below what the batch pods hold, which stops
// placement and evicts nothing, looked at every second for 8 periods past
// the grace. The positive control of that look raises the regular pod's
// memory so that the node's pods use 92 % of allocatable, above the 90 %
// threshold: on the first node the publisher then evicts the fewest batch
// pods that bring use under 85 %, lowest priority first then the youngest,
// each with an Event naming memory pressure on the pod and on the node; no
// regular pod. On the second the refusals are reported (metric, Events),
// made at most once per period, and the pods stay until the budget goes.
func (e *env) testEviction(t *testing.T) {
	ctx := context.Background()
	const ns = "evict"
	e.useNamespace(t, ns)
	shed, guarded := 0, 1 // node indexes
	shedNode, guardedNode := e.nodes[shed], e.nodes[guarded]
	t.Cleanup(func() { e.setUsage(t, func(int) usage { return defaultUsage }) })
	pub := e.s.HealthPort(stack.Publisher)
	if args := strings.Join(e.s.Args(stack.Publisher), " "); strings.Contains(args, "--eviction=") {
		t.Fatalf("the publisher runs with an explicit --eviction (%s); this test checks the default", args)
	}

	low, high := e.priorityClass(t, "e2e-batch-low", 100), e.priorityClass(t, "e2e-batch-high", 1000)
	pod := func(name, node, class string) *corev1.Pod {
		p := framework.ReclaimedPod(ns, name, evictPodCPU, evictPodMem)
		p.Spec.NodeName, p.Spec.PriorityClassName = node, class
		if node == guardedNode {
			p.Labels["kube-reclaim.test/guarded"] = "yes"
		}
		return p
	}
	// Two generations a clock second apart, so that creation times (second
	// resolution) order the young after the old.
	framework.CreatePods(t, e.c, []*corev1.Pod{pod("low-old", shedNode, low), pod("high-old", shedNode, high),
		pod("guarded-0", guardedNode, low)})
	e.nextSecond(t, ns, "low-old")
	framework.CreatePods(t, e.c, []*corev1.Pod{pod("low-young", shedNode, low), pod("high-young", shedNode, high),
		pod("guarded-1", guardedNode, low)})
	pdb := &policyv1.PodDisruptionBudget{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "guarded"},
		Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptr(intstr.FromInt32(0)),
			Selector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "kube-reclaim.test/guarded", Operator: metav1.LabelSelectorOpExists}}}},
	}
	if _, err := e.c.Client.PolicyV1().PodDisruptionBudgets(ns).Create(ctx, pdb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitRunning(t, ns, 6)
	for _, name := range e.created(ns) {
		if err := e.c.SetPodUsage(ctx, ns, name, fmt.Sprintf("%dm", evictPodUseCPU), fmt.Sprint(evictPodUse)); err != nil {
			t.Fatal(err)
		}
	}
	e.waitPodsMeasured(t, ns, evictPodUse)

	// Phase 1: CPU near allocatable, memory untouched.
	heldCPU := int64(len(evictionOrder) * evictPodCPU)
	for _, i := range []int{shed, guarded} {
		if err := e.setNodeUsage(i, usage{cpu: cpuRise, mem: defaultUsage.mem}); err != nil {
			t.Fatal(err)
		}
	}
	rise := time.Now()
	var v framework.NodeView
	if took, ok := framework.Poll(2*time.Minute, time.Second, func() bool {
		v = framework.View(t, e.c, shedNode, staleAfter)
		return v.Fresh.Fresh && v.Ann.ZeroReason == "" && v.Ann.CPUMilli < heldCPU
	}); !ok {
		t.Fatalf("the room on %s (%s) did not fall below the %dm the batch pods hold within %s of the CPU rise", shedNode, v.Raw, heldCPU, took)
	}
	t.Logf("%s: service CPU raised to %dm; the room fell to %dm cpu (held %dm) %s later", shedNode, cpuRise, v.Ann.CPUMilli, heldCPU, time.Since(rise).Round(time.Second))
	alloc := v.AllocMem
	evicted0 := framework.Scrape(t, pub, "kube_reclaim_publisher_evictions_total", "reason", eviction.PressureMemory)
	blocked0 := framework.Scrape(t, pub, "kube_reclaim_publisher_evictions_blocked_total")

	// Nothing leaves while only CPU is short. The control raises memory:
	// the same look must then see the shedding node's batch pods leave.
	var pressure bool
	var pressureAt time.Time
	window := evictionGrace + 8*period
	framework.ExpectAbsence(t, framework.Absence{Window: window, Every: time.Second,
		Look: func(time.Duration) ([]string, bool) {
			var violations []string
			shedLeft := 0
			for _, name := range e.leavingPods(t, ns) {
				if pressure && !strings.HasPrefix(name, "guarded-") {
					shedLeft++
					continue
				}
				violations = append(violations, name+" evicted while only CPU was short")
			}
			for _, name := range e.leavingPods(t, appsNS) {
				violations = append(violations, "regular pod "+appsNS+"/"+name+" evicted")
			}
			if v := framework.View(t, e.c, shedNode, staleAfter); !pressure && v.Ann != nil && v.Ann.CPUMilli >= heldCPU {
				violations = append(violations, fmt.Sprintf("the room on %s rose to %dm during the look: the CPU shortage was not held", shedNode, v.Ann.CPUMilli))
			}
			return violations, shedLeft >= 1
		},
		ControlAt: window,
		Control: func() error {
			pressure, pressureAt = true, time.Now()
			for _, i := range []int{shed, guarded} {
				batch := int64(2)
				if i == shed {
					batch = 4
				}
				mem := int64(pressureShare*float64(alloc)) - batch*evictPodUse
				if err := e.setNodeUsage(i, usage{cpu: cpuRise, mem: mem}); err != nil {
					return err
				}
				t.Logf("%s: service memory raised to %s: the pods use %.0f %% of %s allocatable", e.nodes[i], mib(mem), 100*pressureShare, mib(alloc))
			}
			return nil
		},
		// kwok's usage reaches metrics-server within ~35 s; then the grace.
		ControlWithin: evictionGrace + 4*period + 60*time.Second,
	})

	// Phase 2: the fewest, in order. Two of the shedding node's pods must
	// go (see pressureShare); wait for them, then nothing more may leave.
	var victims []string
	if _, ok := framework.Poll(evictionGrace+4*period+60*time.Second, 250*time.Millisecond, func() bool {
		victims = slices.DeleteFunc(e.leavingPods(t, ns), func(n string) bool { return strings.HasPrefix(n, "guarded-") })
		return len(victims) >= 2
	}); !ok {
		t.Fatalf("%s after memory rose, evicted %v on %s, want two", time.Since(pressureAt).Round(time.Second), victims, shedNode)
	}
	t.Logf("evicted %v on %s %s after memory rose above the threshold", victims, shedNode, time.Since(pressureAt).Round(100*time.Millisecond))
	wantVictims := sorted(evictionOrder[:2])
	if !slices.Equal(victims, wantVictims) {
		t.Errorf("evicted %v, want %v: lowest priority first, then the youngest", victims, wantVictims)
	}
	e.expectEvictionEvents(t, ns, shedNode, victims)
	if got := framework.Scrape(t, pub, "kube_reclaim_publisher_evictions_total", "reason", eviction.PressureMemory) - evicted0; got < float64(len(victims)) {
		t.Errorf("evictions_total{reason=%s} rose by %v for %d evictions", eviction.PressureMemory, got, len(victims))
	}

	// The guarded node: refused, reported, not retried in a hot loop.
	if _, ok := framework.Poll(evictionGrace+4*period+60*time.Second, time.Second, func() bool {
		return framework.Scrape(t, pub, "kube_reclaim_publisher_evictions_blocked_total") > blocked0
	}); !ok {
		t.Fatalf("no eviction on %s refused by the PodDisruptionBudget was counted", guardedNode)
	}
	refusedAt := time.Now()
	blocked1 := framework.Scrape(t, pub, "kube_reclaim_publisher_evictions_blocked_total")

	// From here on nothing more may leave: neither the batch pods whose
	// departure brought use under 85 %, nor a regular pod, nor the guarded
	// pods while their budget stands. The positive control deletes the
	// budget: the same look must then see the guarded pods evicted.
	var budgetGone bool
	window = 6 * period
	framework.ExpectAbsence(t, framework.Absence{Window: window, Every: time.Second,
		Look: func(time.Duration) ([]string, bool) {
			var violations []string
			guardedLeft := 0
			for _, name := range e.leavingPods(t, ns) {
				switch {
				case slices.Contains(wantVictims, name):
				case strings.HasPrefix(name, "guarded-") && budgetGone:
					guardedLeft++
				default:
					violations = append(violations, name+" evicted")
				}
			}
			for _, name := range e.leavingPods(t, appsNS) {
				violations = append(violations, "regular pod "+appsNS+"/"+name+" evicted")
			}
			// One guarded pod of 3Gi does not free enough: both go once
			// the budget allows it.
			return violations, guardedLeft >= 1
		},
		ControlAt: window,
		Control: func() error {
			budgetGone = true
			return e.c.Client.PolicyV1().PodDisruptionBudgets(ns).Delete(ctx, "guarded", metav1.DeleteOptions{})
		},
		ControlWithin: 16*period + 30*time.Second, // the refused pods' back-off, at most 16 periods
	})
	refusals := framework.Scrape(t, pub, "kube_reclaim_publisher_evictions_blocked_total") - blocked1
	elapsed := time.Since(refusedAt)
	t.Logf("%v refused evictions on %s in the %s after the first", refusals, guardedNode, elapsed.Round(time.Second))
	// At most one refused call per node per cycle.
	if max := float64(elapsed/period) + 1; refusals > max {
		t.Errorf("%v refused evictions in %s: more than one per period (%v); a hot loop", refusals, elapsed.Round(time.Second), max)
	}
	e.expectBlockedEvents(t, ns, guardedNode)
}

// waitPodsMeasured waits until metrics.k8s.io serves every pod of ns with
// mem of memory: the publisher sums the pods' own samples.
func (e *env) waitPodsMeasured(t *testing.T, ns string, mem int64) {
	t.Helper()
	var got []string
	if took, ok := framework.Poll(3*time.Minute, 2*time.Second, func() bool {
		l, err := e.c.Metrics.MetricsV1beta1().PodMetricses(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		got = got[:0]
		for _, m := range l.Items {
			var used int64
			for _, c := range m.Containers {
				used += c.Usage.Memory().Value()
			}
			if used == mem {
				got = append(got, m.Name)
			}
		}
		return len(got) == len(e.created(ns))
	}); !ok {
		t.Fatalf("within %s metrics.k8s.io measured only %v of the pods of %s at %s", took.Round(time.Second), got, ns, mib(mem))
	}
}

func ptr[T any](v T) *T { return &v }

func (e *env) priorityClass(t *testing.T, name string, value int32) string {
	t.Helper()
	pc := &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Value: value}
	if _, err := e.c.Client.SchedulingV1().PriorityClasses().Create(context.Background(), pc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = e.c.Client.SchedulingV1().PriorityClasses().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	return name
}

// nextSecond waits until the clock is past the second the pod was created in.
func (e *env) nextSecond(t *testing.T, ns, pod string) {
	t.Helper()
	p, err := e.c.Client.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := framework.Poll(5*time.Second, 100*time.Millisecond, func() bool {
		return time.Now().Truncate(time.Second).After(p.CreationTimestamp.Time)
	}); !ok {
		t.Fatal("the clock did not pass the pod's creation second")
	}
}

func (e *env) waitRunning(t *testing.T, ns string, n int) {
	t.Helper()
	if took, ok := framework.Poll(time.Minute, 500*time.Millisecond, func() bool {
		l, err := e.c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		running := 0
		for _, p := range l.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == n
	}); !ok {
		t.Fatalf("%d pods in %s not running within %s", n, ns, took.Round(time.Second))
	}
}

// leavingPods lists, sorted, the pods of ns being deleted or already gone
// since the namespace's pods were created: evicted pods, as this suite
// deletes nothing while a test looks.
func (e *env) leavingPods(t *testing.T, ns string) []string {
	t.Helper()
	l, err := e.c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	present := map[string]bool{}
	var out []string
	for _, p := range l.Items {
		present[p.Name] = true
		if p.DeletionTimestamp != nil {
			out = append(out, p.Name)
		}
	}
	for _, name := range e.created(ns) {
		if !present[name] {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// created is every pod name this test created in ns (the apps namespace:
// the service pods).
func (e *env) created(ns string) []string {
	if ns == appsNS {
		var out []string
		for i := range e.nodes {
			out = append(out, svcPod(i))
		}
		return out
	}
	return []string{"low-old", "low-young", "high-old", "high-young", "guarded-0", "guarded-1"}
}

// events returns the messages of the Events with reason on the object.
func (e *env) events(t *testing.T, ns, kind, name, reason string) []string {
	t.Helper()
	l, err := e.c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: fmt.Sprintf("involvedObject.kind=%s,involvedObject.name=%s,reason=%s", kind, name, reason)})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range l.Items {
		out = append(out, ev.Message)
	}
	return out
}

// expectEvictionEvents checks that every victim has its Event, and the node
// one naming it, both naming memory pressure and what the pod freed.
func (e *env) expectEvictionEvents(t *testing.T, ns, node string, victims []string) {
	t.Helper()
	var missing []string
	const why = "memory pressure: the node's pods use "
	frees := "to free " + resource.NewQuantity(evictPodUse, resource.BinarySI).String() // 3Gi
	// The publisher's event broadcaster writes Events asynchronously,
	// later on a busy machine.
	_, ok := framework.Poll(60*time.Second, time.Second, func() bool {
		missing = missing[:0]
		nodeMsgs := e.events(t, metav1.NamespaceDefault, "Node", node, eviction.ReasonEvicted)
		for _, v := range victims {
			msgs := e.events(t, ns, "Pod", v, eviction.ReasonEvicted)
			if len(msgs) != 1 || !strings.HasPrefix(msgs[0], why) || !strings.HasSuffix(msgs[0], "; evicted "+frees) {
				missing = append(missing, fmt.Sprintf("pod %s: %q", v, msgs))
				continue
			}
			want := fmt.Sprintf("evicted %s/%s %s", ns, v, frees)
			if !slices.ContainsFunc(nodeMsgs, func(m string) bool { return strings.HasPrefix(m, why) && strings.HasSuffix(m, want) }) {
				missing = append(missing, fmt.Sprintf("node %s: no %q in %q", node, want, nodeMsgs))
			}
		}
		return len(missing) == 0
	})
	if !ok {
		t.Errorf("eviction Events missing or wrong: %v", missing)
		return
	}
	t.Logf("Events on %s: %q", node, e.events(t, metav1.NamespaceDefault, "Node", node, eviction.ReasonEvicted))
}

func (e *env) expectBlockedEvents(t *testing.T, ns, node string) {
	t.Helper()
	var podMsgs, nodeMsgs []string
	// Written asynchronously by the publisher's event broadcaster.
	if _, ok := framework.Poll(60*time.Second, time.Second, func() bool {
		podMsgs = append(e.events(t, ns, "Pod", "guarded-0", eviction.ReasonBlocked), e.events(t, ns, "Pod", "guarded-1", eviction.ReasonBlocked)...)
		nodeMsgs = e.events(t, metav1.NamespaceDefault, "Node", node, eviction.ReasonBlocked)
		return len(podMsgs) > 0 && len(nodeMsgs) > 0
	}); !ok {
		t.Errorf("refusals not reported by Events: pods %q, node %q", podMsgs, nodeMsgs)
		return
	}
	for _, m := range append(podMsgs, nodeMsgs...) {
		if !strings.Contains(m, "refused by a PodDisruptionBudget") {
			t.Errorf("refusal Event %q does not name the PodDisruptionBudget", m)
		}
	}
	t.Logf("refusal Events: pod %q; node %q", podMsgs[0], nodeMsgs[0])
}
