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

	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
	"github.com/kube-reclaim/kube-reclaim/test/images/workslots"
)

// The slot schedule of the CPU share test: cycles of five one-second slots,
// A B B A C. The regular pod works in A and B, the batch pods in B and C. A
// against B is the regular pod's throughput alone and beside the batch pods,
// a second apart under the same load from the rest of the machine (A B B A
// cancels a steady drift of that load within each cycle); C, the regular pod
// resting, is the positive control that the batch pods do get CPU.
const (
	cpuShareSlot           = time.Second
	cpuShareRegularPattern = "11110"
	cpuShareBatchPattern   = "01101"
	// cpuShareCycles is how many cycles are measured.
	cpuShareCycles = 24
	// cpuShareKept is the share of its throughput alone the regular pod must
	// keep beside the batch pods (issue 40).
	cpuShareKept = 0.95
)

// slotKind names a slot of the cycle by who works in it.
type slotKind int

const (
	slotAlone  slotKind = iota // A: the regular pod alone
	slotShared                 // B: the regular pod beside the batch pods
	slotBatch                  // C: the batch pods alone
)

func kindOf(i int64) slotKind {
	sched := func(p string) bool { return workslots.Schedule{Slot: cpuShareSlot, Pattern: p}.Working(i) }
	switch regular, batch := sched(cpuShareRegularPattern), sched(cpuShareBatchPattern); {
	case regular && batch:
		return slotShared
	case regular:
		return slotAlone
	default:
		return slotBatch
	}
}

// TestRealNodeRegularPodKeepsItsCPUBesideBatchPods is the CPU half of
// issue 40's proof on a real kubelet: CPU is compressible, so batch pods
// need not be evicted when a regular pod wants its CPU back. A regular pod
// requesting 1 CPU and burning one thread works beside two reclaimed pods
// (as the pod webhook leaves them: zero native requests, limits = grant of
// 1 CPU each, so cpu.shares 2) burning one thread each: three busy threads on
// the node's 2 cores, so one core is shared all the time and only the
// weights decide who gets it. In the median cycle the regular pod keeps at
// least 95 % of the work it does alone, and the batch pods take the CPU the
// regular pod and the rest of the machine leave.
func TestRealNodeRegularPodKeepsItsCPUBesideBatchPods(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: a real node takes a minute")
	}
	// Not in make test yet: on a 2-core machine shared with the other suite
	// the regular pod kept 97.1 % in one run and 90.4 % in the next, and why
	// (the machine's other processes waking on the regular pod's core once
	// batch pods fill the other one is the guess, not measured) is not
	// known. It runs with KUBE_RECLAIM_CPU_SHARE=1.
	if os.Getenv("KUBE_RECLAIM_CPU_SHARE") != "1" {
		t.Skip("KUBE_RECLAIM_CPU_SHARE=1 runs it: its 95 % check is not yet reliable on a shared 2-core machine")
	}
	if os.Geteuid() != 0 {
		t.Skip("a real node needs root (kubelet manages cgroups and mounts); run the integration tests as root")
	}
	ctx := context.Background()
	c := cluster.StartForTest(t, cluster.Options{NoScheduler: true, NoMetricsServer: true})
	const nodeName, ns = "real-cpu", "default"
	rn, err := c.AddRealNode(ctx, nodeName, cluster.RealNodeSpec{})
	if err != nil {
		t.Fatal(err)
	}
	node := view(t, c, nodeName).Node
	const regularMilli, batchMilli = 1000, 1000
	if alloc := node.Status.Allocatable.Cpu().MilliValue(); alloc < regularMilli || alloc > 2*batchMilli {
		// The batch grants must cover the whole node, so that they never run
		// out of quota before they run out of CPU left to take.
		t.Fatalf("node allocatable cpu %dm: the test needs at least the regular pod's %dm and at most the batch grants' %dm", alloc, regularMilli, 2*batchMilli)
	}
	// kubelet admits the batch pods against reclaimed values in status; no
	// publisher runs.
	v := map[string]any{string(names.CPU): "4000", string(names.Memory): strconv.FormatInt(4<<30, 10)}
	framework.MustPatchNode(t, c, nodeName, map[string]any{"status": map[string]any{"capacity": v, "allocatable": v}}, "status")
	installPodWebhook(t, c, ns)

	schedule := func(pattern string) []corev1.EnvVar {
		return []corev1.EnvVar{{Name: "BURN_SLOT", Value: cpuShareSlot.String()}, {Name: "BURN_PATTERN", Value: pattern}}
	}
	regular := workloadPod(ns, "regular", nodeName, corev1.ResourceRequirements{Requests: corev1.ResourceList{
		corev1.ResourceCPU: *resource.NewMilliQuantity(regularMilli, resource.DecimalSI), corev1.ResourceMemory: resource.MustParse("32Mi")}})
	regular.Spec.Containers[0].Env = append(schedule(cpuShareRegularPattern), corev1.EnvVar{Name: "BURN_MILLICORES", Value: fmt.Sprint(regularMilli)})
	pods := []*corev1.Pod{runPod(t, c, regular, corev1.PodRunning, 90*time.Second)}
	grant := reclaimedGrant{cpuMilli: batchMilli, memBytes: 64 << 20}
	for _, name := range []string{"batch-0", "batch-1"} {
		env := append(schedule(cpuShareBatchPattern), corev1.EnvVar{Name: "BURN_MILLICORES", Value: fmt.Sprint(batchMilli)})
		p := runPod(t, c, reclaimedWorkloadPod(ns, name, nodeName, grant, env...), corev1.PodRunning, 90*time.Second)
		assertEnforced(t, p, grant)
		pods = append(pods, p)
	}
	// The weights the kernel shares the contended core by, in the pods'
	// cgroups: what the test is about, so checked rather than assumed.
	for _, p := range pods {
		want := int64(minShares)
		if p.Name == regular.Name {
			want = regularMilli * 1024 / 1000
		}
		if got := readCgroupInt(t, filepath.Join(cgroupCPU, filepath.Dir(containerCgroup(t, rn, p)), "cpu.shares")); got != want {
			t.Fatalf("pod %s has cpu.shares %d, want %d", p.Name, got, want)
		}
	}

	// Measure whole cycles from the first one that starts once every pod
	// has had a slot to settle.
	sched := workslots.Schedule{Slot: cpuShareSlot, Pattern: cpuShareRegularPattern}
	cycle := int64(len(cpuShareRegularPattern))
	first := sched.Index(time.Now()) + 2
	first += (cycle - first%cycle) % cycle
	last := first + cpuShareCycles*cycle - 1
	idle := sampleIdle(t, sched, first, last)
	// Every pod prints a slot once it is over; allow for the last to reach
	// the log.
	time.Sleep(time.Until(sched.Start(last + 1).Add(3 * time.Second)))
	work := map[string]map[int64]workslots.Report{}
	for _, p := range pods {
		work[p.Name] = podWork(t, c, p)
	}
	idleBySlot := idle()

	var m cpuShareMeasure
	for i := first; i <= last; i++ {
		r, ok := work[regular.Name][i]
		b0, ok0 := work["batch-0"][i]
		b1, ok1 := work["batch-1"][i]
		idleNanos, okIdle := idleBySlot[i]
		if !ok || !ok0 || !ok1 || !okIdle {
			t.Fatalf("slot %d (%s) missing: regular %v, batch-0 %v, batch-1 %v, idle sample %v", i, sched.Start(i).Format(time.TimeOnly), ok, ok0, ok1, okIdle)
		}
		m.add(i, kindOf(i), r, b0, b1, idleNanos)
	}
	t.Log(m.summary())

	t.Run("the regular pod keeps at least 95 % of the work it does alone", func(t *testing.T) {
		if m.units[slotAlone] == 0 {
			t.Fatal("the regular pod did no work alone: nothing to compare with")
		}
		// Judged cycle by cycle, by the median: a burst of the rest of the
		// machine lands in a random slot and moves one cycle, whereas what
		// the batch pods take is taken in every cycle.
		if kept := m.keptMedian(); kept < cpuShareKept {
			t.Errorf("in the median cycle the regular pod kept %.1f %% of its work alone beside the batch pods, want at least %.0f %% (over all cycles: %d units beside them, %d alone, %.1f %%)",
				100*kept, 100*cpuShareKept, m.units[slotShared], m.units[slotAlone], 100*m.kept())
		}
	})

	t.Run("the batch pods get CPU when the regular pod rests", func(t *testing.T) {
		// The positive control: the minimum weight is not starvation by
		// construction. Alone the batch pods have the node's part of the
		// machine that the regular pod has when it works alone, for two
		// threads instead of one.
		if got, regularAlone := m.batchCores(slotBatch), m.regularCores(slotAlone); got < 0.5*regularAlone {
			t.Errorf("the batch pods used %.2f cores while the regular pod rested; it used %.2f working alone: want at least half that", got, regularAlone)
		}
	})

	t.Run("the batch pods take the CPU the others leave", func(t *testing.T) {
		// What the regular pod and the rest of the machine leave is the idle
		// time beside the regular pod alone; beside the batch pods it must be
		// gone to them.
		left, stillIdle := m.idleCores(slotAlone), m.idleCores(slotShared)
		if left < 0.1 {
			t.Skipf("the machine left only %.2f cores idle beside the regular pod alone: nothing to take", left)
		}
		if stillIdle > 0.25*left {
			t.Errorf("beside the batch pods %.2f cores stayed idle of the %.2f idle beside the regular pod alone: the batch pods did not take what was left", stillIdle, left)
		}
		if got := m.batchCores(slotShared); got < 0.5*(left-stillIdle) {
			t.Errorf("the batch pods used %.2f cores beside the regular pod, of %.2f cores the others left: someone else took it", got, left-stillIdle)
		}
	})
}

// cpuShareMeasure sums the measured slots by kind.
type cpuShareMeasure struct {
	slots                          [3]int
	units                          [3]int64
	regularCPU, batchCPU, idleNano [3]int64
	// cycles are the regular pod's units alone and beside the batch pods
	// in each cycle, by the cycle's index.
	cycles map[int64]*[3]int64
}

func (m *cpuShareMeasure) add(slot int64, k slotKind, regular, b0, b1 workslots.Report, idleNanos int64) {
	if m.cycles == nil {
		m.cycles = map[int64]*[3]int64{}
	}
	cycle := slot / int64(len(cpuShareRegularPattern))
	if m.cycles[cycle] == nil {
		m.cycles[cycle] = &[3]int64{}
	}
	m.cycles[cycle][k] += regular.Units
	m.slots[k]++
	m.units[k] += regular.Units
	m.regularCPU[k] += regular.CPUNanos
	m.batchCPU[k] += b0.CPUNanos + b1.CPUNanos
	m.idleNano[k] += idleNanos
}

// cycleRatios are, for every cycle, the regular pod's work in its two B
// slots over its work in its two A slots, sorted.
func (m *cpuShareMeasure) cycleRatios() []float64 {
	var r []float64
	for _, c := range m.cycles {
		if c[slotAlone] > 0 {
			r = append(r, float64(c[slotShared])/float64(c[slotAlone]))
		}
	}
	slices.Sort(r)
	return r
}

// keptMedian is the median of the cycle ratios (0 without any).
func (m *cpuShareMeasure) keptMedian() float64 {
	r := m.cycleRatios()
	switch n := len(r); {
	case n == 0:
		return 0
	case n%2 == 1:
		return r[n/2]
	default:
		return (r[n/2-1] + r[n/2]) / 2
	}
}

// kept is the regular pod's work beside the batch pods over its work alone,
// in as many slots of each (two per cycle).
func (m *cpuShareMeasure) kept() float64 {
	return float64(m.units[slotShared]) / float64(m.units[slotAlone])
}

func (m *cpuShareMeasure) cores(ns [3]int64, k slotKind) float64 {
	return float64(ns[k]) / float64(int64(m.slots[k])*cpuShareSlot.Nanoseconds())
}

func (m *cpuShareMeasure) regularCores(k slotKind) float64 { return m.cores(m.regularCPU, k) }
func (m *cpuShareMeasure) batchCores(k slotKind) float64   { return m.cores(m.batchCPU, k) }
func (m *cpuShareMeasure) idleCores(k slotKind) float64    { return m.cores(m.idleNano, k) }

func (m *cpuShareMeasure) summary() string {
	r := m.cycleRatios()
	var b strings.Builder
	fmt.Fprintf(&b, "%d cycles of %s slots (A B B A C):\n", cpuShareCycles, cpuShareSlot)
	for _, k := range []slotKind{slotAlone, slotShared, slotBatch} {
		fmt.Fprintf(&b, "  %-28s %2d slots: regular pod %7d units, %.2f cores; batch pods %.2f cores; machine idle %.2f cores\n",
			[]string{"A (regular pod alone)", "B (regular beside batch)", "C (batch pods alone)"}[k], m.slots[k],
			m.units[k], m.regularCores(k), m.batchCores(k), m.idleCores(k))
	}
	fmt.Fprintf(&b, "  regular pod's work B/A over all cycles %.2f %%", 100*m.kept())
	if len(r) > 0 {
		fmt.Fprintf(&b, "; per cycle: min %.3f, median %.3f, max %.3f", r[0], m.keptMedian(), r[len(r)-1])
	}
	return b.String()
}

// podWork reads the work reports from a pod's log.
func podWork(t *testing.T, c *cluster.Cluster, p *corev1.Pod) map[int64]workslots.Report {
	t.Helper()
	stream, err := c.Client.CoreV1().Pods(p.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{}).Stream(context.Background())
	if err != nil {
		t.Fatalf("logs of %s: %v", p.Name, err)
	}
	defer stream.Close()
	w, err := workslots.Parse(stream)
	if err != nil {
		t.Fatalf("logs of %s: %v", p.Name, err)
	}
	return w
}

// sampleIdle reads the machine's idle CPU time at every slot boundary from
// the start of slot first to the end of slot last, in the background; the
// returned function waits for the end and gives the idle time of each slot.
func sampleIdle(t *testing.T, sched workslots.Schedule, first, last int64) func() map[int64]int64 {
	t.Helper()
	out := map[int64]int64{}
	var wg sync.WaitGroup
	var readErr error
	wg.Go(func() {
		var prev int64
		for i := first; i <= last+1; i++ {
			time.Sleep(time.Until(sched.Start(i)))
			idle, err := machineIdle()
			if err != nil {
				readErr = err
				return
			}
			if i > first {
				out[i-1] = idle - prev
			}
			prev = idle
		}
	})
	return func() map[int64]int64 {
		wg.Wait()
		if readErr != nil {
			t.Fatalf("reading /proc/stat: %v", readErr)
		}
		return out
	}
}

// machineIdle is the idle time of all CPUs since boot (idle and iowait of
// /proc/stat's cpu line), in nanoseconds.
func machineIdle() (int64, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return 0, err
	}
	st, err := fs.Stat()
	if err != nil {
		return 0, err
	}
	return int64((st.CPUTotal.Idle + st.CPUTotal.Iowait) * float64(time.Second)), nil
}
