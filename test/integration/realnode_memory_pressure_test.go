package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kube-reclaim/kube-reclaim/eviction"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

// The memory pressure node: kubelet's systemReserved leaves its pods
// memPressureAllocatable + memPressureKubeletHard of this 24 GiB machine (the
// limit of their cgroup), and kubelet's own hard eviction starts where their
// working set passes memPressureAllocatable (allocatableMemory.available
// below memPressureKubeletHard). The policy file evicts batch pods above
// memPressureEvictAbove of allocatable until below memPressureEvictUntil.
const (
	mib                    = int64(1) << 20
	memPressureAllocatable = 1536 * mib
	memPressureKubeletHard = 256 * mib
	memPressureEvictAbove  = 0.75
	memPressureEvictUntil  = 0.60
	// memPressurePeriod is the publisher's period; its eviction grace is two.
	memPressurePeriod = 5 * time.Second
	// The batch pods: each granted memPressureBatchGrant, holding
	// memPressureBatchMiB. The regular pod starts at memPressureStartMiB
	// and, after memPressureGrowAfter, grows by memPressureGrowMiB a second
	// to memPressureRegularMiB:
	// with the batch pods still there the node would pass kubelet's
	// threshold (3 × 256 + 1000 MiB > 1536 MiB); alone it stays 500 MiB
	// below it. It passes the policy's threshold (1152 MiB) about 30 s after
	// it starts growing and would reach kubelet's about 95 s later: the time the
	// metrics pipeline (kubelet's stats, metrics-server every 10 s), the
	// publisher's period and grace and a graceful eviction have.
	memPressureBatchPods   = 3
	memPressureBatchGrant  = 320 * mib
	memPressureBatchMiB    = 256
	memPressureStartMiB    = 250
	memPressureGrowAfter   = 2 * time.Minute
	memPressureGrowMiB     = 4
	memPressureRegularMiB  = 1000
	memPressureBatchGraceS = 10
)

// memPressureAuditPolicy records evictions and pod deletions, and Lease
// renewals as the steady writer that shows the log is written up to a time.
const memPressureAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  resources:
  - group: ""
    resources: ["pods/eviction"]
  verbs: ["create"]
- level: Metadata
  resources:
  - group: ""
    resources: ["pods"]
  verbs: ["delete", "deletecollection"]
- level: Metadata
  resources:
  - group: coordination.k8s.io
    resources: ["leases"]
  verbs: ["update"]
- level: None
`

// TestRealNodeMemoryPressureEvictsBatchPodsBeforeKubelet is the memory half
// of issue 40's proof on a real kubelet: a regular pod's memory grows on a
// node whose batch pods hold memory. The publisher (reading the real
// kubelet through metrics-server) evicts the batch pods through the
// Eviction API, gracefully, once the node's pods use more than the policy's
// threshold of allocatable; the regular pod is never touched, and kubelet
// never reaches its own hard eviction threshold: its MemoryPressure
// condition stays False, it evicts nothing, and the pods' working set stays
// below allocatable, looked at every second. The positive control, after the
// window, pushes the node past kubelet's threshold on purpose and sees the
// same looks catch it.
func TestRealNodeMemoryPressureEvictsBatchPodsBeforeKubelet(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: a real node takes a minute")
	}
	if os.Geteuid() != 0 {
		t.Skip("a real node needs root (kubelet manages cgroups and mounts); run the integration tests as root")
	}
	ctx := context.Background()
	c := cluster.StartForTest(t, cluster.Options{NoScheduler: true, MetricResolution: 10 * time.Second, AuditPolicy: memPressureAuditPolicy})
	const nodeName, ns = "real-mem", "default"
	capacity := machineMemory(t)
	reserved := capacity - memPressureAllocatable - memPressureKubeletHard
	if reserved < 0 {
		t.Skipf("the machine has %d MiB of memory, fewer than the node's %d MiB", capacity/mib, (memPressureAllocatable+memPressureKubeletHard)/mib)
	}
	rn, err := c.AddRealNode(ctx, nodeName, cluster.RealNodeSpec{
		StatusUpdateFrequency: 5 * time.Second, StatusReportFrequency: 15 * time.Second,
		SystemReserved: map[string]string{"memory": strconv.FormatInt(reserved, 10)},
		EvictionHard:   map[string]string{"memory.available": strconv.FormatInt(memPressureKubeletHard, 10)},
	})
	if err != nil {
		t.Fatal(err)
	}
	// What the node is made of, checked rather than assumed: kubelet's
	// allocatable and the limit it put on its pods' cgroup.
	kubepods := filepath.Join(cgroupMemory, rn.CgroupRoot, "kubepods")
	if got := view(t, c, nodeName).Node.Status.Allocatable.Memory().Value(); got != memPressureAllocatable {
		t.Fatalf("node allocatable memory %d MiB, want %d MiB (capacity %d bytes, systemReserved %d)", got/mib, memPressureAllocatable/mib, capacity, reserved)
	}
	if got := readCgroupInt(t, filepath.Join(kubepods, "memory.limit_in_bytes")); got != memPressureAllocatable+memPressureKubeletHard {
		t.Fatalf("the pods' cgroup limit is %d MiB, want allocatable + the hard threshold = %d MiB", got/mib, (memPressureAllocatable+memPressureKubeletHard)/mib)
	}
	// kubelet admits the batch pods against reclaimed values in status
	// until the publisher takes over (it keeps them at least at what the
	// batch pods hold).
	v := map[string]any{string(names.CPU): "1000", string(names.Memory): strconv.FormatInt(memPressureBatchPods*memPressureBatchGrant, 10)}
	framework.MustPatchNode(t, c, nodeName, map[string]any{"status": map[string]any{"capacity": v, "allocatable": v}}, "status")
	installPodWebhook(t, c, ns)
	pods := watchPods(t, c, ns)

	grant := reclaimedGrant{cpuMilli: 100, memBytes: memPressureBatchGrant}
	var batch []string
	for i := range memPressureBatchPods {
		p := reclaimedWorkloadPod(ns, fmt.Sprintf("batch-%d", i), nodeName, grant,
			corev1.EnvVar{Name: "ALLOCATE_MIB", Value: strconv.Itoa(memPressureBatchMiB)})
		// Graceful: the eviction gives the pod its grace period, in which
		// the workload exits on SIGTERM.
		p.Spec.TerminationGracePeriodSeconds = new(int64(memPressureBatchGraceS))
		assertEnforced(t, runPod(t, c, p, corev1.PodRunning, 90*time.Second), grant)
		batch = append(batch, p.Name)
	}

	// The regular pod starts small and grows only once metrics-server has
	// measured it (it reports a new pod after a minute or so): until then
	// the publisher could not see its use.
	regular := workloadPod(ns, "regular", nodeName, corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("1100Mi")}})
	regular.Spec.Containers[0].Env = []corev1.EnvVar{
		{Name: "ALLOCATE_MIB", Value: strconv.Itoa(memPressureStartMiB)},
		{Name: "GROW_AFTER", Value: memPressureGrowAfter.String()},
		{Name: "GROW_MIB_PER_SECOND", Value: strconv.Itoa(memPressureGrowMiB)},
		{Name: "GROW_TO_MIB", Value: strconv.Itoa(memPressureRegularMiB)},
	}
	r := runPod(t, c, regular, corev1.PodRunning, 90*time.Second)
	regularID := r.Status.ContainerStatuses[0].ContainerID
	growth := r.Status.ContainerStatuses[0].State.Running.StartedAt.Add(memPressureGrowAfter)

	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(policyFile, fmt.Appendf(nil, `apiVersion: kube-reclaim.io/v1alpha1
kind: ReclaimPolicy
default:
  eviction:
    memoryPressure:
      evictAbove: %v
      evictUntilBelow: %v
`, memPressureEvictAbove, memPressureEvictUntil), 0o644); err != nil {
		t.Fatal(err)
	}
	// Every eviction and pod deletion from here on is read from the audit log.
	auditFrom := time.Now()
	framework.StartRole(t, c, "publisher", "publisher", "--config="+policyFile, "--eviction=on",
		"--period="+memPressurePeriod.String(), "--metrics-stale-after=40s", "--refresh-interval=1m", "--leader-elect=false")
	// The publisher must have every pod measured before the pressure
	// starts: wait for their metrics and its first fresh room.
	if _, ok := framework.Poll(3*time.Minute, 2*time.Second, func() bool {
		l, err := c.Metrics.MetricsV1beta1().PodMetricses(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		measured := 0
		for _, m := range l.Items {
			if strings.HasPrefix(m.Name, "batch-") || m.Name == regular.Name {
				measured++
			}
		}
		a := view(t, c, nodeName).Ann
		return measured == memPressureBatchPods+1 && a != nil && !a.MetricsTime.IsZero() && a.ZeroReason == ""
	}); !ok {
		t.Fatalf("metrics-server never measured the %d pods, or the publisher never published fresh room: %+v", memPressureBatchPods+1, view(t, c, nodeName).Ann)
	}
	if late := time.Since(growth); late > 0 {
		t.Logf("the pods were measured %s after the regular pod began to grow: the publisher had that much less time", late.Round(time.Second))
	}
	time.Sleep(time.Until(growth))
	before := workingSet(t, kubepods)
	t.Logf("node %s: allocatable %d MiB, pods' cgroup limit %d MiB; %d batch pods and the regular pod running, using %d MiB; the regular pod grows now",
		nodeName, memPressureAllocatable/mib, (memPressureAllocatable+memPressureKubeletHard)/mib, len(batch), before/mib)

	// The window: the regular pod's growth and half a minute at its peak,
	// for kubelet's housekeeping and the metrics pipeline to catch up.
	window := time.Duration(memPressureRegularMiB-memPressureStartMiB)*time.Second/memPressureGrowMiB + 30*time.Second
	control := workloadPod(ns, "kubelet-control", nodeName, corev1.ResourceRequirements{})
	controlCreated := false
	var peak int64
	var timeline []string
	gone := map[string]bool{}
	rep := framework.ExpectAbsence(t, framework.Absence{
		Window: window, Every: time.Second,
		// After the window: a BestEffort pod that takes the pods' working set
		// past allocatable, below the cgroup's limit, so that kubelet evicts
		// (and does not OOM-kill).
		Control: func() error {
			ws := workingSet(t, kubepods)
			want := (memPressureAllocatable + memPressureKubeletHard/2 - ws) / mib
			control.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "ALLOCATE_MIB", Value: strconv.FormatInt(want, 10)}}
			controlCreated = true
			t.Logf("control: the pods use %d MiB; a BestEffort pod allocating %d MiB takes them to %d MiB, past allocatable (%d MiB)",
				ws/mib, want, ws/mib+want, memPressureAllocatable/mib)
			_, err := c.Client.CoreV1().Pods(ns).Create(ctx, control, metav1.CreateOptions{})
			return err
		},
		ControlAt: window, ControlWithin: 2 * time.Minute,
		Look: func(elapsed time.Duration) ([]string, bool) {
			var v []string
			seen := false
			// Before the control, anything of kubelet's eviction is a
			// violation; after it, the control is seen when kubelet itself
			// reacts (condition or eviction), not merely when the working set
			// passes its threshold.
			note := func(s string) {
				if controlCreated {
					seen = true
				} else {
					v = append(v, s)
				}
			}
			ws := workingSet(t, kubepods)
			if !controlCreated {
				peak = max(peak, ws)
				if ws > memPressureAllocatable {
					v = append(v, fmt.Sprintf("the pods' working set %d MiB is past allocatable %d MiB: kubelet's hard threshold", ws/mib, memPressureAllocatable/mib))
				}
			}
			n := view(t, c, nodeName).Node
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeMemoryPressure && cond.Status == corev1.ConditionTrue {
					note("node condition MemoryPressure True: " + cond.Message)
				}
			}
			for _, e := range kubeletEvictions(t, c, ns, nodeName) {
				note(e)
			}
			p, err := c.Client.CoreV1().Pods(ns).Get(ctx, regular.Name, metav1.GetOptions{})
			if err != nil {
				v = append(v, "reading the regular pod: "+err.Error())
			} else {
				v = append(v, runningUnchanged(p, regularID)...)
			}
			for _, name := range batch {
				if !gone[name] && pods.deleting(name) {
					gone[name] = true
					timeline = append(timeline, fmt.Sprintf("%5.1fs %s leaving, the pods using %d MiB", elapsed.Seconds(), name, ws/mib))
				}
			}
			return v, seen
		},
	})
	t.Logf("%d looks over %s (max gap %s), kubelet's threshold caught %.1fs after the control ran; the pods' working set peaked at %d MiB of %d MiB allocatable (policy: evict above %d MiB until below %d MiB); batch pods: %s",
		rep.Looks, rep.Observed.Round(time.Second), rep.MaxGap.Round(time.Millisecond), (rep.ControlSeen - rep.ControlRan).Seconds(),
		peak/mib, memPressureAllocatable/mib, shareOfAllocatable(memPressureEvictAbove)/mib,
		shareOfAllocatable(memPressureEvictUntil)/mib, strings.Join(timeline, "; "))
	end := time.Now()

	t.Run("without the evictions the node would have passed kubelet's threshold", func(t *testing.T) {
		// What makes the absence above mean something: the batch pods' own
		// use and the regular pod's at its peak do not fit.
		grown := int64(memPressureRegularMiB-memPressureStartMiB) * mib
		if before+grown <= memPressureAllocatable {
			t.Errorf("the pods used %d MiB before the regular pod grew by %d MiB: %d MiB fit in allocatable %d MiB without any eviction (peak seen %d MiB)",
				before/mib, grown/mib, (before+grown)/mib, memPressureAllocatable/mib, peak/mib)
		}
	})

	t.Run("every batch pod was evicted through the Eviction API with its grace period, and no regular pod was evicted or deleted", func(t *testing.T) {
		framework.WaitAuditPast(t, c, end, time.Minute)
		events := framework.AuditEvents(t, c, auditFrom, end, func(e *framework.AuditEvent) bool {
			return e.ObjectRef.Resource == "pods" && e.ObjectRef.Namespace == ns
		})
		evicted := map[string]bool{}
		for _, e := range events {
			name, sub := e.ObjectRef.Name, e.ObjectRef.Subresource
			switch {
			case name == regular.Name:
				t.Errorf("the regular pod was touched: %s %s by %s (%d)", e.Verb, sub, e.User.Username, e.ResponseStatus.Code)
			case sub == "eviction" && e.ResponseStatus.Code == 201 && slices.Contains(batch, name):
				evicted[name] = true
			}
		}
		for _, name := range batch {
			if !evicted[name] {
				t.Errorf("batch pod %s was not evicted through the Eviction API in the window", name)
				continue
			}
			last, ok := pods.lastBeforeDeletion(name)
			switch {
			case !ok:
				t.Errorf("batch pod %s: never seen terminating", name)
			case last.DeletionGracePeriodSeconds == nil || *last.DeletionGracePeriodSeconds != memPressureBatchGraceS:
				t.Errorf("batch pod %s deleted with grace %v, want its %ds", name, last.DeletionGracePeriodSeconds, memPressureBatchGraceS)
			}
			if code, ok := pods.exitCode(name); !ok || code != 0 {
				t.Errorf("batch pod %s: container exit code %d (seen %v), want 0: it stopped on SIGTERM, not killed", name, code, ok)
			}
		}
	})

	t.Run("every eviction has an Event naming the memory pressure", func(t *testing.T) {
		var missing []string
		framework.Poll(time.Minute, time.Second, func() bool {
			missing = missing[:0]
			l, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "reason=" + eviction.ReasonEvicted})
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range batch {
				if !slices.ContainsFunc(l.Items, func(e corev1.Event) bool {
					return e.InvolvedObject.Name == name && strings.Contains(e.Message, "memory pressure")
				}) {
					missing = append(missing, name)
				}
			}
			return len(missing) == 0
		})
		if len(missing) > 0 {
			t.Errorf("no %s Event naming memory pressure for %v", eviction.ReasonEvicted, missing)
		}
	})
}

// shareOfAllocatable is a share of the memory pressure node's allocatable
// memory, in bytes.
func shareOfAllocatable(share float64) int64 { return int64(share * float64(memPressureAllocatable)) }

// machineMemory is what kubelet reports as the node's memory capacity:
// MemTotal of /proc/meminfo.
func machineMemory(t *testing.T) int64 {
	t.Helper()
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		t.Fatal(err)
	}
	mi, err := fs.Meminfo()
	if err != nil || mi.MemTotal == nil {
		t.Fatalf("reading /proc/meminfo: %v", err)
	}
	return int64(*mi.MemTotal) * 1024
}

// workingSet is a memory cgroup's working set as kubelet computes it for its
// eviction signals: usage less inactive file pages.
func workingSet(t *testing.T, dir string) int64 {
	t.Helper()
	usage := readCgroupInt(t, filepath.Join(dir, "memory.usage_in_bytes"))
	stat, err := os.ReadFile(filepath.Join(dir, "memory.stat"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(stat)) {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "total_inactive_file "); ok {
			inactive, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				t.Fatalf("%s/memory.stat: %q: %v", dir, line, err)
			}
			return max(usage-inactive, 0)
		}
	}
	t.Fatalf("%s/memory.stat has no total_inactive_file", dir)
	return 0
}

// kubeletEvictions lists what kubelet's eviction manager did: its Evicted
// Events on pods and its EvictionThresholdMet Events on the node.
func kubeletEvictions(t *testing.T, c *cluster.Cluster, ns, node string) []string {
	t.Helper()
	var out []string
	for _, q := range []struct{ ns, reason string }{{ns, "Evicted"}, {metav1.NamespaceDefault, "EvictionThresholdMet"}} {
		l, err := c.Client.CoreV1().Events(q.ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + q.reason})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range l.Items {
			if e.Source.Component == "kubelet" && (e.Source.Host == node || e.InvolvedObject.Name == node) {
				out = append(out, fmt.Sprintf("kubelet Event %s on %s %s: %s", e.Reason, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Message))
			}
		}
	}
	return out
}

// podWatch keeps every version of the pods of a namespace the API server
// sent: the short-lived ones between an eviction and the pod's removal,
// which a poll can miss.
type podWatch struct {
	mu       sync.Mutex
	versions map[string][]*corev1.Pod
}

func watchPods(t *testing.T, c *cluster.Cluster, ns string) *podWatch {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	pw := &podWatch{versions: map[string][]*corev1.Pod{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			p, ok := ev.Object.(*corev1.Pod)
			if !ok || (ev.Type != watch.Added && ev.Type != watch.Modified && ev.Type != watch.Deleted) {
				continue
			}
			pw.mu.Lock()
			pw.versions[p.Name] = append(pw.versions[p.Name], p)
			pw.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		cancel()
		w.Stop()
		<-done
	})
	return pw
}

// deleting reports whether a version of the pod was being deleted.
func (pw *podWatch) deleting(name string) bool {
	_, ok := pw.lastBeforeDeletion(name)
	return ok
}

// lastBeforeDeletion is the first version of the pod marked for deletion.
func (pw *podWatch) lastBeforeDeletion(name string) (*corev1.Pod, bool) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	for _, p := range pw.versions[name] {
		if p.DeletionTimestamp != nil {
			return p, true
		}
	}
	return nil, false
}

// exitCode is the exit code of the pod's container in its last version
// that shows it terminated.
func (pw *podWatch) exitCode(name string) (int32, bool) {
	pw.mu.Lock()
	defer pw.mu.Unlock()
	vs := pw.versions[name]
	for i := len(vs) - 1; i >= 0; i-- {
		if st := vs[i].Status.ContainerStatuses; len(st) == 1 && st[0].State.Terminated != nil {
			return st[0].State.Terminated.ExitCode, true
		}
	}
	return 0, false
}
