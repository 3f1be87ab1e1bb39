package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

// heartbeatWait bounds the wait for one kwok heartbeat (5 s plus up to 2.5 s
// of jitter) on a busy machine.
const heartbeatWait = 45 * time.Second

// webhookDown is how long the webhook stays down in testWebhookDown.
const webhookDown = 2 * time.Minute

func (e *env) testWebhookDown(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: keeps the webhook down for 2 minutes")
	}
	ctx := context.Background()
	t.Cleanup(func() { e.ensureStack(t) })
	failOpen0 := framework.APIServerMetric(t, e.c, "apiserver_admission_webhook_fail_open_count", "name", "node-status.kube-reclaim.io")
	if err := e.c.KillComponent(stack.Webhook); err != nil {
		t.Fatal(err)
	}
	down := time.Now()
	beats := map[string]int{}
	last := map[string]time.Time{}
	seen := map[string]time.Time{} // when a new heartbeat time was first seen
	maxGap := map[string]time.Duration{}
	mismatch := map[string]int{} // consecutive polls with status != annotation
	polls := 0
	for time.Since(down) < webhookDown {
		vs, err := views(ctx, e.c, e.nodes)
		if err != nil {
			t.Logf("listing nodes: %v", err)
			time.Sleep(2 * time.Second)
			continue
		}
		polls++
		now := time.Now()
		for _, n := range e.nodes {
			v := vs[n]
			if !v.Ready {
				t.Errorf("[%5.1fs] node %s not Ready while the webhook is down", now.Sub(down).Seconds(), n)
			}
			if v.Heartbeat.After(last[n]) {
				if !last[n].IsZero() {
					beats[n]++
					maxGap[n] = max(maxGap[n], now.Sub(seen[n]))
				}
				last[n], seen[n] = v.Heartbeat, now
			}
			// The publisher may have written the annotation and not yet the
			// status at the instant of a poll; two polls in a row may not.
			if !v.Fresh.Fresh || v.Ann.CPUMilli == 0 || !v.StatusMatchesAnnotation() {
				mismatch[n]++
				if mismatch[n] == 2 {
					t.Errorf("[%5.1fs] node %s: published values not intact in status: annotation %s, capacity %+v, allocatable %+v",
						now.Sub(down).Seconds(), n, v.Raw, v.Capacity, v.Allocatable)
				}
			} else {
				mismatch[n] = 0
			}
		}
		time.Sleep(2 * time.Second)
	}
	upAt := time.Now()
	for _, n := range e.nodes {
		maxGap[n] = max(maxGap[n], upAt.Sub(seen[n]))
	}
	writers := checkStatusWrites(t, e.c, down, upAt)
	failOpen := framework.APIServerMetric(t, e.c, "apiserver_admission_webhook_fail_open_count", "name", "node-status.kube-reclaim.io") - failOpen0
	minBeats, worstGap := int(^uint(0)>>1), time.Duration(0)
	for _, n := range e.nodes {
		minBeats = min(minBeats, beats[n])
		worstGap = max(worstGap, maxGap[n])
	}
	t.Logf("webhook down %s: %d polls; heartbeats per node %v (fewest %d), longest gap between heartbeats seen %s",
		webhookDown, polls, beats, minBeats, worstGap.Round(100*time.Millisecond))
	t.Logf("node status writes while down, by writer: %v; the apiserver failed open on %v webhook calls", writers, failOpen)
	// 5 s + up to 2.5 s of jitter: at least 16 heartbeats in 2 minutes; allow
	// a busy machine half of that.
	if minBeats < 8 {
		t.Errorf("a node heartbeated only %d times in %s with the webhook down", minBeats, webhookDown)
	}
	if worstGap > 30*time.Second {
		t.Errorf("a node went %s without a heartbeat while the webhook was down", worstGap.Round(time.Second))
	}
	if writers["kwok"] < len(e.nodes)*8 {
		t.Errorf("the audit log shows %d kwok status writes while down, want >= %d", writers["kwok"], len(e.nodes)*8)
	}
	if failOpen < 1 {
		t.Errorf("the apiserver never failed open on the webhook: was it really called and down? (fail_open_count +%v)", failOpen)
	}

	// Back up: the apiserver calls it again on the next heartbeats, and every
	// node converges to its annotation.
	if err := e.s.StartRole(ctx, stack.Webhook); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	since := map[string]time.Time{}
	for n, v := range mustViews(t, e) {
		since[n] = v.Heartbeat
	}
	var waiting []string
	took, ok := framework.Poll(2*heartbeatWait, time.Second, func() bool {
		vs, err := views(ctx, e.c, e.nodes)
		if err != nil {
			return false
		}
		waiting = waiting[:0]
		for _, n := range e.nodes {
			v := vs[n]
			if !v.Heartbeat.After(since[n]) || !v.Fresh.Fresh || !v.StatusMatchesAnnotation() || !v.Ready {
				waiting = append(waiting, n)
			}
		}
		return len(waiting) == 0
	})
	if !ok {
		t.Fatalf("not converged %s after the webhook came back: %v", took.Round(time.Second), waiting)
	}
	// The webhook counts a review after answering it: the count can trail
	// the heartbeat the poll above saw.
	var reviews float64
	framework.Poll(30*time.Second, 500*time.Millisecond, func() bool {
		reviews = framework.Scrape(t, e.s.HealthPort(stack.Webhook), "kube_reclaim_webhook_review_duration_seconds_count")
		return reviews >= float64(len(e.nodes))
	})
	errs := framework.Scrape(t, e.s.HealthPort(stack.Webhook), "kube_reclaim_webhook_errors_total")
	t.Logf("back up: every node heartbeated through the webhook with status equal to its annotation %s after the restart; %v reviews, %v errors",
		took.Round(100*time.Millisecond), reviews, errs)
	if reviews < float64(len(e.nodes)) {
		t.Errorf("the webhook answered %v reviews after coming back, want >= one per node (%d)", reviews, len(e.nodes))
	}
	if errs != 0 {
		t.Errorf("the webhook counted %v errors after coming back", errs)
	}
	checkStatusWrites(t, e.c, restarted, time.Now())
}

func mustViews(t *testing.T, e *env) map[string]framework.NodeView {
	t.Helper()
	vs, err := views(context.Background(), e.c, e.nodes)
	if err != nil {
		t.Fatal(err)
	}
	return vs
}

// waitZero waits until every node's annotation and status say zero, and
// returns when each got there (measured from start).
func (e *env) waitZero(t *testing.T, start time.Time, timeout time.Duration, annotationToo bool) map[string]time.Duration {
	t.Helper()
	at := map[string]time.Duration{}
	framework.Poll(timeout, 500*time.Millisecond, func() bool {
		vs, err := views(context.Background(), e.c, e.nodes)
		if err != nil {
			return false
		}
		for _, n := range e.nodes {
			v := vs[n]
			if _, done := at[n]; done {
				continue
			}
			zeroStatus := v.HasStatus && v.Capacity.IsZero() && v.Allocatable.IsZero()
			zeroAnn := v.Ann != nil && v.Ann.CPUMilli == 0 && v.Ann.MemoryBytes == 0
			if zeroStatus && (zeroAnn || !annotationToo) {
				at[n] = time.Since(start)
			}
		}
		return len(at) == len(e.nodes)
	})
	return at
}

func worstOf(m map[string]time.Duration) (string, time.Duration) {
	var node string
	var w time.Duration
	for n, d := range m {
		if d >= w {
			node, w = n, d
		}
	}
	return node, w
}

func (e *env) testMetricsServerDown(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: waits out --metrics-stale-after and metrics-server's recovery")
	}
	const ns = "metrics-down"
	e.useNamespace(t, ns)
	ctx := context.Background()
	// Eviction on, so that "nothing is evicted while the data is stale" is
	// the controller's choice and not the shipped dry-run's; testEviction
	// shows the same publisher evicting on fresh data.
	e.restartRole(t, stack.Publisher, "--eviction=on")

	// Reclaimed pods running before the outage: what they hold is the floor
	// of their nodes' status for as long as the room is zero.
	held := e.placeHeld(t, ns, 6, 2000, 2*gib)
	const victim = "held-0" // finishes during the outage: the positive control

	if err := e.c.StopComponent(cluster.MetricsServer); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	bound := metricsStaleAfter + 2*period
	zeroWait := bound + 30*time.Second
	pendingWindow := 20 * time.Second
	// The whole outage is watched, from the stop to the restart: the room
	// going to zero within its bound, then the pending pod's window, with
	// some slack. metrics-server restarts when the window ends.
	outage := framework.Absence{Window: bound + pendingWindow + 15*time.Second, Every: 2 * time.Second,
		// The control's floor shows after the publisher's pod informer and
		// next cycle; on a busy machine that can exceed three periods, and
		// the looks go on until it shows.
		ControlAt: bound + 5*time.Second, ControlWithin: 6*period + 30*time.Second,
		Control: func() error {
			return e.c.Client.CoreV1().Pods(ns).Delete(ctx, victim, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		}}
	outage.Look = e.floorLook(ctx, ns, held, victim, &outage)
	watched := make(chan framework.AbsenceReport, 1)
	go func() { watched <- outage.Observe(ctx) }()

	// The room goes to zero on every node, with the reason.
	zeroAt := map[string]time.Duration{}
	framework.Poll(zeroWait, 500*time.Millisecond, func() bool {
		vs, err := views(ctx, e.c, e.nodes)
		if err != nil {
			return false
		}
		for _, n := range e.nodes {
			if a := vs[n].Ann; a != nil && a.Room().IsZero() && a.ZeroReason != "" {
				if _, done := zeroAt[n]; !done {
					zeroAt[n] = time.Since(stopped)
				}
			}
		}
		return len(zeroAt) == len(e.nodes)
	})
	node, worst := worstOf(zeroAt)
	t.Logf("metrics-server stopped: every node's room was zero after at most %s (%s), bound --metrics-stale-after + 2 periods = %s",
		worst.Round(100*time.Millisecond), node, bound)
	if len(zeroAt) != len(e.nodes) {
		t.Errorf("only %d of %d nodes' room reached zero within %s", len(zeroAt), len(e.nodes), zeroWait)
	} else if worst > bound {
		t.Errorf("node %s's room reached zero %s after metrics-server stopped, want <= %s", node, worst.Round(100*time.Millisecond), bound)
	}
	for n, v := range mustViews(t, e) {
		if v.Ann == nil || v.Ann.ZeroReason != "metrics-stale" {
			t.Errorf("node %s: zero reason missing or not metrics-stale (%s)", n, v.Raw)
		}
	}

	// Meanwhile the extender admits no new reclaimed pod.
	framework.CreatePod(t, e.c, framework.ReclaimedPod(ns, "waits", 1000, gib))
	created := time.Now()
	e.expectNotBound(t, ns, "waits", pendingWindow)
	msg := framework.SchedulingMessage(e.c, ns, "waits")
	t.Logf("reclaimed pod still Pending %s after creation; scheduler says: %s", time.Since(created).Round(time.Second), msg)
	if !strings.Contains(msg, "reclaimed-cpu: need 1000m, free 0m") {
		t.Errorf("FailedScheduling does not carry the extender's reason: %q", msg)
	}

	if late := time.Since(stopped) - outage.Window; late > 0 {
		t.Errorf("the outage outlived its watch by %s: the room took too long to reach zero", late.Round(time.Second))
	}
	r := <-watched
	if err := r.Err(outage); err != nil {
		t.Errorf("during the outage: %v", err)
	}
	t.Logf("outage watched for %s at %d looks (longest gap %s): status never below what pods held, at the annotated held once the room was zero, no reclaimed pod lost; %s finished %.1fs in and its node's floor followed %.1fs later",
		r.Observed.Round(time.Second), r.Looks, r.MaxGap.Round(100*time.Millisecond), victim, r.ControlRan.Seconds(), (r.ControlSeen - r.ControlRan).Seconds())

	// Recovery.
	if err := e.c.StartComponent(cluster.MetricsServer); err != nil {
		t.Fatal(err)
	}
	var notBack []string
	back, ok := framework.Poll(3*time.Minute, time.Second, func() bool {
		notBack = notBack[:0]
		for n, v := range mustViews(t, e) {
			if !v.Fresh.Fresh || v.Ann.ZeroReason != "" || v.Ann.CPUMilli == 0 || !v.StatusMatchesAnnotation() {
				notBack = append(notBack, n)
			}
		}
		return len(notBack) == 0
	})
	if !ok {
		t.Fatalf("nodes %v not published again %s after metrics-server came back", notBack, back.Round(time.Second))
	}
	took, ok := framework.Poll(90*time.Second, time.Second, func() bool {
		_, bound := framework.MustPods(t, e.c, ns).BoundTo["waits"]
		return bound
	})
	if !ok {
		t.Fatalf("the reclaimed pod was not scheduled %s after the values came back: %s", took.Round(time.Second), framework.SchedulingMessage(e.c, ns, "waits"))
	}
	t.Logf("metrics-server back: every node published again after %s, the waiting pod was placed %s later",
		back.Round(100*time.Millisecond), took.Round(100*time.Millisecond))
}

// placeHeld creates n reclaimed pods held-0 ... of cpuMilli/memBytes, waits
// until all are bound and every node's annotation says what its pods hold
// with the status at the floor, and returns where each pod is.
func (e *env) placeHeld(t *testing.T, ns string, n int, cpuMilli, memBytes int64) map[string]string {
	t.Helper()
	pods := make([]*corev1.Pod, n)
	for i := range pods {
		pods[i] = framework.ReclaimedPod(ns, fmt.Sprintf("held-%d", i), cpuMilli, memBytes)
	}
	framework.CreatePods(t, e.c, pods)
	var st framework.PodState
	var waiting []string
	took, ok := framework.Poll(2*time.Minute, time.Second, func() bool {
		st = framework.MustPods(t, e.c, ns)
		if st.BoundWithPrefix("held-") != n {
			waiting = append(waiting[:0], "pods pending: "+strings.Join(st.Pending, " "))
			return false
		}
		waiting = waiting[:0]
		for nd, v := range mustViews(t, e) {
			if v.Ann == nil || v.Ann.HeldOrZero() != st.Bookings[nd] || !v.StatusMatchesAnnotation() {
				waiting = append(waiting, fmt.Sprintf("%s (bookings %+v, annotation %s, capacity %+v)", nd, st.Bookings[nd], v.Raw, v.Capacity))
			}
		}
		return len(waiting) == 0
	})
	if !ok {
		t.Fatalf("after %s: %v", took.Round(time.Second), waiting)
	}
	placed := map[string]string{}
	for p, nd := range st.BoundTo {
		if strings.HasPrefix(p, "held-") {
			placed[p] = nd
		}
	}
	t.Logf("%d reclaimed pods placed and held in every annotation after %s: %v", n, took.Round(100*time.Millisecond), placed)
	return placed
}

// floorLook is the look of an outage: on every node, capacity and
// allocatable never below what the live reclaimed pods bound to it request;
// once its room is zero, at the held its annotation states (two looks in a
// row may not miss it: the publisher writes the annotation, then the
// status); every pod of placed still bound where it was, except victim once
// the control deleted it; and "waits" never bound. The control is seen when
// victim is gone and its node's annotation and status both came down to what
// the remaining pods hold.
func (e *env) floorLook(ctx context.Context, ns string, placed map[string]string, victim string, a *framework.Absence) func(time.Duration) ([]string, bool) {
	off := map[string]int{}
	victimNode := placed[victim]
	deleted := false
	control := a.Control
	a.Control = func() error { deleted = true; return control() }
	below := func(x, y reclaimable.Resources) bool { return x.CPUMilli < y.CPUMilli || x.MemoryBytes < y.MemoryBytes }
	return func(time.Duration) ([]string, bool) {
		vs, err := views(ctx, e.c, e.nodes)
		if err != nil {
			return []string{"reading nodes: " + err.Error()}, false
		}
		st, err := framework.Pods(ctx, e.c, ns)
		if err != nil {
			return []string{"reading pods: " + err.Error()}, false
		}
		var v []string
		for _, n := range e.nodes {
			nv, heldNow := vs[n], st.Bookings[n]
			if !nv.HasStatus || below(nv.Capacity, heldNow) || below(nv.Allocatable, heldNow) {
				v = append(v, fmt.Sprintf("node %s: status capacity %+v allocatable %+v below what its pods hold %+v", n, nv.Capacity, nv.Allocatable, heldNow))
			}
			if nv.Ann != nil && nv.Ann.Room().IsZero() && (nv.Capacity != nv.Ann.HeldOrZero() || nv.Allocatable != nv.Ann.HeldOrZero()) {
				if off[n]++; off[n] >= 2 {
					v = append(v, fmt.Sprintf("node %s: room zero but status capacity %+v allocatable %+v, not the held %+v of its annotation",
						n, nv.Capacity, nv.Allocatable, nv.Ann.HeldOrZero()))
				}
			} else {
				off[n] = 0
			}
		}
		for p, n := range placed {
			if p == victim && deleted {
				continue
			}
			if got, ok := st.BoundTo[p]; !ok || got != n {
				v = append(v, fmt.Sprintf("reclaimed pod %s gone, finished or moved (was on %s)", p, n))
			}
		}
		if n, ok := st.BoundTo["waits"]; ok {
			v = append(v, "new reclaimed pod waits bound to "+n+" during the outage")
		}
		nv := vs[victimNode]
		_, victimThere := st.BoundTo[victim]
		seen := deleted && !victimThere && nv.Ann != nil && nv.Ann.HeldOrZero() == st.Bookings[victimNode] &&
			nv.Capacity == nv.Ann.Room().Max(st.Bookings[victimNode]) && nv.Allocatable == nv.Capacity
		return v, seen
	}
}

// expectNotBound looks every 2 seconds for window that pod stays unbound. Its
// positive control is a regular pod created at the start of the window,
// which the scheduler places without the extender: the same looks must see
// it bound, or they would not have seen a bind of pod either.
func (e *env) expectNotBound(t *testing.T, ns, pod string, window time.Duration) {
	t.Helper()
	control := "control-" + pod
	r := framework.ExpectAbsence(t, framework.Absence{Window: window, Every: 2 * time.Second,
		// A window can be as short as 5s, less than a scheduling cycle may
		// take on a busy machine: the looks go on until the control is bound.
		ControlWithin: max(window, 30*time.Second),
		Control: func() error {
			_, err := e.c.Client.CoreV1().Pods(ns).Create(context.Background(), framework.RegularPod(ns, control, "", "100m", "128Mi"), metav1.CreateOptions{})
			return err
		},
		Look: func(time.Duration) ([]string, bool) {
			st := framework.MustPods(t, e.c, ns)
			var v []string
			if n, bound := st.BoundTo[pod]; bound {
				v = append(v, fmt.Sprintf("pod %s bound to %s", pod, n))
			}
			_, seen := st.BoundTo[control]
			return v, seen
		}})
	t.Logf("pod %s unbound at %d looks over %s; the control pod %s bound %.1fs into the window",
		pod, r.Looks, window.Round(time.Second), control, r.ControlSeen.Seconds())
}

func leaseHolder(ctx context.Context, e *env) string {
	l, err := e.c.Client.CoordinationV1().Leases("kube-reclaim").Get(ctx, "kube-reclaim-publisher", metav1.GetOptions{})
	if err != nil {
		return ""
	}
	return holder(l)
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func (e *env) testPublisherFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: waits out a lease and --stale-after")
	}
	ctx := context.Background()
	const ns = "failover"
	const second = "publisher-b"
	const shortStaleAfter = time.Minute
	e.useNamespace(t, ns)
	t.Cleanup(func() {
		if p := e.c.Process(second); p != nil {
			_ = p.Stop()
		}
	})
	if refreshInterval >= shortStaleAfter {
		t.Fatalf("the publisher's --refresh-interval (%s) must be below the readers' --stale-after (%s)", refreshInterval, shortStaleAfter)
	}

	// A second replica, configured like the first.
	port, serving, err := stack.ServingFlags(e.c)
	if err != nil {
		t.Fatal(err)
	}
	args := append(append(append([]string(nil), e.s.Args(stack.Publisher)...), serving...), "--leader-elect-identity="+second)
	if err := e.c.StartProcess(second, e.s.Bin, args...); err != nil {
		t.Fatal(err)
	}
	if _, ok := framework.Poll(90*time.Second, 500*time.Millisecond, func() bool {
		ok, _ := framework.ScrapeErr(port, "kube_reclaim_publisher_is_leader")
		return ok == 0 && e.c.Process(second).Running() && framework.Ready(port)
	}); !ok {
		t.Fatalf("%s not ready as a standby:\n%s", second, e.c.Process(second).Tail(3000))
	}
	first := leaseHolder(ctx, e)
	if first == "" || first == second {
		t.Fatalf("lease held by %q, want the stack's publisher", first)
	}
	if framework.Scrape(t, e.s.HealthPort(stack.Publisher), "kube_reclaim_publisher_is_leader") != 1 {
		t.Fatal("the stack's publisher does not lead")
	}

	// The leader is killed: the standby takes over within the lease duration.
	// A candidate only sees a lease expire leaseDuration after it last saw it
	// change, and tries every retryPeriod x [1, 2.2) (client-go's jitter).
	if err := e.c.KillComponent(stack.Publisher); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	takeoverBound := leaseDuration + 2*time.Duration(2.2*float64(retryPeriod))
	took, ok := framework.Poll(2*takeoverBound, 200*time.Millisecond, func() bool { return leaseHolder(ctx, e) == second })
	if !ok {
		t.Fatalf("%s never took the lease (holder %q)", second, leaseHolder(ctx, e))
	}
	t.Logf("%s took over %s after the leader was killed (lease %s, retry %s, bound %s)", second, took.Round(100*time.Millisecond),
		leaseDuration, retryPeriod, takeoverBound)
	if took > takeoverBound {
		t.Errorf("takeover took %s, want <= %s (lease duration plus two jittered retries)", took.Round(100*time.Millisecond), takeoverBound)
	}
	// The new leader publishes: its refresh rewrites every annotation within
	// the refresh interval.
	var stale []string
	wrote, ok := framework.Poll(refreshInterval+3*period+10*time.Second, time.Second, func() bool {
		stale = stale[:0]
		for n, v := range mustViews(t, e) {
			if v.Ann == nil || !v.Ann.WriteTime.After(killed) || !v.StatusMatchesAnnotation() {
				stale = append(stale, n)
			}
		}
		return len(stale) == 0
	})
	if !ok {
		t.Fatalf("the new leader did not rewrite %v", stale)
	}
	t.Logf("the new leader rewrote every annotation %s after the takeover; it made %v annotation writes", wrote.Round(100*time.Millisecond),
		framework.Scrape(t, port, "kube_reclaim_publisher_writes_total", "kind", "annotation"))

	// Readers with a short --stale-after, then both publishers down for longer.
	e.restartRole(t, stack.Webhook, "--stale-after="+shortStaleAfter.String())
	e.restartRole(t, stack.Extender, "--stale-after="+shortStaleAfter.String())
	e.waitPublished(t, 2*time.Minute) // a publisher cycle and the webhook on a heartbeat, on a busy machine
	if err := e.c.KillComponent(second); err != nil {
		t.Fatal(err)
	}
	bothDown := time.Now()
	// The lease lapses after two lease durations, the annotations after
	// --stale-after: the first of the two turns every node to zero at its
	// next heartbeat.
	zeroBound := min(2*leaseDuration, shortStaleAfter) + heartbeatWait
	zeroAt := e.waitZero(t, bothDown, zeroBound, false)
	node, worst := worstOf(zeroAt)
	t.Logf("both publishers down: every node's status was zero after at most %s (%s); lease lapse %s, --stale-after %s",
		worst.Round(100*time.Millisecond), node, 2*leaseDuration, shortStaleAfter)
	if len(zeroAt) != len(e.nodes) {
		t.Errorf("only %d of %d nodes zero in status within %s", len(zeroAt), len(e.nodes), zeroBound)
	}
	framework.CreatePod(t, e.c, framework.ReclaimedPod(ns, "waits", 500, gib/2))

	// Down longer than --stale-after: the next heartbeat of every node still
	// injects zero, and the extender still admits nothing.
	e.expectNotBound(t, ns, "waits", max(shortStaleAfter+5*time.Second-time.Since(bothDown), 5*time.Second))
	stale0 := framework.Scrape(t, e.s.HealthPort(stack.Webhook), "kube_reclaim_webhook_stale_injections_total")
	before := mustViews(t, e)
	var notZero []string
	beat, ok := framework.Poll(heartbeatWait, 500*time.Millisecond, func() bool {
		notZero = notZero[:0]
		pending := 0
		for n, v := range mustViews(t, e) {
			if !v.Heartbeat.After(before[n].Heartbeat) {
				pending++
				continue
			}
			if !v.HasStatus || !v.Capacity.IsZero() || !v.Allocatable.IsZero() {
				notZero = append(notZero, fmt.Sprintf("%s capacity %+v allocatable %+v", n, v.Capacity, v.Allocatable))
			}
		}
		return pending == 0
	})
	if !ok {
		t.Errorf("not every node heartbeated within %s", heartbeatWait)
	}
	if len(notZero) > 0 {
		t.Errorf("after %s with both publishers down, heartbeats kept reclaimed values: %v", time.Since(bothDown).Round(time.Second), notZero)
	}
	staleInjected := framework.Scrape(t, e.s.HealthPort(stack.Webhook), "kube_reclaim_webhook_stale_injections_total") - stale0
	if staleInjected < float64(len(e.nodes)) {
		t.Errorf("the webhook counted %v stale injections over one heartbeat of every node, want >= %d", staleInjected, len(e.nodes))
	}
	st := framework.MustPods(t, e.c, ns)
	msg := framework.SchedulingMessage(e.c, ns, "waits")
	t.Logf("%s after both publishers went down: next heartbeats (%s) injected zero on every node (%v stale injections: too-old %v, lease-expired %v); reclaimed pod Pending: %s",
		time.Since(bothDown).Round(time.Second), beat.Round(100*time.Millisecond), staleInjected,
		framework.Scrape(t, e.s.HealthPort(stack.Webhook), "kube_reclaim_webhook_stale_injections_total", "reason", reclaimable.ReasonWriteTooOld),
		framework.Scrape(t, e.s.HealthPort(stack.Webhook), "kube_reclaim_webhook_stale_injections_total", "reason", reclaimable.ReasonPublisherDown), msg)
	if n, bound := st.BoundTo["waits"]; bound {
		t.Errorf("the extender admitted a reclaimed pod with both publishers down: bound to %s", n)
	}
	if !strings.Contains(msg, reclaimable.ReasonWriteTooOld) && !strings.Contains(msg, reclaimable.ReasonPublisherDown) {
		t.Errorf("FailedScheduling does not say the published values are stale: %q", msg)
	}
	extStale := framework.Scrape(t, e.s.HealthPort(stack.Extender), "kube_reclaim_extender_filtered_nodes_total", "reason", reclaimable.ReasonWriteTooOld) +
		framework.Scrape(t, e.s.HealthPort(stack.Extender), "kube_reclaim_extender_filtered_nodes_total", "reason", reclaimable.ReasonPublisherDown)
	if extStale < float64(len(e.nodes)) {
		t.Errorf("the extender filtered %v nodes as stale, want >= %d", extStale, len(e.nodes))
	}

	// Recovery: the readers as deployed, a publisher again.
	recover := time.Now()
	e.ensureStack(t)
	e.waitPublished(t, 2*time.Minute)
	took, ok = framework.Poll(90*time.Second, time.Second, func() bool {
		_, bound := framework.MustPods(t, e.c, ns).BoundTo["waits"]
		return bound
	})
	if !ok {
		t.Fatalf("the reclaimed pod was not scheduled after the publisher came back: %s", framework.SchedulingMessage(e.c, ns, "waits"))
	}
	t.Logf("publisher back: every node fresh again and the waiting pod placed %s after the restart (placed %s after publication)",
		time.Since(recover).Round(100*time.Millisecond), took.Round(100*time.Millisecond))
}

func (e *env) testExtenderDown(t *testing.T) {
	const ns = "extender-down"
	e.useNamespace(t, ns)
	e.waitPublished(t, 2*time.Minute)
	if err := e.c.KillComponent(stack.Extender); err != nil {
		t.Fatal(err)
	}
	var pods []*corev1.Pod
	for i := 0; i < 10; i++ {
		pods = append(pods, framework.ReclaimedPod(ns, fmt.Sprintf("batch-%d", i), 1000, gib))
	}
	for i := 0; i < 5; i++ {
		p := framework.RegularPod(ns, fmt.Sprintf("web-%d", i), "", "100m", "128Mi")
		pods = append(pods, p)
	}
	// For 30s, looked at every 2 seconds, no reclaimed pod binds; the regular
	// pods created with them are the control: the scheduler places them
	// without the extender, and the same looks must see them bound.
	r := framework.ExpectAbsence(t, framework.Absence{Window: 30 * time.Second, Every: 2 * time.Second,
		Control: func() error {
			framework.CreatePods(t, e.c, pods)
			return nil
		},
		Look: func(time.Duration) ([]string, bool) {
			st := framework.MustPods(t, e.c, ns)
			var v []string
			for p, n := range st.BoundTo {
				if strings.HasPrefix(p, "batch-") {
					v = append(v, fmt.Sprintf("reclaimed pod %s bound to %s with the extender down", p, n))
				}
			}
			return v, st.BoundWithPrefix("web-") == 5
		}})
	msg := framework.SchedulingMessage(e.c, ns, "batch-0")
	t.Logf("extender down: regular pods all scheduled %s after creation; 10 reclaimed pods still Pending at %d looks over 30s; scheduler says: %s",
		(r.ControlSeen - r.ControlRan).Round(100*time.Millisecond), r.Looks, msg)
	if t.Failed() {
		t.FailNow()
	}

	if err := e.s.StartRole(context.Background(), stack.Extender); err != nil {
		t.Fatal(err)
	}
	took, ok := framework.Poll(2*time.Minute, 500*time.Millisecond, func() bool { return len(framework.MustPods(t, e.c, ns).BoundTo) == 15 })
	st := framework.MustPods(t, e.c, ns)
	if !ok {
		t.Fatalf("only %d of 15 pods bound %s after the extender came back; pending %v: %s", len(st.BoundTo), took.Round(time.Second),
			st.Pending, framework.SchedulingMessage(e.c, ns, st.Pending[0]))
	}
	vs := mustViews(t, e)
	perNode := map[string]int{}
	for p, n := range st.BoundTo {
		if strings.HasPrefix(p, "batch-") {
			perNode[n]++
		}
	}
	for n, b := range st.Bookings {
		pub := vs[n].Published()
		if b.CPUMilli > pub.CPUMilli || b.MemoryBytes > pub.MemoryBytes {
			t.Errorf("node %s over-booked: %dm/%s bound, %dm/%s published", n, b.CPUMilli, mib(b.MemoryBytes), pub.CPUMilli, mib(pub.MemoryBytes))
		}
	}
	keys := make([]string, 0, len(perNode))
	for n := range perNode {
		keys = append(keys, n)
	}
	sort.Strings(keys)
	var spread []string
	for _, n := range keys {
		spread = append(spread, fmt.Sprintf("%s:%d", n, perNode[n]))
	}
	t.Logf("extender back: the 10 pending reclaimed pods were placed %s after it was ready (%s); no node over-booked",
		took.Round(100*time.Millisecond), strings.Join(spread, " "))
}
