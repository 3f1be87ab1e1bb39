package integration

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

// Publisher timings for the real node: a short period so the outage turns
// the room to zero within a minute, and a stale bound above metrics-server's
// 15 s resolution so fresh data never looks stale.
const (
	floorPeriod       = 5 * time.Second
	floorMetricsStale = 40 * time.Second
	// statusWriteTimeout bounds the wait for a kubelet status write (it
	// posts at least every StatusReportFrequency) on a busy 2-core machine.
	statusWriteTimeout = 60 * time.Second
)

// floorSurvivesKubeletRestart is the proof of issue 13 on a real kubelet:
// with the room at zero because metrics are gone, node status stays at what
// the running batch pods hold, so a kubelet restart re-admits all of them,
// while a new batch pod beyond that is refused by kubelet's own admission.
// The webhook for nodes/status must be registered; the publisher is started
// and stopped here.
func floorSurvivesKubeletRestart(t *testing.T, c *cluster.Cluster, rn *cluster.RealNode, ns string) {
	ctx := context.Background()
	t.Cleanup(func() { framework.DeleteAllPods(t, c, ns) })
	// A fresh annotation with room for the batch pods: they are admitted
	// against it before the publisher takes over.
	// (Below the node's 2 native cores: the webhook clamps anything above.)
	framework.SetAnnotation(t, c, rn.Name, reclaimable.Annotation{CPUMilli: 1500, MemoryBytes: 2 << 30, Policy: "usage", WriteTime: time.Now()})
	if _, ok := framework.Poll(statusWriteTimeout, time.Second, func() bool {
		return view(t, c, rn.Name).StatusMatchesAnnotation()
	}); !ok {
		t.Fatalf("node status never carried the annotation: %+v", view(t, c, rn.Name))
	}

	grant := reclaimedGrant{cpuMilli: 300, memBytes: 128 << 20}
	batch := []string{"batch-0", "batch-1"}
	ids := map[string]string{}
	var held reclaimable.Resources
	for _, name := range batch {
		p := runPod(t, c, reclaimedWorkloadPod(ns, name, rn.Name, grant), corev1.PodRunning, 90*time.Second)
		assertEnforced(t, p, grant)
		ids[name] = p.Status.ContainerStatuses[0].ContainerID
		held = held.Add(reclaimable.Resources{CPUMilli: grant.cpuMilli, MemoryBytes: grant.memBytes})
	}

	framework.StartRole(t, c, "publisher", "publisher", publisherArgsWithoutEviction(t,
		"--period="+floorPeriod.String(), "--metrics-stale-after="+floorMetricsStale.String(),
		"--refresh-interval=1m", "--leader-elect=false")...)
	// Stopped before the next subtests: they count the writes on a node of
	// their own.
	t.Cleanup(func() {
		if err := c.StopComponent("publisher"); err != nil {
			t.Errorf("stopping the publisher: %v", err)
		}
	})
	var fresh *reclaimable.Annotation
	if _, ok := framework.Poll(90*time.Second, time.Second, func() bool {
		a := view(t, c, rn.Name).Ann
		if a != nil && a.Policy != "" && !a.MetricsTime.IsZero() && a.ZeroReason == "" {
			fresh = a
		}
		return fresh != nil
	}); !ok {
		t.Fatalf("the publisher never published measured room for %s: %+v", rn.Name, view(t, c, rn.Name).Ann)
	}
	t.Logf("room from measured usage of the real node: %dm cpu, %d MiB (metrics of %s); batch pods hold %dm, %d MiB",
		fresh.CPUMilli, fresh.MemoryBytes>>20, fresh.MetricsTime.Format(time.RFC3339), held.CPUMilli, held.MemoryBytes>>20)

	if err := c.StopComponent(cluster.MetricsServer); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.StartComponent(cluster.MetricsServer); err != nil {
			t.Errorf("starting metrics-server again: %v", err)
		}
	})
	outage := time.Now()
	// The room goes to 0 once the newest sample is older than the stale
	// bound; the status then stays at what the batch pods hold.
	var floored framework.NodeView
	took, ok := framework.Poll(floorMetricsStale+2*statusWriteTimeout, time.Second, func() bool {
		floored = view(t, c, rn.Name)
		a := floored.Ann
		return a != nil && a.CPUMilli == 0 && a.MemoryBytes == 0 && a.ZeroReason != "" && a.HeldOrZero() == held &&
			floored.Capacity == held && floored.Allocatable == held
	})
	if !ok {
		t.Fatalf("after %s without metrics-server: annotation %+v, status capacity %+v allocatable %+v; want room 0 and status at what is held %+v",
			took.Round(time.Second), floored.Ann, floored.Capacity, floored.Allocatable, held)
	}
	t.Logf("%s after metrics-server stopped: room 0 (%s), annotation held %+v, status %dm / %d MiB = what the batch pods hold",
		took.Round(time.Second), floored.Ann.ZeroReason, floored.Ann.HeldOrZero(), floored.Allocatable.CPUMilli, floored.Allocatable.MemoryBytes>>20)

	// More than the floor leaves: kubelet must refuse it once restarted.
	over := reclaimedWorkloadPod(ns, "over-floor", rn.Name, grant)
	restarted := make(chan error, 1)
	start := time.Now()
	go func() { restarted <- rn.RestartKubelet(ctx) }()
	// The Node stays Ready through a short restart, so the restart call
	// returning says little; the new kubelet renewing its Lease says it runs
	// and has read its pods, which it re-admits before anything else.
	const window = 40 * time.Second
	renewedAt := time.Duration(-1)
	// Until the control pod exists (the publisher then counts it as held
	// too), the status must stay at the floor through kubelet's own writes.
	overCreated := false
	rep := framework.ExpectAbsence(t, framework.Absence{
		// kubelet re-admits within seconds of its start; the window covers
		// its stop, start and that with room to spare.
		// A look is three API reads, which on a loaded machine can take
		// longer than half a second. What the window
		// forbids (a rejected or restarted pod, status off the floor in a
		// stored version) lasts, so a look a second sees it.
		Window: window, Every: time.Second,
		// After the window, the positive control: a rejection by kubelet's
		// admission, seen by the same look.
		Control: func() error {
			overCreated = true
			_, err := c.Client.CoreV1().Pods(ns).Create(ctx, over, metav1.CreateOptions{})
			return err
		},
		ControlAt: window, ControlWithin: 60 * time.Second,
		Look: func(elapsed time.Duration) ([]string, bool) {
			if renewedAt < 0 {
				l, err := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, rn.Name, metav1.GetOptions{})
				if err == nil && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(start) {
					renewedAt = elapsed
				}
			}
			list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return []string{"listing pods: " + err.Error()}, false
			}
			var v []string
			if !overCreated {
				if n := view(t, c, rn.Name); n.Capacity != held || n.Allocatable != held {
					v = append(v, fmt.Sprintf("node status capacity %+v allocatable %+v, want the floor %+v", n.Capacity, n.Allocatable, held))
				}
			}
			seen, control := 0, false
			for i := range list.Items {
				p := &list.Items[i]
				if id, ok := ids[p.Name]; ok {
					seen++
					v = append(v, runningUnchanged(p, id)...)
				}
				if p.Name == over.Name {
					control = p.Status.Phase == corev1.PodFailed && strings.HasPrefix(p.Status.Reason, "OutOf")
				}
			}
			if seen != len(ids) {
				v = append(v, fmt.Sprintf("%d of %d batch pods left", seen, len(ids)))
			}
			return v, control
		},
	})
	if err := <-restarted; err != nil {
		t.Fatalf("restarting kubelet: %v", err)
	}
	if renewedAt < 0 || renewedAt > window-15*time.Second {
		t.Errorf("the restarted kubelet renewed its Lease %s into the %s window (-1: never): too little of the window came after it", renewedAt.Round(100*time.Millisecond), window)
	}
	rejected, err := c.Client.CoreV1().Pods(ns).Get(ctx, over.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kubelet restarted %s into the outage (new kubelet renewed its Lease %s later); %d looks over %s (max gap %s): status at the floor and every batch pod Running with its container and 0 restarts; a new batch pod over the floor: %s %s: %s",
		start.Sub(outage).Round(time.Second), renewedAt.Round(100*time.Millisecond), rep.Looks, rep.Observed.Round(time.Second), rep.MaxGap.Round(time.Millisecond),
		rejected.Status.Phase, rejected.Status.Reason, rejected.Status.Message)
}

// publisherArgsWithoutEviction adds --eviction=off when the publisher has
// an eviction controller. The real node shares 2 busy cores with the whole
// machine, so its measured CPU room is often 0 before the outage begins, and
// on such fresh data the controller would rightly evict the batch pods this
// test needs running; what is shown here is kubelet's admission, not
// eviction.
func publisherArgsWithoutEviction(t *testing.T, args ...string) []string {
	t.Helper()
	help, err := exec.Command(framework.KubeReclaim(t), "publisher", "--help").CombinedOutput() //nolint:noctx // a short help call
	if err != nil {
		t.Fatalf("kube-reclaim publisher --help: %v: %s", err, help)
	}
	if bytes.Contains(help, []byte("--eviction ")) {
		args = append(args, "--eviction=off")
	}
	return args
}
