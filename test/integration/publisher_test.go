package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

const (
	pubPeriod       = 5 * time.Second
	pubMetricsStale = 30 * time.Second
	// The defaults: shorter renew deadlines lose the lease on a busy 2-core machine.
	pubLease = 15 * time.Second
	pubRenew = 10 * time.Second
	pubRetry = 2 * time.Second
)

// The policy in force: margins of 35 %, the maximum over one minute.
const pubPolicy = `default:
  policy: usage
  window: 1m
  peak: max
  cpu: {margin: 0.35, maxRatio: 1, minimum: 100}
  memory: {margin: 0.35, maxRatio: 1, minimum: 134217728}
pools:
- name: tight
  nodeSelector: {kube-reclaim.io/pool: tight}
  cpu: {margin: 0.5}
`

// expectedUsagePolicy is the usage policy's formula written out for a node
// whose regular work uses cpuMilli/memBytes (pods, set by the test) on top of
// the kwok node baseline: allocatable x (1 - margin) - regular usage.
func expectedUsagePolicy(allocCPU, allocMem int64, margin float64, cpuMilli, memBytes int64) (int64, int64) {
	cpu := int64(float64(allocCPU)*(1-margin)) - cpuMilli - cluster.NodeBaselineCPUMilli
	mem := int64(float64(allocMem)*(1-margin)) - memBytes - cluster.NodeBaselineMemoryBytes
	return cpu, mem
}

func TestPublisher(t *testing.T) {
	ctx := context.Background()
	// Node 1 is later in pool "tight". Node 2's reclaimed pod, granted 1 core /
	// 1 GiB and using 900m / 768 MiB, must not count against the node (usage
	// beyond its grant would: kubelet caps it there).
	c, nodes := usedNodes{nodePrefix: "pub", grantCPU: "1000", grantMem: "1Gi", useCPU: "900m", useMem: "768Mi"}.
		start(t, cluster.Options{MetricResolution: 10 * time.Second, AuditPolicy: framework.NodeWritesAuditPolicy})
	framework.CreateNamespace(t, c, "kube-reclaim")
	const allocCPU, allocMem = usedNodeCPU, usedNodeMem
	cfgDir := t.TempDir()
	cfgFile := filepath.Join(cfgDir, "policy.yaml")
	if err := os.WriteFile(cfgFile, []byte(pubPolicy), 0o644); err != nil {
		t.Fatal(err)
	}
	pubArgs := func(id string) []string {
		return []string{"--config=" + cfgFile, "--config-reload-interval=1s", "--period=" + pubPeriod.String(),
			"--metrics-stale-after=" + pubMetricsStale.String(), "--refresh-interval=2m",
			"--leader-elect-lease-duration=" + pubLease.String(), "--leader-elect-renew-deadline=" + pubRenew.String(),
			"--leader-elect-retry-period=" + pubRetry.String(), "--leader-elect-identity=" + id}
	}
	pubA := framework.StartRole(t, c, "publisher-a", "publisher", pubArgs("publisher-a")...)

	type want struct{ cpu, mem int64 }
	expect := map[string]want{}
	for i, usage := range regularUsage {
		cpu, mem := expectedUsagePolicy(allocCPU, allocMem, 0.35, usage[0], usage[1])
		expect[nodes[i]] = want{cpu, mem}
	}
	// CPU comes from counters sampled by metrics-server: allow a few
	// millicores of rate noise. Memory is a gauge: allow a MiB.
	near := func(got, want, tol int64) bool { return got >= want-tol && got <= want+tol }
	// steadyCPUTol is for every check after the first convergence: a noisy
	// rate sample stays in the policy's 1m maximum for a minute, and on a
	// busy machine one was seen 84m above the usage set (the rate's error
	// grows with the rate). A policy or usage change the checks look for
	// moves the value by thousands.
	const steadyCPUTol = 20 + allocCPU/100
	// annotated reports whether the annotation is the formula's value (cpu
	// within cpuTol) and status stands for it.
	annotated := func(node string, w want, cpuTol int64) (bool, bool, string) {
		v := view(t, c, node)
		if v.Ann == nil {
			return false, false, "no annotation"
		}
		desc := fmt.Sprintf("annotation cpu=%d mem=%d, capacity %+v, allocatable %+v, want cpu=%d mem=%d",
			v.Ann.CPUMilli, v.Ann.MemoryBytes, v.Capacity, v.Allocatable, w.cpu, w.mem)
		return near(v.Ann.CPUMilli, w.cpu, cpuTol) && near(v.Ann.MemoryBytes, w.mem, 1<<20), v.StatusMatchesAnnotation(), desc
	}
	matches := func(node string, w want) (bool, string) {
		ann, status, desc := annotated(node, w, 20)
		return ann && status, desc
	}
	// publisherWrites counts the publisher's completed writes to each node
	// from the audit log: every one must be a patch of nodes/status (the
	// annotation travels in it), anything else is listed in outside.
	type writes struct {
		status  map[string]int
		outside []string
	}
	publisherWrites := func(from, to time.Time) writes {
		w := writes{status: map[string]int{}}
		for _, e := range framework.NodeWrites(t, c, from, to) {
			if !strings.HasPrefix(e.UserAgent, "kube-reclaim-publisher") {
				continue
			}
			if e.ObjectRef.Subresource == "status" {
				w.status[e.ObjectRef.Name]++
			} else {
				w.outside = append(w.outside, fmt.Sprintf("%s nodes/%s", e.Verb, e.ObjectRef.Name))
			}
		}
		return w
	}

	t.Run("published values match the usage formula and land equal in capacity and allocatable", func(t *testing.T) {
		for _, n := range nodes {
			var desc string
			took, ok := framework.Poll(3*time.Minute, time.Second, func() bool {
				var ok bool
				ok, desc = matches(n, expect[n])
				return ok
			})
			if !ok {
				t.Fatalf("node %s: %s", n, desc)
			}
			t.Logf("node %s converged after %s: %s", n, took.Round(time.Second), desc)
		}
	})

	t.Run("raising usage lowers reclaimed-cpu within two periods of metrics-server reporting it", func(t *testing.T) {
		if err := c.SetPodUsage(ctx, "default", "reg-0", "5", "4Gi"); err != nil {
			t.Fatal(err)
		}
		_, ok := framework.Poll(90*time.Second, 500*time.Millisecond, func() bool {
			m, err := c.Metrics.MetricsV1beta1().NodeMetricses().Get(ctx, nodes[0], metav1.GetOptions{})
			return err == nil && m.Usage.Cpu().MilliValue() >= 4900
		})
		if !ok {
			t.Fatal("metrics-server never reported the new usage")
		}
		wantCPU, wantMem := expectedUsagePolicy(allocCPU, allocMem, 0.35, 5000, 4<<30)
		var desc string
		// What is timed is the republication; the value is the formula's
		// within the rate noise the first subtest allowed for, which a
		// noisy sample at the raise can exceed for the policy's 1m window.
		took, ok := framework.Poll(3*pubPeriod, 200*time.Millisecond, func() bool {
			ann, status, d := annotated(nodes[0], want{wantCPU, wantMem}, steadyCPUTol)
			desc = d
			return ann && status
		})
		if !ok {
			t.Fatalf("not republished within 2 periods (+1 of slack) of metrics reporting it: %s", desc)
		}
		t.Logf("republished %s after metrics-server reported the raise (period %s)", took.Round(100*time.Millisecond), pubPeriod)
		if took > 2*pubPeriod {
			t.Errorf("took %s, want <= 2 periods (%s)", took, 2*pubPeriod)
		}
		expect[nodes[0]] = want{wantCPU, wantMem}
	})

	t.Run("constant usage writes each node at most three times in three minutes, all through nodes/status", func(t *testing.T) {
		// The audit log is read at every period. One write per publish carries
		// the annotation and the status values: with --refresh-interval 2m a
		// node gets at most two refreshes in three minutes, and one more write
		// for a change of its value (a decrease restarts the refresh clock).
		// In the window the publisher must go on refreshing every annotation,
		// which the same look must see: a dead publisher or a reading that
		// misses its writes would otherwise pass. After the window, status
		// emptied by hand is a deliberate mismatch whose write it must see too.
		const window = 3 * time.Minute
		since := time.Now()
		end := since.Add(window)
		controlNode := nodes[0]
		var emptied time.Time
		var last writes
		r := framework.ExpectAbsence(t, framework.Absence{Window: window, Every: pubPeriod,
			Control: func() error {
				emptied = time.Now()
				framework.ClearReclaimedStatus(t, c, controlNode)
				return nil
			},
			ControlAt: window,
			// The control only proves the looks would see a status write:
			// give the rewrite (informer, cycle, audit batch) room on a busy
			// machine; the looks go on, and keep counting, until it shows.
			ControlWithin: 4*pubPeriod + framework.AuditFlush,
			Look: func(elapsed time.Duration) ([]string, bool) {
				now := time.Now()
				to := now
				if to.After(end) {
					to = end
				}
				last = publisherWrites(since, to)
				var v []string
				for _, n := range nodes {
					if last.status[n] > 3 {
						v = append(v, fmt.Sprintf("node %s: %d publisher writes with constant usage", n, last.status[n]))
					}
				}
				if len(last.outside) > 0 {
					v = append(v, fmt.Sprintf("publisher writes outside nodes/status: %v", last.outside))
				}
				if emptied.IsZero() {
					return v, false
				}
				var notRefreshed []string
				for _, n := range nodes {
					if a := view(t, c, n).Ann; last.status[n] == 0 || a == nil || a.WriteTime.Before(since.Truncate(time.Second)) {
						notRefreshed = append(notRefreshed, n)
					}
				}
				if len(notRefreshed) > 0 {
					v = append(v, fmt.Sprintf("annotations not refreshed during the window: %v (writes %v)", notRefreshed, last.status))
				}
				return v, publisherWrites(emptied, now).status[controlNode] > 0
			}})
		t.Logf("%d looks over %s: publisher writes per node %v, every annotation refreshed; status emptied by hand on %s rewritten after %s",
			r.Looks, window, last.status, controlNode, (r.ControlSeen - r.ControlRan).Round(100*time.Millisecond))
		// The audit log can show the write before the status read sees it.
		var desc string
		if _, ok := framework.Poll(3*pubPeriod, 500*time.Millisecond, func() bool {
			ann, status, d := annotated(controlNode, expect[controlNode], steadyCPUTol)
			desc = d
			return ann && status
		}); !ok {
			t.Errorf("node %s did not get its values back in status: %s", controlNode, desc)
		}
	})

	t.Run("a pool selected by node labels applies its own margin; a broken file keeps the old policy and emits an Event", func(t *testing.T) {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, nodes[1], metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node.Labels["kube-reclaim.io/pool"] = "tight"
		if _, err := c.Client.CoreV1().Nodes().Update(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Pool "tight" keeps 50 % of the CPU; memory keeps the default margin.
		cpu, _ := expectedUsagePolicy(allocCPU, allocMem, 0.5, 6000, 1<<30)
		_, mem := expectedUsagePolicy(allocCPU, allocMem, 0.35, 6000, 1<<30)
		var desc string
		// The label reaches the publisher through its node informer and is
		// applied at its next cycle: allow for a busy machine.
		// The pool's margin moves the value by 2400m; a noisy rate sample
		// (CI saw 32m) stays in the 1m maximum longer than this poll.
		if _, ok := framework.Poll(60*time.Second, 500*time.Millisecond, func() bool {
			ann, status, d := annotated(nodes[1], want{cpu, mem}, steadyCPUTol)
			desc = d
			return ann && status
		}); !ok {
			t.Fatalf("pool margin not applied: %s", desc)
		}
		if v := view(t, c, nodes[1]); v.Ann.Pool != "tight" {
			t.Errorf("annotation pool = %q, want tight", v.Ann.Pool)
		}
		if err := os.WriteFile(cfgFile, []byte("default:\n  policy: nonsense\n  cpu: {margin: 7}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		var ev *corev1.Event
		// The event recorder writes Events asynchronously, after the reload.
		if _, ok := framework.Poll(60*time.Second, 500*time.Millisecond, func() bool {
			list, err := c.Client.CoreV1().Events("kube-reclaim").List(ctx, metav1.ListOptions{})
			if err != nil {
				return false
			}
			for i := range list.Items {
				if list.Items[i].Reason == "PolicyRejected" && list.Items[i].InvolvedObject.Name == "kube-reclaim-policy" {
					ev = &list.Items[i]
					return true
				}
			}
			return false
		}); !ok {
			t.Fatal("no PolicyRejected event for the broken policy file")
		}
		if !strings.Contains(ev.Message, "nonsense") || !strings.Contains(ev.Message, "margin") {
			t.Errorf("event message does not name the problems: %q", ev.Message)
		}
		if pubA.Metric(t, "kube_reclaim_publisher_config_reloads_total", "result", "error") < 1 {
			t.Error("config_reloads_total{result=error} not incremented")
		}
		// For three periods the old pool policy stays in force, looked at
		// every period; the publisher's cycle count, read at the same looks,
		// must show it evaluated the nodes with the broken file in place.
		cycles0 := pubA.Metric(t, "kube_reclaim_publisher_cycle_duration_seconds_count")
		// A look may fall between the publisher's annotation and status
		// writes: status off the annotation counts at the second look in a
		// row.
		statusOff := map[string]int{}
		look := func(node string, w want, what string) []string {
			ann, status, desc := annotated(node, w, steadyCPUTol)
			if status {
				statusOff[node] = 0
			} else {
				statusOff[node]++
			}
			if !ann || statusOff[node] >= 2 {
				return []string{what + ": " + desc}
			}
			return nil
		}
		r := framework.ExpectAbsence(t, framework.Absence{Window: 3 * pubPeriod, Every: pubPeriod,
			// Two cycles take two periods plus their own time: on a busy
			// machine the second may end after the window. The looks go on
			// until it does.
			ControlWithin: 6 * pubPeriod,
			Look: func(time.Duration) ([]string, bool) {
				v := look(nodes[1], want{cpu, mem}, "policy changed after a broken file")
				v = append(v, look(nodes[0], expect[nodes[0]], "default policy changed after a broken file")...)
				return v, pubA.Metric(t, "kube_reclaim_publisher_cycle_duration_seconds_count")-cycles0 >= 2
			}})
		t.Logf("old policy in force at %d looks over %s; the publisher ran %v cycles meanwhile", r.Looks, 3*pubPeriod,
			pubA.Metric(t, "kube_reclaim_publisher_cycle_duration_seconds_count")-cycles0)
		// Mend the file: a replica started from now on must be able to load it.
		if err := os.WriteFile(cfgFile, []byte(pubPolicy), 0o644); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("only the leader writes; a killed leader is replaced within the lease duration", func(t *testing.T) {
		pubB := framework.StartRole(t, c, "publisher-b", "publisher", pubArgs("publisher-b")...)
		// For two periods the standby writes nothing, looked at every second.
		// The control: status emptied by hand on a node is a write due, which
		// the same reading of the leader's metrics must see it make.
		statusWrites0 := pubA.Metric(t, "kube_reclaim_publisher_writes_total", "kind", "status")
		r := framework.ExpectAbsence(t, framework.Absence{Window: 2 * pubPeriod, Every: time.Second,
			// The leader repairs the status at its next cycle after its
			// informer saw it emptied; the looks go on until it has.
			ControlWithin: 4 * pubPeriod,
			Control: func() error {
				framework.ClearReclaimedStatus(t, c, nodes[0])
				return nil
			},
			Look: func(time.Duration) ([]string, bool) {
				var v []string
				if got := pubB.Metric(t, "kube_reclaim_publisher_writes_total"); got != 0 {
					v = append(v, fmt.Sprintf("standby publisher wrote %v times", got))
				}
				if pubB.Metric(t, "kube_reclaim_publisher_is_leader") != 0 || pubA.Metric(t, "kube_reclaim_publisher_is_leader") != 1 {
					v = append(v, "publisher-a should lead and publisher-b follow")
				}
				// Leader and standby are live: their informers follow the
				// API server, the leader's cycles and renewals go on.
				for _, r := range []*framework.Role{pubA, pubB} {
					if ok, got := framework.Live(r.HealthPort); !ok {
						v = append(v, fmt.Sprintf("%s /healthz: %s", r.Name, got))
					}
				}
				return v, pubA.Metric(t, "kube_reclaim_publisher_writes_total", "kind", "status") > statusWrites0
			}})
		if t.Failed() {
			t.FailNow()
		}
		t.Logf("standby wrote nothing at %d looks over %s; the leader repaired the emptied status %.1fs into the window",
			r.Looks, 2*pubPeriod, r.ControlSeen.Seconds())
		if err := c.KillComponent("publisher-a"); err != nil {
			t.Fatal(err)
		}
		killed := time.Now()
		took, ok := framework.Poll(3*pubLease, 200*time.Millisecond, func() bool {
			l, err := c.Client.CoordinationV1().Leases("kube-reclaim").Get(ctx, "kube-reclaim-publisher", metav1.GetOptions{})
			return err == nil && holder(l) == "publisher-b"
		})
		if !ok {
			t.Fatal("publisher-b never took the lease")
		}
		// A candidate only sees the lease expire a lease duration after it last
		// saw it change, and tries every retry period x [1, 2.2) (client-go's
		// jitter): the bound is the lease duration plus two jittered retries,
		// as in the e2e suite.
		takeoverBound := pubLease + 2*time.Duration(2.2*float64(pubRetry))
		t.Logf("publisher-b took over %s after the leader was killed (lease %s, retry %s, bound %s)",
			took.Round(100*time.Millisecond), pubLease, pubRetry, takeoverBound)
		if took > takeoverBound {
			t.Errorf("takeover took %s, want <= %s (lease duration plus two jittered retries)", took, takeoverBound)
		}
		// Publishing continues: a change is published by the new leader.
		// Two cores more take a fifth of the node's room (9.4 cores), well
		// beyond --decrease-threshold (10 %): it is written at once.
		if err := c.SetPodUsage(ctx, "default", "reg-2", "3", "1Gi"); err != nil {
			t.Fatal(err)
		}
		cpu, mem := expectedUsagePolicy(allocCPU, allocMem, 0.35, 3000, 1<<30)
		var desc string
		if _, ok := framework.Poll(90*time.Second, time.Second, func() bool {
			ann, status, d := annotated(nodes[2], want{cpu, mem}, steadyCPUTol)
			desc = d
			return ann && status
		}); !ok {
			t.Fatalf("new leader did not publish the change: %s", desc)
		}
		// The publisher counts a write once the apiserver has answered it,
		// which can be after the read above saw the stored result.
		var annotationWrites float64
		framework.Poll(10*time.Second, 200*time.Millisecond, func() bool {
			annotationWrites = pubB.Metric(t, "kube_reclaim_publisher_writes_total", "kind", "annotation")
			return annotationWrites >= 1
		})
		if annotationWrites < 1 {
			t.Error("publisher-b has no annotation writes after taking over")
		}
		_ = killed
	})

	t.Run("metrics-server stopped: every node's room reaches zero within metrics-stale-after plus two periods, its status what is held, and recovers", func(t *testing.T) {
		if err := c.StopComponent(cluster.MetricsServer); err != nil {
			t.Fatal(err)
		}
		bound := pubMetricsStale + 2*pubPeriod
		// Only node 2 runs a reclaimed pod: its status stays at what the pod
		// holds, the others' goes to zero.
		held := map[string]reclaimable.Resources{nodes[2]: {CPUMilli: 1000, MemoryBytes: 1 << 30}}
		for _, n := range nodes {
			took, ok := framework.Poll(bound+10*time.Second, 500*time.Millisecond, func() bool {
				v := view(t, c, n)
				return v.Ann != nil && v.Ann.CPUMilli == 0 && v.Ann.MemoryBytes == 0 && v.Ann.HeldOrZero() == held[n] &&
					v.HasStatus && v.Capacity == held[n] && v.Allocatable == held[n]
			})
			if !ok {
				v := view(t, c, n)
				t.Fatalf("node %s: room not zero or status not at what is held (%+v): annotation %s, capacity %+v, allocatable %+v",
					n, held[n], v.Raw, v.Capacity, v.Allocatable)
			}
			if took > bound {
				t.Errorf("node %s: zero after %s, want <= %s", n, took, bound)
			}
			if v := view(t, c, n); v.Ann.ZeroReason != "metrics-stale" {
				t.Errorf("node %s zero reason %q, want metrics-stale", n, v.Ann.ZeroReason)
			}
		}
		if err := c.StartComponent(cluster.MetricsServer); err != nil {
			t.Fatal(err)
		}
		for _, n := range nodes {
			if _, ok := framework.Poll(2*time.Minute, time.Second, func() bool {
				v := view(t, c, n)
				return v.Ann != nil && v.Ann.CPUMilli > 0 && v.Ann.MemoryBytes > 0
			}); !ok {
				t.Fatalf("node %s did not recover after metrics-server came back", n)
			}
		}
	})
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}
