package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kube-reclaim/kube-reclaim/internal/kubectlreclaim"
	"github.com/kube-reclaim/kube-reclaim/internal/leaderlease"
	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

// TestKubectlReclaim runs the kubectl plugin against the real local cluster:
// one node with a fresh annotation (written here, as the publisher would) and
// a reclaimed pod bound to it, one node whose annotation is 30 minutes old,
// and a reclaimed pod no node can hold.
func TestKubectlReclaim(t *testing.T) {
	ctx := context.Background()
	// Build the binary while the cluster starts: linking takes a while on a
	// busy 2-core machine.
	binDir := t.TempDir()
	built := make(chan struct{})
	var buildErr error
	go func() {
		defer close(built)
		root, err := cluster.RepoRoot()
		if err != nil {
			buildErr = err
			return
		}
		build := exec.Command("go", "build", "-o", filepath.Join(binDir, "kubectl-reclaim"), "./cmd/kubectl-reclaim")
		build.Dir = root
		if out, err := build.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	}()
	// Runs before binDir is removed, also when the test stops early.
	t.Cleanup(func() { <-built })
	c := cluster.StartForTest(t, cluster.Options{MetricResolution: 10 * time.Second})
	const ns = "kubectl-reclaim"
	framework.CreateNamespace(t, c, ns)
	framework.RenewPublisherLease(t, c)
	spec := cluster.NodeSpec{NamePrefix: "cli", CPU: resource.MustParse("16"), Memory: resource.MustParse("64Gi")}
	nodes := framework.AddReadyNodes(t, c, 2, spec, time.Minute)
	fresh, stale := nodes[0], nodes[1]

	// The request policy for 16 cores / 64Gi with 10 cores / 40Gi requested
	// by regular pods: 6 cores / 24Gi.
	expl := func(alloc, requested int64) reclaimable.ResourceExplanation {
		return reclaimable.ResourceExplanation{Result: alloc - requested, Terms: []reclaimable.Term{
			{Name: policy.TermAllocatable, Op: reclaimable.OpBase, Value: alloc},
			{Name: policy.TermRegularRequests, Op: reclaimable.OpSubtract, Value: requested, Note: "requests of 4 regular pods"},
			{Name: policy.TermFloor, Op: reclaimable.OpFloor, Value: 0},
			{Name: policy.TermCap, Op: reclaimable.OpCap, Value: alloc, Note: "100% of allocatable at most"},
			{Name: policy.TermMinimum, Op: reclaimable.OpMinimum, Value: 0},
		}}
	}
	now := time.Now().UTC().Truncate(time.Second)
	framework.SetAnnotation(t, c, fresh, reclaimable.Annotation{CPUMilli: 6000, MemoryBytes: 24 << 30, Policy: "request", Pool: "batch",
		WriteTime: now, Explanation: &reclaimable.Explanation{CPU: expl(16000, 10000), Memory: expl(64<<30, 40<<30)}})
	staleWrite := now.Add(-30 * time.Minute)
	framework.SetAnnotation(t, c, stale, reclaimable.Annotation{CPUMilli: 3000, MemoryBytes: 8 << 30, Policy: "request",
		WriteTime: staleWrite, Explanation: &reclaimable.Explanation{CPU: expl(16000, 13000), Memory: expl(64<<30, 56<<30)}})
	// The publisher's status patch, so that -o wide has something to show.
	status := fmt.Sprintf(`{"status":{"capacity":{%[1]q:"6000",%[2]q:"24Gi"},"allocatable":{%[1]q:"6000",%[2]q:"24Gi"}}}`, names.CPU, names.Memory)
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, fresh, types.MergePatchType, []byte(status), metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}

	reclaimed := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{names.CPU: resource.MustParse(cpu), names.Memory: resource.MustParse(mem)}
	}
	framework.CreatePod(t, c, podSpec(ns, "batch-1", fresh, nil, reclaimed("1500", "2Gi")))
	framework.CreatePod(t, c, podSpec(ns, "too-big", "", nil, reclaimed("100000", "1Gi")))
	if err := c.SetPodUsage(ctx, ns, "batch-1", "1", "1Gi"); err != nil {
		t.Fatal(err)
	}

	// staleAges are the whole minutes since the stale annotation was
	// written ("30m", as the plugin shows ages of 10m to 3h) at a moment in
	// [from, to]: the age moves on while the test waits for metrics, so a
	// check made more than a minute after the setup sees 31m.
	staleAges := func(from, to time.Time) []string {
		a, b := from.Sub(staleWrite)/time.Minute, to.Sub(staleWrite)/time.Minute
		out := []string{fmt.Sprintf("%dm", a)}
		if b != a {
			out = append(out, fmt.Sprintf("%dm", b))
		}
		return out
	}
	anyOf := func(check func(age string) bool, ages []string) bool {
		for _, a := range ages {
			if check(a) {
				return true
			}
		}
		return false
	}
	kubeconfig := "--kubeconfig=" + c.Kubeconfig()
	plugin := func(args ...string) (string, error) {
		t.Helper()
		var out, errOut bytes.Buffer
		code := kubectlreclaim.Main(ctx, append(args, kubeconfig), genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut})
		if code != 0 {
			return out.String(), fmt.Errorf("kubectl reclaim %s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
		}
		return out.String(), nil
	}
	nodeList := func() kubectlreclaim.NodeList {
		t.Helper()
		out, err := plugin("nodes", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var l kubectlreclaim.NodeList
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return l
	}

	t.Run("nodes -o json carries published, requested, free, usage and the stale reason", func(t *testing.T) {
		var l kubectlreclaim.NodeList
		var ages []string
		// Node usage is the kwok baseline plus the pod's 1 core / 1Gi, once
		// metrics-server has scraped it: a pod's usage takes up to a minute
		// to show through kwok and metrics-server, more on a busy machine.
		took, ok := framework.Poll(2*time.Minute, time.Second, func() bool {
			from := time.Now()
			l = nodeList()
			ages = staleAges(from, time.Now())
			return len(l.Items) == 2 && l.Items[0].Usage != nil && l.Items[0].Usage.CPUMilli >= 1000 && l.Items[0].Usage.MemoryBytes >= 1<<30
		})
		if !ok {
			t.Fatalf("no usage of %s including its pod from metrics.k8s.io after %s: %+v", fresh, took, l)
		}
		t.Logf("usage reported after %s", took.Round(time.Second))
		a, b := l.Items[0], l.Items[1]
		if a.Name != fresh || b.Name != stale {
			t.Fatalf("nodes %s, %s; want %s, %s", a.Name, b.Name, fresh, stale)
		}
		if !a.Fresh || a.Room != (reclaimable.Resources{CPUMilli: 6000, MemoryBytes: 24 << 30}) ||
			a.Held != (reclaimable.Resources{CPUMilli: 1500, MemoryBytes: 2 << 30}) || a.Floor != a.Room || a.OverRoom ||
			a.Free != (reclaimable.Resources{CPUMilli: 4500, MemoryBytes: 22 << 30}) || a.ReclaimedPods != 1 {
			t.Errorf("%s: %+v", fresh, a)
		}
		if a.Capacity != a.Floor || a.Allocatable != a.Floor {
			t.Errorf("%s: status capacity %+v allocatable %+v", fresh, a.Capacity, a.Allocatable)
		}
		if a.UsageTime == nil || time.Since(*a.UsageTime) > time.Minute {
			t.Errorf("%s usage time %v", fresh, a.UsageTime)
		}
		if b.Fresh || b.StaleReason != reclaimable.ReasonWriteTooOld ||
			!anyOf(func(age string) bool { return strings.HasPrefix(b.StaleDetail, "annotation written "+age) }, ages) ||
			b.Room != (reclaimable.Resources{}) || b.Annotation == nil ||
			b.Annotation.Resources != (reclaimable.Resources{CPUMilli: 3000, MemoryBytes: 8 << 30}) {
			t.Errorf("%s: %+v", stale, b)
		}
	})

	t.Run("nodes table shows humanized values, the stale reason and the policy", func(t *testing.T) {
		from := time.Now()
		out, err := plugin("nodes", "--sort-by", "free-cpu")
		ages := staleAges(from, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("\n%s", out)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 {
			t.Fatalf("want a header and 2 rows:\n%s", out)
		}
		if got := strings.Fields(lines[0]); strings.Join(got, " ") != "NAME ROOM HELD FLOOR FREE USAGE PODS POLICY STATUS AGE" {
			t.Errorf("header %q", lines[0])
		}
		row := strings.Fields(lines[1])
		if len(row) != 12 || row[0] != fresh || strings.Join(row[1:5], " ") != "6/24Gi 1500m/2Gi 6/24Gi 4500m/22Gi" ||
			row[6] != "1" || strings.Join(row[7:10], " ") != "request (pool batch)" || row[10] != "Fresh" {
			t.Errorf("row of %s: %q", fresh, lines[1])
		}
		row = strings.Fields(lines[2])
		if len(row) != 11 || row[0] != stale || strings.Join(row[1:5], " ") != "0/0 0/0 0/0 0/0" ||
			strings.Join(row[8:10], " ") != "Stale: annotation-too-old" || !contains(ages, row[10]) {
			t.Errorf("row of %s: %q (age %v)", stale, lines[2], ages)
		}
	})

	t.Run("nodes -o wide and -l", func(t *testing.T) {
		out, err := plugin("nodes", "-o", "wide", "-l", "kubernetes.io/hostname="+fresh)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("\n%s", out)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			t.Fatalf("want one node:\n%s", out)
		}
		row := strings.Fields(lines[1])
		// ANNOTATED ANNOTATED-HELD CAPACITY ALLOCATABLE METRICS-AGE USAGE-AGE
		if n := len(row); n != 18 || strings.Join(row[n-6:n-1], " ") != "6/24Gi <none> 6/24Gi 6/24Gi <none>" {
			t.Errorf("wide row %q", lines[1])
		}
	})

	t.Run("explain lists the terms and checks them against the published value", func(t *testing.T) {
		out, err := plugin("explain", fresh)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("\n%s", out)
		for _, want := range []string{
			"Policy:        request (pool \"batch\")\n",
			"In effect:     cpu 6, memory 24Gi\n",
			"Status: Fresh: the webhook and the extender offer these values to reclaimed pods.\n",
			"CPU: allocatable - regular-requests, at least floor, at most cap, zero below minimum\n",
			"  allocatable       start at    16     16       allocatable cpu of the node\n",
			"  regular-requests  minus       10     6        regular (not reclaimed) pods: requests of 4 regular pods\n",
			"  check: the terms evaluate to 6, the published value.\n",
			"  regular-requests  minus       40Gi   24Gi     regular (not reclaimed) pods: requests of 4 regular pods\n",
			"  check: the terms evaluate to 24Gi, the published value.\n",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("explain lacks %q", want)
			}
		}

		from := time.Now()
		out, err = plugin("explain", stale)
		ages := staleAges(from, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		if !anyOf(func(age string) bool {
			return strings.Contains(out, "Status: Stale (annotation-too-old): annotation written "+age)
		}, ages) {
			t.Errorf("explain %s lacks the stale status with the age %v:\n%s", stale, ages, out)
		}
		for _, want := range []string{"In effect:     cpu 0, memory 0 (stale)\n",
			"The extender offers no room and the webhook writes only what reclaimed pods held", "  check: the terms evaluate to 3, the published value.\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("explain %s lacks %q:\n%s", stale, want, out)
			}
		}

		_, err = plugin("explain", fresh, "--resource-domain", "other.example.com")
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("node %q has no other.example.com/reclaimable annotation", fresh)) {
			t.Errorf("explain under another domain: %v", err)
		}
	})

	t.Run("pods shows where reclaimed pods run and why the others wait", func(t *testing.T) {
		var out string
		var err error
		// kwok's Running and the scheduler's FailedScheduling Event both
		// come from a component's loop: allow for a busy machine.
		took, ok := framework.Poll(90*time.Second, 500*time.Millisecond, func() bool {
			out, err = plugin("pods", "-n", ns)
			return err == nil && strings.Contains(out, "Running") && strings.Contains(out, "Insufficient "+string(names.CPU))
		})
		t.Logf("after %s:\n%s", took.Round(time.Millisecond), out)
		if !ok {
			t.Fatalf("pods never showed batch-1 running and too-big's FailedScheduling message (err %v)", err)
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 3 {
			t.Fatalf("want a header and 2 pods:\n%s", out)
		}
		if row := strings.Fields(lines[1]); strings.Join(row[:5], " ") != "batch-1 "+fresh+" 1500m 2Gi Running" {
			t.Errorf("batch-1 row %q", lines[1])
		}
		if row := strings.Fields(lines[2]); strings.Join(row[:5], " ") != "too-big <none> 100 1Gi Pending" {
			t.Errorf("too-big row %q", lines[2])
		}

		out, err = plugin("pods", "-A", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		var l kubectlreclaim.PodList
		if err := json.Unmarshal([]byte(out), &l); err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != 2 || l.Items[0].Requested != (reclaimable.Resources{CPUMilli: 1500, MemoryBytes: 2 << 30}) ||
			l.Items[1].Node != "" || !strings.Contains(l.Items[1].Waiting, "Insufficient") {
			t.Errorf("pods -A -o json: %s", out)
		}
	})

	t.Run("lists follow every page of the API server; -o name prints kind/name", func(t *testing.T) {
		// Pages of one item: every node, pod and event comes after a continue token.
		paged, err := plugin("nodes", "-o", "json", "--chunk-size", "1")
		if err != nil {
			t.Fatal(err)
		}
		var l kubectlreclaim.NodeList
		if err := json.Unmarshal([]byte(paged), &l); err != nil {
			t.Fatal(err)
		}
		if len(l.Items) != 2 || l.Items[0].Held != (reclaimable.Resources{CPUMilli: 1500, MemoryBytes: 2 << 30}) || l.Kind != "NodeList" {
			t.Errorf("nodes --chunk-size 1: %s", paged)
		}
		out, err := plugin("pods", "-A", "-o", "name", "--chunk-size", "1")
		if err != nil {
			t.Fatal(err)
		}
		if out != "pod/batch-1\npod/too-big\n" {
			t.Errorf("pods -A -o name --chunk-size 1: %q", out)
		}
		out, err = plugin("pods", "-n", ns, "--chunk-size", "1", "--no-headers", "-o", "wide")
		if err != nil {
			t.Fatal(err)
		}
		// -o wide ends with SCHEDULER and REWRITTEN (none: no profile here).
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if f := strings.Fields(lines[len(lines)-1]); len(lines) != 2 || !strings.Contains(lines[1], "Insufficient") ||
			len(f) < 2 || f[len(f)-2] != corev1.DefaultSchedulerName || f[len(f)-1] != "<none>" {
			t.Errorf("pods --no-headers -o wide:\n%s", out)
		}
		out, err = plugin("nodes", "-o", "name", "--sort-by", "free-cpu")
		if err != nil {
			t.Fatal(err)
		}
		if want := "node/" + fresh + "\nnode/" + stale + "\n"; out != want {
			t.Errorf("nodes -o name: %q, want %q", out, want)
		}
	})

	t.Run("the built binary works as a kubectl plugin", func(t *testing.T) {
		start := time.Now()
		<-built
		if buildErr != nil {
			t.Fatal(buildErr)
		}
		t.Logf("waited %s for the build", time.Since(start).Round(time.Millisecond))
		cmd := exec.Command(filepath.Join(binDir, "kubectl-reclaim"), "nodes", "--stale-after=1h", kubeconfig)
		if kubectl, err := exec.LookPath("kubectl"); err == nil {
			cmd = exec.Command(kubectl, "reclaim", "nodes", "--stale-after=1h", kubeconfig)
			cmd.Env = append(os.Environ(), "PATH="+binDir+string(os.PathListSeparator)+os.Getenv("PATH"))
		}
		out, err := cmd.CombinedOutput()
		t.Logf("%s:\n%s", strings.Join(cmd.Args, " "), out)
		if err != nil {
			t.Fatal(err)
		}
		// With --stale-after=1h the old annotation counts again.
		if !strings.Contains(string(out), "3/8Gi") || strings.Contains(string(out), "Stale") {
			t.Errorf("--stale-after=1h did not make %s fresh", stale)
		}
	})

	t.Run("a released Lease reads as the webhook and the extender read it", func(t *testing.T) {
		// The Tracker of the roles, watching since before the release.
		tctx, cancel := context.WithCancel(ctx)
		defer cancel()
		tracker := leaderlease.New(c.Client, leaderlease.DefaultNamespace, leaderlease.DefaultName)
		go tracker.Run(tctx)
		if !cache.WaitForCacheSync(tctx.Done(), tracker.HasSynced) {
			t.Fatal("the Lease tracker never synced")
		}
		leases := c.Client.CoordinationV1().Leases(leaderlease.DefaultNamespace)
		l, err := leases.Get(ctx, leaderlease.DefaultName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		renewed := time.Now().Truncate(time.Microsecond)
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = ptr.To("publisher-a"), ptr.To[int32](60)
		l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(renewed))
		if l, err = leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The renewal has reached the tracker when it shortens the deadline
		// (the Lease before it was good for two hours).
		if _, ok := framework.Poll(30*time.Second, 50*time.Millisecond, func() bool { return !tracker.Alive(renewed.Add(150 * time.Second)) }); !ok {
			t.Fatal("the renewal never reached the tracker")
		}
		// The release client-go's leader election writes when its holder
		// stops, dated 10 s back: judged alone it expired 8 s ago.
		l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds = nil, ptr.To[int32](1)
		l.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now().Add(-10 * time.Second)))
		if l, err = leases.Update(ctx, l, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if d, _ := leaderlease.Deadline(l); !d.Before(time.Now()) {
			t.Fatalf("control: the release alone must have expired, its deadline is %s", d)
		}
		// --stale-after=1h: the annotation's own age must not be what
		// makes the node stale, however long the subtests before took.
		out, err := plugin("nodes", "-o", "json", "--stale-after=1h")
		if err != nil {
			t.Fatal(err)
		}
		var l2 kubectlreclaim.NodeList
		if err := json.Unmarshal([]byte(out), &l2); err != nil {
			t.Fatal(err)
		}
		if lr := l2.PublisherLease; lr == nil || !lr.Alive || lr.RenewTime == nil || !lr.RenewTime.Equal(renewed) {
			t.Errorf("kubectl reclaim nodes: publisherLease %+v, want alive, renewed at %s (the renewal before the release)", lr, renewed)
		}
		for _, n := range l2.Items {
			if n.Name == fresh && n.StaleReason != "" {
				t.Errorf("%s reads stale (%s: %s) after the release; the roles count its room", fresh, n.StaleReason, n.StaleDetail)
			}
		}
		if !tracker.Alive(time.Now()) {
			t.Error("the roles' tracker counts the released Lease as expired")
		}
	})
}
