package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/webhook"
)

// Everything about a real kubelet runs in this one test: one cluster, one
// real node, subtests in an order where each leaves the node as the next
// expects it (the last one stops the cluster).
func TestRealNode(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: a real node takes a minute")
	}
	if os.Geteuid() != 0 {
		t.Skip("a real node needs root (kubelet manages cgroups and mounts); run the integration tests as root")
	}
	ctx := context.Background()
	hostBefore := rnHostState()
	c := cluster.StartForTest(t, cluster.Options{NoMetricsServer: true, NoScheduler: true})
	const nodeName = "real-0"
	spec := cluster.RealNodeSpec{StatusUpdateFrequency: 5 * time.Second, StatusReportFrequency: 15 * time.Second}
	rn, err := c.AddRealNode(ctx, nodeName, spec)
	if err != nil {
		t.Fatal(err)
	}
	names := reclaimable.MustNames(reclaimable.DefaultDomain)
	const ns = "default"
	// kubelet posts status at least every StatusReportFrequency; allow for a
	// busy 2-core machine.
	const statusWrite = 60 * time.Second

	t.Run("the node turns Ready, renews its Lease and posts its status", func(t *testing.T) {
		node := rnGetNode(t, c, nodeName)
		if !cluster.NodeReady(node) {
			t.Fatalf("node not Ready: %+v", node.Status.Conditions)
		}
		if got := node.Status.NodeInfo.KubeletVersion; got != "v1.34.4" {
			t.Errorf("kubeletVersion %q, want v1.34.4", got)
		}
		lease := func() time.Time {
			l, err := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, nodeName, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				return time.Time{} // kubelet creates it just after registering
			}
			if err != nil {
				t.Fatal(err)
			}
			return rnRenewTime(l)
		}
		var first time.Time
		if _, ok := rnPollUntil(30*time.Second, 500*time.Millisecond, func() bool { first = lease(); return !first.IsZero() }); !ok {
			t.Fatal("kubelet created no Lease within 30s")
		}
		if _, ok := rnPollUntil(40*time.Second, time.Second, func() bool { return lease().After(first) }); !ok {
			t.Errorf("Lease renewTime stayed at %s for 40s", first)
		}
		beat := rnHeartbeat(node)
		n := rnWaitStatusWrite(t, c, nodeName, beat, statusWrite)
		t.Logf("Lease renewed after %s; status heartbeat %s -> %s", first.Format(time.RFC3339), beat.Format(time.RFC3339), rnHeartbeat(n).Format(time.RFC3339))
	})

	t.Run("a plain pod runs: its process exists and its cgroups carry its limits", func(t *testing.T) {
		pod := rnPod(ns, "plain", nodeName, corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("0"), corev1.ResourceMemory: resource.MustParse("0")},
			Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		})
		p := rnCreateAndWait(t, c, pod, corev1.PodRunning, 90*time.Second)
		if p.Status.QOSClass != corev1.PodQOSBurstable {
			t.Errorf("qosClass %s, want Burstable", p.Status.QOSClass)
		}
		cg := rnContainerCgroup(t, rn, p)
		if got := rnReadInt(t, filepath.Join("/sys/fs/cgroup/memory", cg, "memory.limit_in_bytes")); got != 64<<20 {
			t.Errorf("memory.limit_in_bytes %d, want %d", got, 64<<20)
		}
		if got := rnReadInt(t, filepath.Join("/sys/fs/cgroup/cpu", cg, "cpu.cfs_quota_us")); got != 50000 {
			t.Errorf("cpu.cfs_quota_us %d, want 50000", got)
		}
		pids := rnCgroupPIDs(t, filepath.Join("/sys/fs/cgroup/pids", cg))
		if len(pids) == 0 {
			t.Fatalf("no process in the container's cgroup %s", cg)
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pids[0]))
		if err != nil || !bytes.HasPrefix(cmdline, []byte("/workload")) {
			t.Errorf("process %d in %s runs %q (%v), want /workload", pids[0], cg, cmdline, err)
		}
		t.Logf("container cgroup %s: process %d, memory limit 64Mi, CFS quota 50000/100000", cg, pids[0])
	})

	t.Run("a container allocating past its memory limit is OOM-killed and only it", func(t *testing.T) {
		pod := rnPod(ns, "hog", nodeName, corev1.ResourceRequirements{
			Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		})
		pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "ALLOCATE_MIB", Value: "200"}}
		p := rnCreateAndWait(t, c, pod, corev1.PodFailed, 90*time.Second)
		st := p.Status.ContainerStatuses
		if len(st) != 1 || st[0].State.Terminated == nil || st[0].State.Terminated.Reason != "OOMKilled" || st[0].State.Terminated.ExitCode != 137 {
			t.Fatalf("container status %+v, want terminated OOMKilled exit 137", st)
		}
		// The neighbour with the same limits but no allocation is untouched.
		plain, err := c.Client.CoreV1().Pods(ns).Get(ctx, "plain", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if plain.Status.Phase != corev1.PodRunning || plain.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("plain pod %s with %d restarts, want Running without restarts", plain.Status.Phase, plain.Status.ContainerStatuses[0].RestartCount)
		}
	})

	t.Run("kubelet admits pods against the extended resources in allocatable and rejects what does not fit", func(t *testing.T) {
		rnSetReclaimedStatus(t, c, nodeName, names, 4000, 4<<30)
		reclaimed := func(cpu int64) corev1.ResourceRequirements {
			l := corev1.ResourceList{names.CPU: *resource.NewQuantity(cpu, resource.DecimalSI)}
			return corev1.ResourceRequirements{Requests: l, Limits: l}
		}
		fits := rnCreateAndWait(t, c, rnPod(ns, "fits", nodeName, reclaimed(3000)), corev1.PodRunning, 90*time.Second)
		if fits.Status.QOSClass != corev1.PodQOSBestEffort {
			t.Errorf("a pod requesting only extended resources has qosClass %s, want BestEffort", fits.Status.QOSClass)
		}
		// 3000 + 2000 > 4000: kubelet's own admission must refuse it.
		over := rnCreateAndWait(t, c, rnPod(ns, "over", nodeName, reclaimed(2000)), corev1.PodFailed, 60*time.Second)
		if want := "OutOf" + string(names.CPU); over.Status.Reason != want {
			t.Errorf("rejected pod reason %q (%s), want %q", over.Status.Reason, over.Status.Message, want)
		}
		t.Logf("rejected: %s", over.Status.Message)
		// Both answers came from the values in status, which kubelet's own
		// status writes leave alone.
		node := rnWaitStatusWrite(t, c, nodeName, time.Now(), statusWrite)
		rnAssertReclaimed(t, node, names, 4000, 4<<30)
		// Fresh registrations below empty kubelet's root dir: no pod may be left.
		rnDeletePods(t, c, ns, "fits", "over", "hog", "plain")
	})

	t.Run("with only kubelet writing, the webhook keeps the reclaimed values through its writes, a restart and a fresh registration", func(t *testing.T) {
		port, err := cluster.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		rnStartWebhook(t, c, port)
		cfg := webhook.MutatingWebhookConfiguration("kube-reclaim-webhook",
			webhook.URLClientConfig(fmt.Sprintf("https://127.0.0.1:%d%s", port, webhook.Path), c.CA().CertPEM))
		if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		const cpu, mem = 2500, 3 << 30
		annotate := func() {
			rnAnnotate(t, c, nodeName, names, reclaimable.Annotation{CPUMilli: cpu, MemoryBytes: mem, Policy: "usage", WriteTime: time.Now()})
		}
		annotate()
		// The webhook registration takes a moment to reach the apiserver's
		// admission chain; kubelet's writes are the only writes from here on.
		if _, ok := rnPollUntil(statusWrite, time.Second, func() bool {
			n := rnWaitStatusWrite(t, c, nodeName, time.Now(), statusWrite)
			return rnReclaimed(n, names) == [2]int64{cpu, mem}
		}); !ok {
			t.Fatalf("kubelet's status writes never carried %d/%d", cpu, mem)
		}

		t.Run("every version through kubelet's status writes and a restart carries them", func(t *testing.T) {
			w := rnWatchNode(t, c, nodeName)
			restart := time.Now()
			if err := rn.RestartKubelet(ctx); err != nil {
				t.Fatal(err)
			}
			rnWaitStatusWrite(t, c, nodeName, restart, statusWrite)
			rnAssertEveryVersion(t, w.stop(), names, cpu, mem, restart)
		})

		// Whether kubelet zeroes the values on a fresh root dir at all here:
		// without that, the next subtest would pass without proving anything.
		zeroes := false
		t.Run("control: without the webhook, does a fresh kubelet root dir zero them", func(t *testing.T) {
			if err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, cfg.Name, metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			defer func() {
				cfg.ResourceVersion = ""
				if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
					t.Fatal(err)
				}
			}()
			// The apiserver drops the webhook from its chain asynchronously.
			time.Sleep(5 * time.Second)
			if err := rn.Reregister(ctx, false); err != nil {
				t.Fatal(err)
			}
			got := rnReclaimed(rnGetNode(t, c, nodeName), names)
			zeroes = got == [2]int64{0, 0}
			t.Logf("after a fresh kubelet root dir without the webhook the node carries %v (zeroed: %v)", got, zeroes)
		})
		if _, ok := rnPollUntil(statusWrite, time.Second, func() bool {
			return rnReclaimed(rnWaitStatusWrite(t, c, nodeName, time.Now(), statusWrite), names) == [2]int64{cpu, mem}
		}); !ok {
			t.Fatal("the webhook did not restore the values after it was registered again")
		}

		t.Run("a fresh kubelet root dir with the Node kept: kubelet's zeroing write is corrected in the same write", func(t *testing.T) {
			if !zeroes {
				// Observed on the development machine: kubelet v1.34.4 kept the
				// values on this path. It zeroes only when its device-plugins
				// directory lists no file (devicemanager
				// ShouldResetExtendedResourceCapacity), and its own kubelet.sock
				// there can be created before the node registers: a race.
				t.Skip("kubelet did not zero the extended resources on a fresh root dir without the webhook (control above), so this path cannot be shown here")
			}
			w := rnWatchNode(t, c, nodeName)
			start := time.Now()
			if err := rn.Reregister(ctx, false); err != nil {
				t.Fatal(err)
			}
			rnWaitStatusWrite(t, c, nodeName, start, statusWrite)
			rnAssertEveryVersion(t, w.stop(), names, cpu, mem, start)
		})

		t.Run("the Node deleted and registered from scratch: CREATE, then the first status write after the annotation", func(t *testing.T) {
			if err := rn.Reregister(ctx, true); err != nil {
				t.Fatal(err)
			}
			n := rnGetNode(t, c, nodeName)
			if _, ok := n.Annotations[names.Annotation]; ok {
				t.Fatal("a node created from scratch already has the annotation")
			}
			// The publisher annotates a new node; kubelet's next status write
			// (not the annotation write itself, which is not a status write)
			// must then carry the values.
			annotate()
			n = rnWaitStatusWrite(t, c, nodeName, time.Now(), statusWrite)
			rnAssertReclaimed(t, n, names, cpu, mem)
		})
	})

	t.Run("native oversell: kubelet status writes per minute on a plain and an opted-in node", func(t *testing.T) {
		// kubelet's default frequencies (10s update, 5m report) on a node of
		// its own: the README's figure is about them. The webhook registered
		// above stays on; nothing but kubelet writes this node.
		window := time.Minute
		if v := os.Getenv("KUBE_RECLAIM_OVERSELL_WINDOW"); v != "" {
			if window, err = time.ParseDuration(v); err != nil {
				t.Fatalf("KUBE_RECLAIM_OVERSELL_WINDOW: %v", err)
			}
		}
		const name = "real-defaults"
		if _, err := c.AddRealNode(ctx, name, cluster.RealNodeSpec{}); err != nil {
			t.Fatal(err)
		}
		// Let registration writes settle before counting.
		time.Sleep(15 * time.Second)
		plain := rnCountWrites(t, c, name, window)
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{names.CPURatio: "1.5"}}})
		if _, err := c.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		// kubelet posts nothing until its status changes or the report period
		// (5m) passes, and the webhook only inflates on a status write: one
		// unchanged status patch goes through it now.
		addr, _ := json.Marshal(map[string]any{"status": map[string]any{
			"addresses": []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}}}})
		if _, err := c.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, addr, metav1.PatchOptions{}, "status"); err != nil {
			t.Fatal(err)
		}
		// Positive control: the ratio is applied, or the count below would
		// measure a node that never opted in.
		if _, ok := rnPollUntil(time.Minute, time.Second, func() bool {
			n := rnGetNode(t, c, name)
			_, recorded := n.Annotations[webhook.OversellRecordAnnotation(names)]
			return recorded
		}); !ok {
			t.Fatal("oversell never applied on the opted-in node")
		}
		opted := rnCountWrites(t, c, name, window)
		perMin := func(n int) float64 { return float64(n) / window.Minutes() }
		t.Logf("nodes/status writes over %s each: plain %d (%.2f/min), opted in %d (%.2f/min)", window, plain, perMin(plain), opted, perMin(opted))
		if opted <= plain || perMin(opted) < 3 {
			t.Errorf("opted-in node wrote %d times against %d for the plain node over %s: kubelet did not re-post every update period", opted, plain, window)
		}
	})

	t.Run("kubelet's sysctl writes stay in its mount namespace", func(t *testing.T) {
		pid := rn.Kubelet().PID()
		inside, err := os.ReadFile(fmt.Sprintf("/proc/%d/root/proc/sys/vm/overcommit_memory", pid))
		if err != nil {
			t.Fatal(err)
		}
		// Positive control: kubelet did write its value, where only it sees it.
		if strings.TrimSpace(string(inside)) != "1" {
			t.Errorf("kubelet sees vm.overcommit_memory=%s, want the 1 it writes", inside)
		}
		if now := rnHostState(); now.sysctls["vm/overcommit_memory"] != hostBefore.sysctls["vm/overcommit_memory"] {
			t.Errorf("host vm.overcommit_memory changed from %s to %s", hostBefore.sysctls["vm/overcommit_memory"], now.sysctls["vm/overcommit_memory"])
		}
	})

	t.Run("after the cluster stops no process, mount, cgroup or host file of the node is left", func(t *testing.T) {
		rnCreateAndWait(t, c, rnPod(ns, "last", nodeName, corev1.ResourceRequirements{}), corev1.PodRunning, 90*time.Second)
		pids := []int{rn.Kubelet().PID(), rn.Containerd().PID()}
		shims := rnProcessesMentioning(rn.Dir)
		if len(shims) == 0 {
			t.Fatal("no containerd shim found before stopping: the check below would prove nothing")
		}
		pids = append(pids, shims...)
		containers := rnCgroupPIDs(t, filepath.Join("/sys/fs/cgroup/pids", rn.CgroupRoot))
		if len(containers) == 0 {
			t.Fatal("no container process found before stopping")
		}
		pids = append(pids, containers...)
		mounts := cluster.MountsBelow(c.Dir())
		if len(mounts) == 0 {
			t.Fatal("no mount below the cluster dir before stopping (kubelet's root dir is one)")
		}
		dir := c.Dir()
		c.Stop()
		for _, pid := range pids {
			if cluster.PIDAlive(pid) {
				t.Errorf("process %d still alive after Stop", pid)
			}
		}
		if left := rnProcessesMentioning(rn.Dir); len(left) > 0 {
			t.Errorf("processes still using the node's directory: %v", left)
		}
		if left := cluster.MountsBelow(dir); len(left) > 0 {
			t.Errorf("mounts left below %s: %v (were %d)", dir, left, len(mounts))
		}
		for _, h := range []string{"cpu", "memory", "pids", "cpuset"} {
			if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", h, rn.CgroupRoot)); !os.IsNotExist(err) {
				t.Errorf("cgroup %s:%s still exists", h, rn.CgroupRoot)
			}
		}
		if _, err := os.Stat(dir); !os.IsNotExist(err) {
			t.Errorf("cluster dir %s still exists", dir)
		}
		after := rnHostState()
		for k, v := range hostBefore.sysctls {
			if after.sysctls[k] != v {
				t.Errorf("host sysctl %s changed from %s to %s", k, v, after.sysctls[k])
			}
		}
		for p, existed := range hostBefore.paths {
			if !existed && after.paths[p] {
				t.Errorf("host path %s created by the node and left behind", p)
			}
		}
		t.Logf("stopped %d processes (%d shims, %d container processes) and %d mounts", len(pids), len(shims), len(containers), len(mounts))
	})
}

// rnHostState is what a real node must not change on the machine.
type rnHost struct {
	sysctls map[string]string
	paths   map[string]bool
}

func rnHostState() rnHost {
	h := rnHost{sysctls: map[string]string{}, paths: map[string]bool{}}
	for _, s := range []string{"kernel/panic", "kernel/panic_on_oops", "vm/overcommit_memory", "vm/panic_on_oom",
		"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/ip_forward"} {
		b, _ := os.ReadFile(filepath.Join("/proc/sys", s))
		h.sysctls[s] = strings.TrimSpace(string(b))
	}
	for _, p := range []string{"/var/lib/kubelet", "/var/log/containers", "/var/log/pods", "/var/lib/cni", "/opt/containerd", "/etc/cni", "/run/containerd"} {
		_, err := os.Stat(p)
		h.paths[p] = err == nil
	}
	return h
}

func rnPod(ns, name, node string, res corev1.ResourceRequirements) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:                      node,
			RestartPolicy:                 corev1.RestartPolicyNever,
			TerminationGracePeriodSeconds: new(int64),
			// The node runs no kube-proxy and no DNS; nothing needs the token.
			AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{
				Name: "main", Image: cluster.WorkloadImage, ImagePullPolicy: corev1.PullNever, Resources: res,
			}},
		},
	}
}

// rnCreateAndWait creates a pod and waits for a phase, failing early when it
// reaches a different final phase.
func rnCreateAndWait(t *testing.T, c *cluster.Cluster, pod *corev1.Pod, phase corev1.PodPhase, timeout time.Duration) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Pods(pod.Namespace).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var last *corev1.Pod
	_, ok := rnPollUntil(timeout, 250*time.Millisecond, func() bool {
		p, err := c.Client.CoreV1().Pods(pod.Namespace).Get(ctx, pod.Name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		last = p
		final := p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		return p.Status.Phase == phase || final
	})
	if !ok || last.Status.Phase != phase {
		t.Fatalf("pod %s: phase %v, want %s; status %+v", pod.Name, phasePtr(last), phase, statusPtr(last))
	}
	return last
}

func phasePtr(p *corev1.Pod) any {
	if p == nil {
		return "never seen"
	}
	return p.Status.Phase
}

func statusPtr(p *corev1.Pod) any {
	if p == nil {
		return nil
	}
	return p.Status
}

// rnContainerCgroup is the cgroup path (relative to a hierarchy) of the
// pod's only container: <cgroupRoot>/kubepods[/<qos>]/pod<uid>/<container id>.
func rnContainerCgroup(t *testing.T, rn *cluster.RealNode, p *corev1.Pod) string {
	t.Helper()
	id := strings.TrimPrefix(p.Status.ContainerStatuses[0].ContainerID, "containerd://")
	qos := map[corev1.PodQOSClass]string{corev1.PodQOSBurstable: "burstable", corev1.PodQOSBestEffort: "besteffort"}[p.Status.QOSClass]
	cg := filepath.Join(rn.CgroupRoot, "kubepods", qos, "pod"+string(p.UID), id)
	if _, err := os.Stat(filepath.Join("/sys/fs/cgroup/memory", cg)); err != nil {
		t.Fatalf("container cgroup: %v", err)
	}
	return cg
}

func rnReadInt(t *testing.T, path string) int64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	v, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// rnCgroupPIDs lists the live processes in a cgroup and every cgroup below.
func rnCgroupPIDs(t *testing.T, dir string) []int {
	t.Helper()
	var pids []int
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() {
			return err
		}
		b, err := os.ReadFile(filepath.Join(p, "cgroup.procs"))
		if err != nil {
			return err
		}
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && cluster.PIDAlive(pid) {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pids
}

// rnProcessesMentioning lists live processes whose command line names a path
// below dir (containerd shims carry their containerd's socket).
func rnProcessesMentioning(dir string) []int {
	var pids []int
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(b, []byte(dir+"/")) && cluster.PIDAlive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func rnGetNode(t *testing.T, c *cluster.Cluster, name string) *corev1.Node {
	t.Helper()
	n, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func rnRenewTime(l *coordinationv1.Lease) time.Time {
	if l.Spec.RenewTime == nil {
		return time.Time{}
	}
	return l.Spec.RenewTime.Time
}

// rnHeartbeat is the Ready condition's heartbeat: only kubelet writes it.
func rnHeartbeat(n *corev1.Node) time.Time {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.LastHeartbeatTime.Time
		}
	}
	return time.Time{}
}

// rnWaitStatusWrite waits for a kubelet status write with a heartbeat after
// since (heartbeat times have second precision) and returns the node.
func rnWaitStatusWrite(t *testing.T, c *cluster.Cluster, name string, since time.Time, timeout time.Duration) *corev1.Node {
	t.Helper()
	var n *corev1.Node
	since = since.Truncate(time.Second)
	if _, ok := rnPollUntil(timeout, 500*time.Millisecond, func() bool {
		got, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		n = got
		return rnHeartbeat(got).After(since)
	}); !ok {
		t.Fatalf("no kubelet status write on %s after %s within %s", name, since.Format(time.RFC3339), timeout)
	}
	return n
}

func rnReclaimed(n *corev1.Node, names reclaimable.Names) [2]int64 {
	c, m := n.Status.Capacity[names.CPU], n.Status.Capacity[names.Memory]
	ac, am := n.Status.Allocatable[names.CPU], n.Status.Allocatable[names.Memory]
	if c.Value() != ac.Value() || m.Value() != am.Value() {
		return [2]int64{-1, -1} // unequal capacity and allocatable is a defect of its own
	}
	return [2]int64{c.Value(), m.Value()}
}

func rnAssertReclaimed(t *testing.T, n *corev1.Node, names reclaimable.Names, cpu, mem int64) {
	t.Helper()
	if got := rnReclaimed(n, names); got != [2]int64{cpu, mem} {
		t.Errorf("node %s (rv %s): reclaimed capacity %v allocatable %v, want %d/%d in both", n.Name, n.ResourceVersion,
			[]any{n.Status.Capacity[names.CPU], n.Status.Capacity[names.Memory]},
			[]any{n.Status.Allocatable[names.CPU], n.Status.Allocatable[names.Memory]}, cpu, mem)
	}
}

func rnSetReclaimedStatus(t *testing.T, c *cluster.Cluster, node string, names reclaimable.Names, cpu, mem int64) {
	t.Helper()
	v := map[string]any{string(names.CPU): strconv.FormatInt(cpu, 10), string(names.Memory): strconv.FormatInt(mem, 10)}
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"capacity": v, "allocatable": v}})
	if _, err := c.Client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
}

func rnAnnotate(t *testing.T, c *cluster.Cluster, node string, names reclaimable.Names, a reclaimable.Annotation) {
	t.Helper()
	v, err := a.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{names.Annotation: v}}})
	if _, err := c.Client.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// rnNodeWatch records every version of one node the apiserver stores.
type rnNodeWatch struct {
	w    watch.Interface
	done chan []*corev1.Node
}

func rnWatchNode(t *testing.T, c *cluster.Cluster, name string) *rnNodeWatch {
	t.Helper()
	n := rnGetNode(t, c, name)
	w, err := c.Client.CoreV1().Nodes().Watch(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String(), ResourceVersion: n.ResourceVersion,
	})
	if err != nil {
		t.Fatal(err)
	}
	nw := &rnNodeWatch{w: w, done: make(chan []*corev1.Node, 1)}
	go func() {
		var seen []*corev1.Node
		for ev := range w.ResultChan() {
			if node, ok := ev.Object.(*corev1.Node); ok && (ev.Type == watch.Added || ev.Type == watch.Modified) {
				seen = append(seen, node)
			}
		}
		nw.done <- seen
	}()
	return nw
}

func (nw *rnNodeWatch) stop() []*corev1.Node {
	// Let the last events arrive.
	time.Sleep(500 * time.Millisecond)
	nw.w.Stop()
	return <-nw.done
}

// rnAssertEveryVersion checks every stored version carries the values, and
// that kubelet really wrote status in the window (heartbeat after since):
// without a kubelet write the check would prove nothing.
func rnAssertEveryVersion(t *testing.T, versions []*corev1.Node, names reclaimable.Names, cpu, mem int64, since time.Time) {
	t.Helper()
	kubeletWrites := 0
	for _, n := range versions {
		rnAssertReclaimed(t, n, names, cpu, mem)
		if rnHeartbeat(n).After(since.Truncate(time.Second)) {
			kubeletWrites++
		}
	}
	if kubeletWrites == 0 {
		t.Fatalf("none of %d versions came from a kubelet status write after %s", len(versions), since.Format(time.RFC3339))
	}
	t.Logf("%d versions of the node, %d with a new kubelet heartbeat, all carry %d/%d", len(versions), kubeletWrites, cpu, mem)
}

// rnStartWebhook runs the webhook role with a serving certificate from the
// cluster CA, publisher liveness not required (no publisher runs here).
func rnStartWebhook(t *testing.T, c *cluster.Cluster, port int) {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "kube-reclaim")
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	build := exec.Command("go", "build", "-o", bin, "./cmd/kube-reclaim")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	kp, err := c.CA().ServingCert("kube-reclaim-webhook")
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile, err := kp.Write(dir, "webhook")
	if err != nil {
		t.Fatal(err)
	}
	health, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.StartProcess("webhook", bin, "webhook", "--kubeconfig="+c.Kubeconfig(),
		fmt.Sprintf("--health-address=127.0.0.1:%d", health), fmt.Sprintf("--listen-address=127.0.0.1:%d", port),
		"--tls-cert-file="+certFile, "--tls-private-key-file="+keyFile,
		"--stale-after=1h", "--publisher-lease-name="); err != nil {
		t.Fatal(err)
	}
	if _, ok := rnPollUntil(60*time.Second, 200*time.Millisecond, func() bool {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", health))
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}); !ok {
		t.Fatalf("webhook not ready:\n%s", c.Process("webhook").Tail(3000))
	}
}

// rnCountWrites counts the writes to a node over a window, by the watch
// events the apiserver sends (each stored change is one event).
func rnCountWrites(t *testing.T, c *cluster.Cluster, name string, window time.Duration) int {
	t.Helper()
	w := rnWatchNode(t, c, name)
	time.Sleep(window)
	return len(w.stop())
}

// rnPollUntil calls f every interval until it is true or timeout passes.
func rnPollUntil(timeout, interval time.Duration, f func() bool) (time.Duration, bool) {
	start := time.Now()
	for {
		if f() {
			return time.Since(start), true
		}
		if time.Since(start) > timeout {
			return time.Since(start), false
		}
		time.Sleep(interval)
	}
}

// rnDeletePods deletes pods at once and waits until they are gone.
func rnDeletePods(t *testing.T, c *cluster.Cluster, ns string, names ...string) {
	t.Helper()
	ctx := context.Background()
	for _, name := range names {
		err := c.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatal(err)
		}
	}
	if _, ok := rnPollUntil(60*time.Second, 250*time.Millisecond, func() bool {
		for _, name := range names {
			if _, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false
			}
		}
		return true
	}); !ok {
		t.Fatalf("pods %v not deleted within 60s", names)
	}
}
