package integration

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/enforcement"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
	"github.com/kube-reclaim/kube-reclaim/webhook"
)

// The cgroup v1 hierarchies kubelet (cgroupfs driver) writes a container's
// resources into. The machine mounts cpu and cpuacct separately.
const (
	cgroupCPU     = "/sys/fs/cgroup/cpu"
	cgroupCPUAcct = "/sys/fs/cgroup/cpuacct"
	cgroupMemory  = "/sys/fs/cgroup/memory"
	// minShares is what kubelet writes into cpu.shares for a zero CPU request
	// (cm.MinShares): the least weight the kernel accepts.
	minShares = 2
	// cfsPeriodUs is kubelet's default CFS period (cpuCFSQuotaPeriod 100ms).
	cfsPeriodUs = 100000
)

// reclaimedGrant is what a batch pod asks of reclaimed resources; the pod
// webhook turns it into native limits of the same size.
type reclaimedGrant struct {
	cpuMilli, memBytes int64
}

// reclaimedWorkloadPod runs the workload image as a plain batch pod granted
// g: reclaimed requests equal to limits and nothing native, as a user writes
// it. The pod webhook must make it enforced.
func reclaimedWorkloadPod(ns, name, node string, g reclaimedGrant, env ...corev1.EnvVar) *corev1.Pod {
	reclaimed := corev1.ResourceList{
		framework.Names.CPU:    *resource.NewQuantity(g.cpuMilli, resource.DecimalSI),
		framework.Names.Memory: *resource.NewQuantity(g.memBytes, resource.BinarySI),
	}
	pod := workloadPod(ns, name, node, corev1.ResourceRequirements{Requests: reclaimed, Limits: reclaimed.DeepCopy()})
	pod.Labels = map[string]string{"app": "batch"}
	pod.Spec.Containers[0].Env = env
	return pod
}

// podWebhookConfiguration is the shipped configuration's pod entry alone
// (CREATE pods, its matchCondition, failurePolicy Fail) for the webhook on
// port: the node-status entry is registered by the node-status subtests,
// whose control runs without it.
func podWebhookConfiguration(t *testing.T, port int, caBundle []byte) *admissionregistrationv1.MutatingWebhookConfiguration {
	t.Helper()
	cfg := webhook.MutatingWebhookConfiguration("kube-reclaim-pods",
		webhook.URLClientConfig(fmt.Sprintf("https://127.0.0.1:%d%s", port, webhook.Path), caBundle))
	for _, w := range cfg.Webhooks {
		if w.Name == webhook.PodWebhookName {
			cfg.Webhooks = []admissionregistrationv1.MutatingWebhook{w}
			return cfg
		}
	}
	t.Fatalf("the shipped configuration has no %s entry", webhook.PodWebhookName)
	return nil
}

// installPodWebhook serves the webhook (its pod path) and registers it for
// reclaimed pods, then waits until the apiserver calls it: a server-side
// dry run of a reclaimed pod comes back enforced.
func installPodWebhook(t *testing.T, c *cluster.Cluster, ns string) {
	t.Helper()
	ctx := context.Background()
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	kp, err := c.CA().ServingCert("kube-reclaim-webhook")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile, err := kp.Write(dir, "webhook")
	if err != nil {
		t.Fatal(err)
	}
	// Its node path stays unregistered here; the node-status subtests run a
	// webhook of their own.
	framework.StartRole(t, c, "webhook-pods", "webhook", fmt.Sprintf("--listen-address=127.0.0.1:%d", port),
		"--tls-cert-file="+certFile, "--tls-private-key-file="+keyFile, "--stale-after=1h", "--publisher-lease-name=")
	if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx,
		podWebhookConfiguration(t, port, c.CA().CertPEM), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	probe := reclaimedWorkloadPod(ns, "probe", "", reclaimedGrant{cpuMilli: 100, memBytes: 16 << 20})
	var last error
	if _, ok := framework.Poll(30*time.Second, 500*time.Millisecond, func() bool {
		p, err := c.Client.CoreV1().Pods(ns).Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil {
			last = err
			return false
		}
		last = enforcement.Enforced(&p.Spec, framework.Names)
		return last == nil && p.Spec.Containers[0].Resources.Limits.Cpu().MilliValue() == 100
	}); !ok {
		t.Fatalf("the apiserver never sent a reclaimed pod to the pod webhook: %v", last)
	}
}

// assertEnforced checks a stored reclaimed pod carries its grant as native
// limits with explicit zero native requests, and is Burstable.
func assertEnforced(t *testing.T, p *corev1.Pod, g reclaimedGrant) {
	t.Helper()
	res := p.Spec.Containers[0].Resources
	got := [4]int64{res.Limits.Cpu().MilliValue(), res.Limits.Memory().Value(), res.Requests.Cpu().MilliValue(), res.Requests.Memory().Value()}
	_, cpuReq := res.Requests[corev1.ResourceCPU]
	_, memReq := res.Requests[corev1.ResourceMemory]
	if want := [4]int64{g.cpuMilli, g.memBytes, 0, 0}; got != want || !cpuReq || !memReq {
		t.Errorf("pod %s stored with native limits cpu %dm memory %d, requests cpu %dm memory %d (explicit: %v/%v); want limits = grant %dm/%d, explicit zero requests",
			p.Name, got[0], got[1], got[2], got[3], cpuReq, memReq, g.cpuMilli, g.memBytes)
	}
	if p.Status.QOSClass != corev1.PodQOSBurstable {
		t.Errorf("pod %s qosClass %s, want Burstable", p.Name, p.Status.QOSClass)
	}
}

// enforcedGrant is the proof of issue 12 on a real kubelet: the grant of a
// reclaimed pod is what its cgroups allow, memory beyond it is OOM-killed in
// the pod's own cgroup, and CPU beyond it is throttled to it.
func enforcedGrant(t *testing.T, c *cluster.Cluster, rn *cluster.RealNode, ns string) {
	ctx := context.Background()
	// kubelet admits reclaimed pods against these values; no publisher runs.
	v := map[string]any{string(framework.Names.CPU): "4000", string(framework.Names.Memory): strconv.FormatInt(4<<30, 10)}
	framework.MustPatchNode(t, c, rn.Name, map[string]any{"status": map[string]any{"capacity": v, "allocatable": v}}, "status")
	t.Cleanup(func() { framework.DeleteAllPods(t, c, ns) })
	// The batch pods below are written as users write them: only reclaimed
	// requests. The pod webhook makes them enforced; it stays registered for
	// the rest of the node's tests.
	installPodWebhook(t, c, ns)

	// A regular neighbour that must outlive everything the batch pods do.
	neighbour := workloadPod(ns, "neighbour", rn.Name, corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
	})
	n0 := runPod(t, c, neighbour, corev1.PodRunning, 90*time.Second)
	neighbourID := n0.Status.ContainerStatuses[0].ContainerID

	// Granted 200m and 64Mi, told to burn a full core.
	burnGrant := reclaimedGrant{cpuMilli: 200, memBytes: 64 << 20}
	burner := runPod(t, c, reclaimedWorkloadPod(ns, "burner", rn.Name, burnGrant,
		corev1.EnvVar{Name: "BURN_MILLICORES", Value: "1000"}), corev1.PodRunning, 90*time.Second)
	cg := containerCgroup(t, rn, burner)

	t.Run("the container cgroup carries the grant as CFS quota and memory limit, and the minimum CPU shares", func(t *testing.T) {
		assertEnforced(t, burner, burnGrant)
		want := map[string]int64{
			filepath.Join(cgroupCPU, cg, "cpu.cfs_quota_us"):                       burnGrant.cpuMilli * cfsPeriodUs / 1000,
			filepath.Join(cgroupCPU, cg, "cpu.cfs_period_us"):                      cfsPeriodUs,
			filepath.Join(cgroupCPU, cg, "cpu.shares"):                             minShares,
			filepath.Join(cgroupMemory, cg, "memory.limit_in_bytes"):               burnGrant.memBytes,
			filepath.Join(cgroupCPU, filepath.Dir(cg), "cpu.shares"):               minShares, // the pod's cgroup
			filepath.Join(cgroupMemory, filepath.Dir(cg), "memory.limit_in_bytes"): burnGrant.memBytes,
		}
		for path, w := range want {
			if got := readCgroupInt(t, path); got != w {
				t.Errorf("%s = %d, want %d", path, got, w)
			}
		}
		t.Logf("container cgroup %s: cfs_quota_us %d / period %d, memory.limit_in_bytes %d, cpu.shares %d",
			cg, burnGrant.cpuMilli*cfsPeriodUs/1000, cfsPeriodUs, burnGrant.memBytes, minShares)
	})

	t.Run("a workload burning more CPU than granted is throttled to its grant", func(t *testing.T) {
		usage := filepath.Join(cgroupCPUAcct, cg, "cpuacct.usage")
		stat := filepath.Join(cgroupCPU, cg, "cpu.stat")
		// The workload starts burning once its process runs; wait for the
		// first throttled period rather than for a fixed time.
		if _, ok := framework.Poll(30*time.Second, 200*time.Millisecond, func() bool {
			return cpuStat(t, stat)["nr_throttled"] > 0
		}); !ok {
			t.Fatalf("no throttled period within 30s: %v", cpuStat(t, stat))
		}
		// Over its quota the container may never run: any window above the
		// band fails. Below it the burner was starved by the machine (2 shared
		// cores), which says nothing about the quota: up to three windows may
		// be measured for one in the band.
		const window = 10 * time.Second
		grant := float64(burnGrant.cpuMilli) / 1000
		low, high := 0.75*grant, 1.25*grant
		for attempt := 1; ; attempt++ {
			u0, s0, t0 := readCgroupInt(t, usage), cpuStat(t, stat), time.Now()
			// Usage is a counter: sampling it at both ends of the window is the
			// measurement, so waiting the window out is not a synchronisation.
			time.Sleep(window)
			u1, s1, t1 := readCgroupInt(t, usage), cpuStat(t, stat), time.Now()
			cores := float64(u1-u0) / float64(t1.Sub(t0).Nanoseconds())
			periods, throttled := s1["nr_periods"]-s0["nr_periods"], s1["nr_throttled"]-s0["nr_throttled"]
			t.Logf("window %d: burning 1000m with a grant of %dm used %.3f cores over %s (cpuacct.usage), throttled in %d of %d CFS periods, %.1fs throttled",
				attempt, burnGrant.cpuMilli, cores, t1.Sub(t0).Round(time.Millisecond), throttled, periods, float64(s1["throttled_time"]-s0["throttled_time"])/1e9)
			if cores > high {
				t.Fatalf("used %.3f cores, above the %dm grant (+25%% = %.2f): the CFS quota does not hold it", cores, burnGrant.cpuMilli, high)
			}
			if cores >= low {
				if throttled == 0 || periods == 0 {
					t.Errorf("throttled in %d of %d periods, want some: the quota did not bind", throttled, periods)
				}
				return
			}
			if attempt == 3 {
				t.Fatalf("used %.3f cores in the last of %d windows, want %.2f-%.2f: the burner never ran up to its grant", cores, attempt, low, high)
			}
		}
	})

	t.Run("a workload allocating past its grant is OOM-killed in its own cgroup and the regular neighbour keeps running", func(t *testing.T) {
		hogGrant := reclaimedGrant{cpuMilli: 200, memBytes: 64 << 20}
		hog := reclaimedWorkloadPod(ns, "hog", rn.Name, hogGrant, corev1.EnvVar{Name: "ALLOCATE_MIB", Value: "200"})
		var hogStatus []corev1.ContainerStatus
		r := framework.ExpectAbsence(t, framework.Absence{
			Window: 20 * time.Second, Every: time.Second,
			// The control is the OOM kill the window is about; the neighbour
			// is looked at before, during and after it.
			Control: func() error {
				_, err := c.Client.CoreV1().Pods(ns).Create(ctx, hog, metav1.CreateOptions{})
				return err
			},
			ControlAt: 3 * time.Second, ControlWithin: 90 * time.Second,
			Look: func(time.Duration) ([]string, bool) {
				var v []string
				n, err := c.Client.CoreV1().Pods(ns).Get(ctx, neighbour.Name, metav1.GetOptions{})
				if err != nil {
					return []string{"reading the neighbour: " + err.Error()}, false
				}
				v = append(v, runningUnchanged(n, neighbourID)...)
				h, err := c.Client.CoreV1().Pods(ns).Get(ctx, hog.Name, metav1.GetOptions{})
				if err != nil || len(h.Status.ContainerStatuses) == 0 {
					return v, false
				}
				hogStatus = h.Status.ContainerStatuses
				term := h.Status.ContainerStatuses[0].State.Terminated
				return v, term != nil && term.Reason == "OOMKilled"
			},
		})
		if len(hogStatus) == 0 || hogStatus[0].State.Terminated == nil {
			t.Fatalf("hog container status %+v, want terminated", hogStatus)
		}
		if stored, err := c.Client.CoreV1().Pods(ns).Get(ctx, hog.Name, metav1.GetOptions{}); err != nil {
			t.Error(err)
		} else {
			assertEnforced(t, stored, hogGrant)
		}
		term := hogStatus[0].State.Terminated
		if term.Reason != "OOMKilled" || term.ExitCode != 137 {
			t.Errorf("hog terminated %s exit %d, want OOMKilled exit 137", term.Reason, term.ExitCode)
		}
		t.Logf("hog (grant %dMi, allocating 200Mi) OOMKilled %.1fs into the window; neighbour %s looked at %d times (max gap %s), still the same container",
			hogGrant.memBytes>>20, r.ControlSeen.Seconds(), neighbourID, r.Looks, r.MaxGap.Round(time.Millisecond))
	})
}

// runningUnchanged describes every way the pod is not the one seen before:
// not Running, restarted, a different container, or a container that ever
// terminated.
func runningUnchanged(p *corev1.Pod, containerID string) []string {
	var v []string
	if p.Status.Phase != corev1.PodRunning {
		v = append(v, fmt.Sprintf("%s is %s (%s %s)", p.Name, p.Status.Phase, p.Status.Reason, p.Status.Message))
	}
	if len(p.Status.ContainerStatuses) != 1 {
		return append(v, fmt.Sprintf("%s has %d container statuses", p.Name, len(p.Status.ContainerStatuses)))
	}
	st := p.Status.ContainerStatuses[0]
	if st.RestartCount != 0 {
		v = append(v, fmt.Sprintf("%s restarted %d times", p.Name, st.RestartCount))
	}
	if st.ContainerID != containerID {
		v = append(v, fmt.Sprintf("%s runs container %s, was %s", p.Name, st.ContainerID, containerID))
	}
	if term := st.State.Terminated; term != nil {
		v = append(v, fmt.Sprintf("%s container terminated: %s exit %d", p.Name, term.Reason, term.ExitCode))
	}
	if term := st.LastTerminationState.Terminated; term != nil {
		v = append(v, fmt.Sprintf("%s container terminated before: %s exit %d", p.Name, term.Reason, term.ExitCode))
	}
	return v
}

// cpuStat reads a cgroup v1 cpu.stat ("key value" lines).
func cpuStat(t *testing.T, path string) map[string]int64 {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string]int64{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		k, v, ok := strings.Cut(s.Text(), " ")
		if !ok {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			t.Fatalf("%s: %q: %v", path, s.Text(), err)
		}
		out[k] = n
	}
	if err := s.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}
