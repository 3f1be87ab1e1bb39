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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kube-reclaim/kube-reclaim/eviction"
	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

const (
	// evictionGrace is the publisher's default grace: two periods.
	evictionGrace = 2 * period
	// evictPod is what each batch pod of testEviction requests.
	evictPodCPU = 1000
	evictPodMem = gib / 2
	// evictRoomCPU is the room testEviction raises usage to leave on both
	// nodes: with four pods of 1000m (4000m held) three must go, whatever
	// the few millicores of metrics-server's rate jitter; of the two
	// guarded pods, one.
	evictRoomCPU = 1500
)

// evictionOrder is the order the shedding node's batch pods must go in:
// lowest priority first, then the youngest.
var evictionOrder = []string{"low-young", "low-old", "high-young", "high-old"}

func sorted(s []string) []string {
	out := slices.Clone(s)
	sort.Strings(out)
	return out
}

// testEviction: usage rises under reclaimed pods on two nodes. On the first,
// the publisher (--eviction=on) evicts, within the grace plus two periods of
// the lowered room being published, exactly the batch pods that bring what
// is held within the room, lowest priority first then the youngest, each
// with an Event on the pod and on the node; nothing else. On the second, a
// PodDisruptionBudget covers the batch pods: the refusals are reported
// (metric, Events), made at most once per period, and the pods stay until
// the budget goes.
func (e *env) testEviction(t *testing.T) {
	ctx := context.Background()
	const ns = "evict"
	e.useNamespace(t, ns)
	shed, guarded := 0, 1 // node indexes
	shedNode, guardedNode := e.nodes[shed], e.nodes[guarded]
	t.Cleanup(func() { e.setUsage(t, func(int) usage { return defaultUsage }) })
	e.restartRole(t, stack.Publisher, "--eviction=on")
	pub := e.s.HealthPort(stack.Publisher)

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
	if l, err := e.c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{}); err == nil {
		var order []string
		for _, p := range l.Items {
			prio := "none"
			if p.Spec.Priority != nil {
				prio = fmt.Sprint(*p.Spec.Priority)
			}
			order = append(order, fmt.Sprintf("%s (priority %s, created %s)", p.Name, prio, p.CreationTimestamp.Format(time.TimeOnly)))
		}
		t.Logf("batch pods: %s", strings.Join(order, ", "))
	}

	// Before the rise every node's room covers what its pods hold. The rise
	// is calibrated on the room published now rather than on the formula,
	// so that it leaves evictRoomCPU whatever else the policy counts.
	heldCPU := int64(len(evictionOrder) * evictPodCPU)
	pre := map[int]int64{}
	for _, i := range []int{shed, guarded} {
		var v framework.NodeView
		if _, ok := framework.Poll(2*time.Minute, time.Second, func() bool {
			v = framework.View(t, e.c, e.nodes[i], staleAfter)
			// Measured: just after the publisher's restart the service pod
			// counts at its request until its samples are in the history.
			return v.Fresh.Fresh && v.Ann.ZeroReason == "" && v.Ann.CPUMilli >= heldCPU+evictPodCPU && unmeasured(v.Ann.Explanation) == 0
		}); !ok {
			t.Fatalf("the room on %s (%s) does not cover the %dm the batch pods hold before the rise", e.nodes[i], v.Raw, heldCPU)
		}
		pre[i] = v.Ann.CPUMilli
	}
	blocked0 := framework.Scrape(t, pub, "kube_reclaim_publisher_evictions_blocked_total")
	for _, i := range []int{shed, guarded} {
		target := int64(evictRoomCPU)
		if i == guarded {
			target = -evictPodCPU // no room at all: both guarded pods would have to go
		}
		u := usage{cpu: defaultUsage.cpu + pre[i] - target, mem: defaultUsage.mem}
		if err := e.setNodeUsage(i, u); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: room %dm before the rise; service usage raised to %s", e.nodes[i], pre[i], u)
	}
	rise := time.Now()

	// The room comes down over a few scrapes (metrics-server's CPU is a
	// rate); the controller may evict on the way down, as it should. The
	// room has settled once it has stayed within metrics-server's jitter
	// for three periods; the bound counts from when it reached that level.
	var trajectory []string
	var level int64 = -1
	var levelSince, fitSince time.Time
	var victims []string
	var room, held int64
	// One look: the room's level, and whether what stays (pods not being
	// deleted) fits the room, with when that started.
	look := func() (settled, fits bool) {
		v := framework.View(t, e.c, shedNode, staleAfter)
		if !v.Fresh.Fresh || v.Ann.ZeroReason != "" {
			return false, false
		}
		room = v.Ann.CPUMilli
		if level < 0 || room < level-cpuRateTol || room > level+cpuRateTol {
			level, levelSince = room, time.Now()
			trajectory = append(trajectory, fmt.Sprintf("%dm at %s (%s)", room, time.Since(rise).Round(100*time.Millisecond), terms(v.Ann.Explanation)))
		}
		victims = e.leavingPods(t, ns)
		held = framework.MustPods(t, e.c, ns).Bookings[shedNode].CPUMilli
		fits = len(victims) > 0 && held <= room
		switch {
		case !fits:
			fitSince = time.Time{}
		case fitSince.IsZero():
			fitSince = time.Now()
		}
		return level < heldCPU && time.Since(levelSince) >= 3*period, fits
	}
	if _, ok := framework.Poll(3*time.Minute, 250*time.Millisecond, func() bool { s, _ := look(); return s }); !ok {
		t.Fatalf("the room on %s did not settle below the %dm held: %v", shedNode, heldCPU, trajectory)
	}
	t.Logf("room on %s after the rise: %s", shedNode, strings.Join(trajectory, "; "))

	// Evicted: what the Eviction API marked for deletion (or already gone),
	// until what stays fits the room published.
	_, ok := framework.Poll(evictionGrace+2*period+30*time.Second, 250*time.Millisecond, func() bool { _, f := look(); return f })
	bound := evictionGrace + 2*period
	took := max(fitSince.Sub(levelSince), 0)
	switch {
	case !ok:
		t.Fatalf("%s after the room settled at %dm, evicted %v; %s holds %dm, room %dm", time.Since(levelSince).Round(100*time.Millisecond), level, victims, shedNode, held, room)
	case took > bound:
		t.Errorf("what is held fit the room %s after the room reached %dm, want within the grace plus two periods (%s)", took.Round(100*time.Millisecond), level, bound)
	}
	t.Logf("evicted %v; %s holds %dm, room %dm, %s after the room reached %dm (bound %s)", victims, shedNode, held, room, took.Round(100*time.Millisecond), level, bound)
	// Lowest priority first, then the youngest: the victims are the first
	// of evictionOrder. The fewest: as many as the room the controller
	// acted on (the one its Events report) requires.
	if want := sorted(evictionOrder[:min(len(victims), len(evictionOrder))]); !slices.Equal(victims, want) {
		t.Errorf("evicted %v, want the first %d of %v", victims, len(victims), evictionOrder)
	}
	actedOn := e.expectEvictionEvents(t, ns, shedNode, victims)
	if need := int((heldCPU - actedOn + evictPodCPU - 1) / evictPodCPU); len(victims) != need {
		t.Errorf("evicted %d pods; at the %dm room the Events report, %d were needed", len(victims), actedOn, need)
	}
	wantVictims := victims

	// The guarded node: refused, reported, not retried in a hot loop.
	if _, ok := framework.Poll(evictionGrace+2*period+30*time.Second, time.Second, func() bool {
		return framework.Scrape(t, pub, "kube_reclaim_publisher_evictions_blocked_total") > blocked0
	}); !ok {
		t.Fatalf("no eviction on %s refused by the PodDisruptionBudget was counted", guardedNode)
	}
	refusedAt := time.Now()
	blocked1 := framework.Scrape(t, pub, "kube_reclaim_publisher_evictions_blocked_total")

	// From here on nothing more may leave: neither the pod that fits the
	// room, nor a regular pod, nor the guarded pods while their budget
	// stands. The positive control deletes the budget: the same look must
	// then see the guarded pods evicted.
	var budgetGone bool
	window := 6 * period
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
			// No room: both guarded pods go once the budget allows it.
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

func ptr[T any](v T) *T { return &v }

// unmeasured is the CPU the policy counted for regular pods without samples.
func unmeasured(x *reclaimable.Explanation) int64 {
	if x == nil {
		return -1
	}
	for _, t := range x.CPU.Terms {
		if t.Name == policy.TermUnmeasuredRequests {
			return t.Value
		}
	}
	return 0
}

// terms renders the CPU terms of an annotation's explanation.
func terms(x *reclaimable.Explanation) string {
	if x == nil {
		return "no explanation"
	}
	var out []string
	for _, t := range x.CPU.Terms {
		out = append(out, fmt.Sprintf("%s %s %d", t.Name, t.Op, t.Value))
	}
	return strings.Join(out, ", ")
}

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
// one naming it, both saying what the node held beyond its room, and
// returns the lowest room they report.
func (e *env) expectEvictionEvents(t *testing.T, ns, node string, victims []string) int64 {
	t.Helper()
	var missing []string
	rooms := []int64{}
	// The publisher's event broadcaster writes Events asynchronously,
	// later on a busy machine.
	_, ok := framework.Poll(60*time.Second, time.Second, func() bool {
		missing, rooms = missing[:0], rooms[:0]
		nodeMsgs := e.events(t, metav1.NamespaceDefault, "Node", node, eviction.ReasonEvicted)
		for _, v := range victims {
			msgs := e.events(t, ns, "Pod", v, eviction.ReasonEvicted)
			var room, held int64
			if len(msgs) == 1 {
				_, _ = fmt.Sscanf(msgs[0], "room %dm cpu, held %dm;", &room, &held)
			}
			if len(msgs) != 1 || held == 0 || !strings.HasSuffix(msgs[0], fmt.Sprintf("; evicted to free %dm", evictPodCPU)) {
				missing = append(missing, fmt.Sprintf("pod %s: %q", v, msgs))
				continue
			}
			rooms = append(rooms, room)
			want := fmt.Sprintf("evicted %s/%s to free %dm", ns, v, evictPodCPU)
			if !slices.ContainsFunc(nodeMsgs, func(m string) bool { return strings.HasSuffix(m, want) }) {
				missing = append(missing, fmt.Sprintf("node %s: no %q in %q", node, want, nodeMsgs))
			}
		}
		return len(missing) == 0
	})
	if !ok || len(rooms) == 0 {
		t.Errorf("eviction Events missing or wrong: %v", missing)
		return 0
	}
	t.Logf("Events on %s: %q", node, e.events(t, metav1.NamespaceDefault, "Node", node, eviction.ReasonEvicted))
	return slices.Min(rooms)
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
