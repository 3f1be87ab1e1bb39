package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kube-reclaim/kube-reclaim/internal/kubectlreclaim"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

// simReader is the user of the read-only kubeconfig: get/list on nodes,
// pods and metrics.k8s.io, nothing else.
const simReader = "kube-reclaim-simulate-reader"

// simAuditPolicy records every request of the reader, reads included, so the
// test sees both what simulate read and that it wrote nothing.
const simAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  users: ["` + simReader + `"]
- level: None
`

// The policy installed for the publisher (and read back by --from-cluster),
// and a second one with larger margins.
const (
	simPolicy = `default:
  policy: usage
  window: 1m
  peak: max
  cpu: {margin: 0.35}
  memory: {margin: 0.35}
`
	simLargerMargin = `default:
  policy: usage
  window: 1m
  peak: max
  cpu: {margin: 0.5}
  memory: {margin: 0.5}
`
)

// TestKubectlReclaimSimulate runs `kubectl reclaim simulate` on the real
// local cluster: first with kube-reclaim not installed, under a kubeconfig
// that may only get and list nodes, pods and metrics.k8s.io; then with the
// publisher running, against what it published; and on bad input. The
// reader's requests are checked in the apiserver's audit log: reads only.
func TestKubectlReclaimSimulate(t *testing.T) {
	ctx := context.Background()
	// Node 2's reclaimed pod is granted and uses 3 cores / 2 GiB (not regular
	// work: its usage counts up to its grant).
	c, nodes := usedNodes{nodePrefix: "sim", podPrefix: "sim-", grantCPU: "3000", grantMem: "2Gi", useCPU: "3", useMem: "2Gi"}.
		start(t, cluster.Options{MetricResolution: 10 * time.Second, AuditPolicy: simAuditPolicy})
	const allocCPU, allocMem = usedNodeCPU, usedNodeMem
	usage := map[string][2]int64{}
	for i, n := range nodes {
		usage[n] = regularUsage[i]
	}
	reader, readerConfig := readOnlyUser(t, c)

	run := func(kubeconfig string, args ...string) (string, string, int) {
		var out, errOut bytes.Buffer
		code := kubectlreclaim.Main(ctx, append(append([]string{"simulate"}, args...), "--kubeconfig="+kubeconfig),
			genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut})
		return out.String(), errOut.String(), code
	}
	report := func(t *testing.T, kubeconfig string, args ...string) kubectlreclaim.SimulationReport {
		t.Helper()
		out, errOut, code := run(kubeconfig, append(args, "-o", "json")...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errOut)
		}
		var r kubectlreclaim.SimulationReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		return r
	}
	near := func(got, want, tol int64) bool { return got >= want-tol && got <= want+tol }
	// Usage as metrics-server serves it, for the formula: every pod measured
	// at what the test set (rates carry a few millicores of noise).
	if _, ok := framework.Poll(3*time.Minute, 2*time.Second, func() bool {
		for _, n := range nodes {
			m, err := c.Metrics.MetricsV1beta1().NodeMetricses().Get(ctx, n, metav1.GetOptions{})
			want := usage[n][0] + cluster.NodeBaselineCPUMilli
			if n == nodes[2] {
				want += 3000
			}
			if err != nil || !near(m.Usage.Cpu().MilliValue(), want, 20) {
				return false
			}
		}
		pm, err := c.Metrics.MetricsV1beta1().PodMetricses("default").List(ctx, metav1.ListOptions{})
		return err == nil && len(pm.Items) == 4
	}); !ok {
		t.Fatal("metrics-server never reported the usage the test set")
	}
	readsFrom := time.Now()

	t.Run("without kube-reclaim, a read-only kubeconfig prints what the default policy would reclaim and the summary", func(t *testing.T) {
		if _, err := c.Client.CoreV1().ConfigMaps("kube-reclaim").Get(ctx, "kube-reclaim-policy", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the policy ConfigMap exists (%v): kube-reclaim is installed", err)
		}
		out, errOut, code := run(readerConfig)
		t.Logf("kubectl reclaim simulate (read-only kubeconfig):\n%s%s", out, errOut)
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
		for _, want := range []string{"RECLAIMABLE", "SUMMARY", "share of allocatable", "nodes' worth", "pods of 2/4Gi", "one usage sample"} {
			if !strings.Contains(out, want) {
				t.Errorf("output lacks %q", want)
			}
		}
		if strings.Contains(out, "PUBLISHED") {
			t.Error("shows a PUBLISHED column on a cluster where nothing is published")
		}
		r := report(t, readerConfig)
		var total reclaimable.Resources
		for _, it := range r.Items {
			u := usage[it.Name]
			wantCPU, wantMem := expectedUsagePolicy(allocCPU, allocMem, 0.35, u[0], u[1])
			if !near(it.Reclaimable.CPUMilli, wantCPU, 20) || !near(it.Reclaimable.MemoryBytes, wantMem, 1<<20) || it.Published != nil {
				t.Errorf("node %s: reclaimable %+v published %v, want about cpu=%d mem=%d (the usage formula) and nothing published",
					it.Name, it.Reclaimable, it.Published, wantCPU, wantMem)
			}
			total = total.Add(it.Reclaimable)
		}
		if len(r.Items) != 3 || r.Installed || r.Summary.Reclaimable != total || r.Summary.PodsFit == 0 {
			t.Errorf("report: %d nodes, installed %v, summary %+v (total %+v)", len(r.Items), r.Installed, r.Summary, total)
		}
	})

	t.Run("a broken policy file and an unknown node fail clearly with a non-zero exit", func(t *testing.T) {
		broken := filepath.Join(t.TempDir(), "broken.yaml")
		if err := os.WriteFile(broken, []byte("default:\n  cpu: {margin: 1.5}\n  windw: 5m\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			args []string
			want []string
		}{
			{[]string{"-f", broken}, []string{"policy file " + broken, "margin", "windw"}},
			{[]string{"sim-no-such-node"}, []string{`"sim-no-such-node" not found`}},
		} {
			_, errOut, code := run(readerConfig, tc.args...)
			t.Logf("simulate %s: exit %d: %s", strings.Join(tc.args, " "), code, strings.TrimSpace(errOut))
			if code == 0 {
				t.Errorf("simulate %v: exit 0", tc.args)
			}
			for _, w := range tc.want {
				if !strings.Contains(errOut, w) {
					t.Errorf("simulate %v: error lacks %q", tc.args, w)
				}
			}
		}
	})

	t.Run("with the publisher running, --from-cluster agrees with what it published and a larger margin lowers every node", func(t *testing.T) {
		framework.CreateNamespace(t, c, "kube-reclaim")
		if _, err := c.Client.CoreV1().ConfigMaps("kube-reclaim").Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Namespace: "kube-reclaim", Name: "kube-reclaim-policy"},
			Data:       map[string]string{"policy.yaml": simPolicy},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		cfgFile, larger := filepath.Join(dir, "policy.yaml"), filepath.Join(dir, "larger.yaml")
		for f, body := range map[string]string{cfgFile: simPolicy, larger: simLargerMargin} {
			if err := os.WriteFile(f, []byte(body), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		// Every reading of node usage from before the publisher starts: what
		// may move between the publisher's readings and simulate's.
		moved := newUsageSpread()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				if l, err := c.Metrics.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{}); err == nil {
					for i := range l.Items {
						moved.add(l.Items[i].Name, l.Items[i].Usage)
					}
				}
				if l, err := c.Metrics.MetricsV1beta1().PodMetricses("default").List(ctx, metav1.ListOptions{}); err == nil {
					for i := range l.Items {
						var u corev1.ResourceList
						if len(l.Items[i].Containers) == 1 {
							u = l.Items[i].Containers[0].Usage
						}
						moved.add("default/"+l.Items[i].Name, u)
					}
				}
				select {
				case <-stop:
					return
				case <-time.After(2 * time.Second):
				}
			}
		}()
		defer func() { close(stop); wg.Wait() }()
		framework.StartRole(t, c, "publisher", "publisher", "--config="+cfgFile, "--period=5s",
			"--metrics-stale-after=30s", "--leader-elect=false")

		if _, ok := framework.Poll(2*time.Minute, time.Second, func() bool {
			for _, n := range nodes {
				if v := view(t, c, n); v.Ann == nil || v.Ann.ZeroReason != "" || v.Ann.CPUMilli == 0 || !v.Fresh.Fresh {
					return false
				}
			}
			return true
		}); !ok {
			t.Fatal("the publisher never published every node")
		}
		before, err := framework.Views(ctx, c, nodes, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		// A short sampling run: a progress line per reading (stderr is not
		// a terminal), and the output says how many readings it used.
		out, errOut, code := run(c.Kubeconfig(), "--from-cluster", "--metrics-stale-after=30s", "--duration=10s", "--interval=5s")
		t.Logf("kubectl reclaim simulate --from-cluster --duration=10s --interval=5s:\n%s%s", errOut, out)
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
		if !strings.Contains(errOut, "sample 1/3") || !strings.Contains(errOut, "sample 3/3") || !strings.Contains(out, "3 samples over 10s") {
			t.Errorf("no progress line per sample, or the output does not say how many readings it used")
		}
		r := report(t, c.Kubeconfig(), "--from-cluster", "--metrics-stale-after=30s", "--compare", larger)
		after, err := framework.Views(ctx, c, nodes, 10*time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if !r.Installed || r.Policy != "ConfigMap kube-reclaim/kube-reclaim-policy" {
			t.Errorf("installed %v, policy %q", r.Installed, r.Policy)
		}
		var largest struct {
			node     string
			cpu, mem int64
		}
		for _, it := range r.Items {
			// The publisher may have written between the two readings of
			// the annotation: either value counts.
			diff := func(get func(reclaimable.Resources) int64) int64 {
				d := int64(-1)
				for _, v := range []framework.NodeView{before[it.Name], after[it.Name]} {
					if v.Ann != nil {
						x := get(it.Reclaimable) - get(v.Ann.Room())
						if d < 0 || abs(x) < d {
							d = abs(x)
						}
					}
				}
				return d
			}
			dCPU := diff(func(r reclaimable.Resources) int64 { return r.CPUMilli })
			dMem := diff(func(r reclaimable.Resources) int64 { return r.MemoryBytes })
			// Regular usage comes from the node's samples and those of its
			// pods, regular and reclaimed (aligned in time): any of them may
			// move. (A 1m difference was seen with the node's readings
			// unchanged throughout.)
			tolCPU, tolMem := moved.spread(it.Name)
			for _, pod := range map[string][]string{nodes[0]: {"sim-reg-0"}, nodes[1]: {"sim-reg-1"}, nodes[2]: {"sim-rec-2", "sim-reg-2"}}[it.Name] {
				podCPU, podMem := moved.spread("default/" + pod)
				tolCPU, tolMem = tolCPU+podCPU, tolMem+podMem
			}
			t.Logf("node %s: simulated %s/%d, published %+v, difference cpu %dm memory %d B; regular usage moved by up to cpu %dm memory %d B",
				it.Name, kubectlreclaim.FormatCPU(it.Reclaimable.CPUMilli), it.Reclaimable.MemoryBytes, after[it.Name].Ann.Room(), dCPU, dMem, tolCPU, tolMem)
			if dCPU < 0 || dCPU > tolCPU || dMem > tolMem {
				t.Errorf("node %s: simulate differs from the published value by cpu %dm memory %d B, more than the usage moved (cpu %dm, memory %d B)",
					it.Name, dCPU, dMem, tolCPU, tolMem)
			}
			if largest.node == "" || dCPU > largest.cpu || dMem > largest.mem {
				largest.node, largest.cpu, largest.mem = it.Name, max(largest.cpu, dCPU), max(largest.mem, dMem)
			}
			if it.Published == nil || it.Difference == nil {
				t.Errorf("node %s: the report lacks the published value or the difference", it.Name)
			}
			// Same input, margins 35% -> 50%: 15% of allocatable less, exactly
			// (give or take the rounding of each result).
			if it.Compare == nil {
				t.Fatalf("node %s: no --compare result", it.Name)
			}
			if ch := it.Compare.Change; !near(ch.CPUMilli, -allocCPU*15/100, 1) || !near(ch.MemoryBytes, -int64(allocMem)*15/100, 1) {
				t.Errorf("node %s: the larger margin changes %+v, want -15%% of allocatable on both", it.Name, *ch)
			}
		}
		t.Logf("largest difference between simulate and the publisher: cpu %dm, memory %d B (node %s)", largest.cpu, largest.mem, largest.node)
	})

	t.Run("an unreachable metrics API fails clearly with a non-zero exit", func(t *testing.T) {
		if err := c.StopComponent(cluster.MetricsServer); err != nil {
			t.Fatal(err)
		}
		if _, ok := framework.Poll(30*time.Second, 500*time.Millisecond, func() bool {
			_, err := c.Metrics.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
			return err != nil
		}); !ok {
			t.Fatal("the metrics API still answers with metrics-server stopped")
		}
		out, errOut, code := run(readerConfig)
		t.Logf("simulate without metrics-server: exit %d: %s", code, strings.TrimSpace(errOut))
		if code == 0 || !strings.Contains(errOut, "metrics.k8s.io") || !strings.Contains(errOut, "metrics-server") || out != "" {
			t.Errorf("exit %d, stdout %q, stderr %q: want a non-zero exit naming metrics.k8s.io and metrics-server", code, out, errOut)
		}
	})

	t.Run("the read-only user only read nodes, pods and metrics, and wrote nothing", func(t *testing.T) {
		const controlNS = "sim-write-control"
		isControl := func(e *framework.AuditEvent) bool {
			return e.Verb == "create" && e.ObjectRef.Resource == "configmaps" && e.ObjectRef.Namespace == controlNS
		}
		byReader := func() []framework.AuditEvent {
			return framework.AuditEvents(t, c, readsFrom, time.Now(), func(e *framework.AuditEvent) bool { return e.User.Username == simReader })
		}
		framework.ExpectAbsence(t, framework.Absence{Window: 2 * framework.AuditFlush, Every: 500 * time.Millisecond,
			// A write the reader tries on purpose: refused, and recorded.
			Control: func() error {
				_, err := reader.CoreV1().ConfigMaps(controlNS).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x"}}, metav1.CreateOptions{})
				if !apierrors.IsForbidden(err) {
					return fmt.Errorf("the reader's write was not refused: %w", err)
				}
				return nil
			},
			ControlAt: 2 * framework.AuditFlush,
			// The audit log is written in batches, later on a busy machine:
			// the looks go on until the control's event is written.
			ControlWithin: 30 * time.Second,
			Look: func(time.Duration) ([]string, bool) {
				var v []string
				control := false
				for _, e := range byReader() {
					switch {
					case isControl(&e):
						control = true
					case e.Verb != "get" && e.Verb != "list" && e.Verb != "watch":
						v = append(v, fmt.Sprintf("%s %s/%s %s/%s (%d)", e.Verb, e.ObjectRef.APIGroup, e.ObjectRef.Resource, e.ObjectRef.Namespace, e.ObjectRef.Name, e.ResponseStatus.Code))
					}
				}
				return v, control
			},
		})
		read := map[string]int{}
		for _, e := range byReader() {
			if !isControl(&e) {
				read[e.Verb+" "+e.ObjectRef.APIGroup+"/"+e.ObjectRef.Resource]++
			}
		}
		t.Logf("the reader's requests: %v", read)
		for k := range read {
			switch k {
			case "get /nodes", "list /nodes", "list /pods", "list metrics.k8s.io/nodes", "list metrics.k8s.io/pods":
			default:
				t.Errorf("unexpected request by the read-only user: %s", k)
			}
		}
		if read["list metrics.k8s.io/nodes"] == 0 || read["list /pods"] == 0 {
			t.Errorf("the audit log shows no reads by the reader (%v): it would not show its writes either", read)
		}
	})
}

// readOnlyUser creates the reader's RBAC (get/list on nodes, pods and
// metrics.k8s.io) and a kubeconfig with a client certificate for it; it
// returns a client and the kubeconfig's path.
func readOnlyUser(t *testing.T, c *cluster.Cluster) (kubernetes.Interface, string) {
	t.Helper()
	ctx := context.Background()
	read := []string{"get", "list"}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: simReader}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes", "pods"}, Verbs: read},
		{APIGroups: []string{"metrics.k8s.io"}, Resources: []string{"nodes", "pods"}, Verbs: read},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: simReader},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: simReader},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: simReader}}}
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kp, err := c.CA().Issue(cluster.CertSpec{CommonName: simReader, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	path, client := kubeconfigAs(t, c, "reader", &clientcmdapi.AuthInfo{ClientCertificateData: kp.CertPEM, ClientKeyData: kp.KeyPEM})
	// RBAC reaches the authorizer through an informer.
	if _, ok := framework.Poll(30*time.Second, 200*time.Millisecond, func() bool {
		_, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{Limit: 1})
		return err == nil
	}); !ok {
		t.Fatal("the reader cannot list nodes")
	}
	return client, path
}

// usageSpread keeps, per node or pod ("namespace/name"), the range of the
// usage readings seen.
type usageSpread struct {
	mu             sync.Mutex
	minCPU, maxCPU map[string]int64
	minMem, maxMem map[string]int64
}

func newUsageSpread() *usageSpread {
	return &usageSpread{minCPU: map[string]int64{}, maxCPU: map[string]int64{}, minMem: map[string]int64{}, maxMem: map[string]int64{}}
}

func (s *usageSpread) add(name string, usage corev1.ResourceList) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cpu, mem := usage.Cpu().MilliValue(), usage.Memory().Value()
	if _, ok := s.minCPU[name]; !ok {
		s.minCPU[name], s.maxCPU[name], s.minMem[name], s.maxMem[name] = cpu, cpu, mem, mem
	}
	s.minCPU[name], s.maxCPU[name] = min(s.minCPU[name], cpu), max(s.maxCPU[name], cpu)
	s.minMem[name], s.maxMem[name] = min(s.minMem[name], mem), max(s.maxMem[name], mem)
}

// spread is how far the cpu and memory usage of a node or pod moved across
// the readings.
func (s *usageSpread) spread(name string) (cpu, mem int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxCPU[name] - s.minCPU[name], s.maxMem[name] - s.minMem[name]
}

func abs(x int64) int64 {
	if x < 0 {
		return -x
	}
	return x
}
