package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kube-reclaim/kube-reclaim/internal/policyfile"
	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/publisher"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

// The configuration of the suite: deploy/default as deployed, with the
// publisher's periods shortened so that the tests do not wait minutes
// between looks, and readers' --stale-after at 2 minutes.
const (
	nodeCount         = 10
	heartbeat         = 5 * time.Second // kwok status heartbeat, plus up to half as jitter
	metricResolution  = 10 * time.Second
	period            = 5 * time.Second // publisher --period
	metricsStaleAfter = 30 * time.Second
	refreshInterval   = 30 * time.Second
	staleAfter        = 2 * time.Minute // webhook and extender --stale-after
	// The publisher's leader election runs with its defaults (15s/10s/2s):
	// shorter deadlines lose the lease on a busy 2-core machine.
	leaseDuration = 15 * time.Second
	retryPeriod   = 2 * time.Second
	// window replaces the deployed policy's 5m window, so that room freed by
	// falling usage comes back within the suite's time.
	window = "1m"

	appsNS = "apps"
)

// decreaseThreshold is the publisher's --decrease-threshold default, which
// the suite runs with: a decrease smaller than this fraction of the
// published value is treated as measurement noise.
var decreaseThreshold = publisher.NewOptions().DecreaseThreshold

// Every node runs one regular service pod (2 cores / 4 GiB requested) whose
// usage the tests set; this is its usage between tests.
var defaultUsage = usage{cpu: 2000, mem: 8 * gib}

type usage struct{ cpu, mem int64 } // millicores, bytes

func (u usage) String() string { return fmt.Sprintf("%dm/%s", u.cpu, mib(u.mem)) }

func TestMain(m *testing.M) {
	code := m.Run()
	framework.RemoveBinary()
	os.Exit(code)
}

// env is the cluster and stack every subtest shares. A subtest that injects
// a fault undoes it (t.Cleanup) before the next one starts.
type env struct {
	c        *cluster.Cluster
	s        *stack.Stack
	nodes    []string
	settings policy.Settings // the default policy in force
}

// TestE2E runs the whole system on one local cluster: 10 kwok nodes with a
// regular service each, metrics-server, kube-scheduler with the extender,
// and publisher, webhook and extender as processes configured from deploy/.
func TestE2E(t *testing.T) {
	e := setup(t)
	t.Run("truthfulness: published capacity never exceeds what usage leaves and follows a spike within a period", e.testTruthfulness)
	t.Run("webhook down 2 minutes: heartbeats go on, no node NotReady, published values intact, convergence after", e.testWebhookDown)
	t.Run("metrics-server down: zero within the bound, reclaimed pods wait, recovery", e.testMetricsServerDown)
	t.Run("publisher failover: takeover within the lease, both down past stale-after means zero room", e.testPublisherFailover)
	t.Run("extender down: reclaimed pods wait, regular pods schedule, placed without over-booking when back", e.testExtenderDown)
	t.Run("burst: 200 reclaimed pods onto scarce, changing room never over-book a node", e.testBurst)
	t.Run("bad input through the apiserver: clear errors, nothing lost, nothing denied that should pass", e.testBadInput)
	t.Run("eviction: a CPU rise under batch pods evicts nothing; memory pressure evicts the fewest lowest-priority ones with Events; a PodDisruptionBudget blocks without a hot loop", e.testEviction)
}

func setup(t *testing.T) *env {
	ctx := context.Background()
	start := time.Now()
	ports, err := stack.NewPorts()
	if err != nil {
		t.Fatal(err)
	}
	schedCfg, err := ports.SchedulerConfig()
	if err != nil {
		t.Fatal(err)
	}
	c := cluster.StartForTest(t, cluster.Options{HeartbeatInterval: heartbeat, MetricResolution: metricResolution,
		SchedulerConfig: schedCfg, AuditPolicy: framework.NodeWritesAuditPolicy})
	e := &env{c: c}
	framework.CreateNamespace(t, c, appsNS)
	e.nodes = framework.AddReadyNodes(t, c, nodeCount, cluster.NodeSpec{NamePrefix: "e2e", CPU: resource.MustParse("16"), Memory: resource.MustParse("64Gi")}, 2*time.Minute)
	for i, n := range e.nodes {
		framework.CreatePod(t, c, framework.RegularPod(appsNS, svcPod(i), n, "2", "4Gi"))
	}
	e.setUsage(t, func(int) usage { return defaultUsage })

	dep, err := stack.LoadDeployed("default")
	if err != nil {
		t.Fatal(err)
	}
	pol := strings.Replace(dep.Policy, "window: 5m", "window: "+window, 1)
	if pol == dep.Policy {
		t.Fatalf("the deployed policy no longer says `window: 5m`; adapt the suite:\n%s", dep.Policy)
	}
	cfg, _, err := policyfile.Parse([]byte(pol))
	if err != nil {
		t.Fatalf("the deployed policy with a %s window is invalid: %v", window, err)
	}
	e.settings = cfg.Default
	e.s, err = stack.Start(ctx, c, framework.KubeReclaim(t), ports, stack.Options{Policy: pol, Extra: map[string][]string{
		stack.Publisher: {"--period=" + period.String(), "--metrics-stale-after=" + metricsStaleAfter.String(),
			"--refresh-interval=" + refreshInterval.String()},
		stack.Webhook:  {"--stale-after=" + staleAfter.String()},
		stack.Extender: {"--stale-after=" + staleAfter.String()},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range []string{stack.Publisher, stack.Webhook, stack.Extender} {
		t.Logf("kube-reclaim %s", strings.Join(e.s.Args(r), " "))
	}
	e.waitPublished(t, 4*time.Minute)
	t.Logf("setup: cluster, %d nodes, stack and a first publication of every node in %s", nodeCount, time.Since(start).Round(time.Second))
	return e
}

func svcPod(i int) string { return fmt.Sprintf("svc-%d", i) }

// setUsage sets the usage of every node's service pod.
func (e *env) setUsage(t *testing.T, u func(i int) usage) {
	t.Helper()
	for i := range e.nodes {
		if err := e.setNodeUsage(i, u(i)); err != nil {
			t.Fatal(err)
		}
	}
}

func (e *env) setNodeUsage(i int, u usage) error {
	return e.c.SetPodUsage(context.Background(), appsNS, svcPod(i), fmt.Sprintf("%dm", u.cpu), fmt.Sprint(u.mem))
}

// waitPublished waits until every node carries a fresh, non-zero annotation
// computed from metrics (no zero reason) that status agrees with.
func (e *env) waitPublished(t *testing.T, timeout time.Duration) {
	t.Helper()
	var missing []string
	took, ok := framework.Poll(timeout, time.Second, func() bool {
		vs, err := views(context.Background(), e.c, e.nodes)
		if err != nil {
			return false
		}
		missing = missing[:0]
		for _, n := range e.nodes {
			v := vs[n]
			if !v.Fresh.Fresh || v.Ann.ZeroReason != "" || v.Ann.CPUMilli == 0 || !v.StatusMatchesAnnotation() {
				missing = append(missing, fmt.Sprintf("%s (%s %s)", n, v.Fresh.Reason, v.Raw))
			}
		}
		return len(missing) == 0
	})
	if !ok {
		t.Fatalf("not every node published within %s: %v", timeout, missing)
	}
	t.Logf("every node published, fresh and in status, after %s", took.Round(100*time.Millisecond))
}

// expectedMax is the most the usage policy may publish for a node whose
// regular work uses u on top of the kwok node baseline:
// allocatable x (1 - margin) - usage, never below zero.
func (e *env) expectedMax(v framework.NodeView, u usage) reclaimable.Resources {
	cpu := v.AllocCPU - marginOf(v.AllocCPU, e.settings.CPU.Margin) - u.cpu - cluster.NodeBaselineCPUMilli
	mem := v.AllocMem - marginOf(v.AllocMem, e.settings.Memory.Margin) - u.mem - cluster.NodeBaselineMemoryBytes
	return reclaimable.Resources{CPUMilli: max(cpu, 0), MemoryBytes: max(mem, 0)}
}

// restartRole restarts a role of the stack with extra flags appended to its
// deployed arguments (none: exactly as the stack started it).
func (e *env) restartRole(t *testing.T, role string, extra ...string) {
	t.Helper()
	if err := e.c.StopComponent(role); err != nil {
		t.Fatal(err)
	}
	args := append(append([]string(nil), e.s.Args(role)...), extra...)
	if err := e.c.StartProcess(role, e.s.Bin, args...); err != nil {
		t.Fatal(err)
	}
	if err := e.s.WaitReady(context.Background(), role, 90*time.Second); err != nil {
		t.Fatal(err)
	}
}

// useNamespace creates ns for a subtest; when the subtest ends, its pods are
// deleted and the stack is brought back as it started (after the subtest's
// own cleanups, which run first).
func (e *env) useNamespace(t *testing.T, ns string) {
	t.Helper()
	framework.CreateNamespace(t, e.c, ns)
	t.Cleanup(func() {
		framework.DeleteAllPods(t, e.c, ns)
		e.ensureStack(t)
	})
}

// ensureStack brings every role back as the stack started it, and
// metrics-server too; subtests call it in t.Cleanup.
func (e *env) ensureStack(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if p := e.c.Process(cluster.MetricsServer); p != nil && !p.Running() {
		if err := e.c.StartComponent(cluster.MetricsServer); err != nil {
			t.Errorf("restarting metrics-server: %v", err)
		}
	}
	for _, r := range []string{stack.Publisher, stack.Webhook, stack.Extender} {
		p := e.c.Process(r)
		if p != nil && p.Running() && strings.Join(p.Args, " ") == strings.Join(e.s.Args(r), " ") {
			continue
		}
		_ = e.c.StopComponent(r)
		if err := e.c.StartProcess(r, e.s.Bin, e.s.Args(r)...); err != nil {
			t.Errorf("restarting %s: %v", r, err)
			continue
		}
		if err := e.s.WaitReady(ctx, r, 90*time.Second); err != nil {
			t.Errorf("restarting %s: %v", r, err)
		}
	}
}
