package integration

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-reclaim/kube-reclaim/internal/ociimage"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

// installSwitch is what the plugin topology's subtest needs of the install
// test: the running build and the user's kustomization to switch.
type installSwitch struct {
	annotated     time.Time
	tag           string // the build the cluster runs
	kustomization string
	kubectl       string
	nodes         map[string]*cluster.RealNode
}

// testInstallPluginScheduler switches the same install to the plugin
// topology the way deploy/README.md ("Choosing the scheduler topology")
// says: `kubectl apply -k` of deploy/plugin-scheduler. Every
// kube-reclaim-scheduler pod then runs one process, the image's
// kube-reclaim-scheduler binary, and a new pod leads. A Job opted in by its
// label is placed, bound by kube-scheduler's own binder and enforced as in
// the extender topology; a burst of reclaimed pods is placed without a look
// finding a node over-booked, and a pod larger than any room stays Pending
// with the plugin's reason.
func testInstallPluginScheduler(t *testing.T, c *cluster.Cluster, s installSwitch) {
	if s.annotated.IsZero() {
		t.Skip("no node annotated")
	}
	image := framework.InstallImageRepo + ":" + s.tag
	command := filepath.Base(ociimage.PluginScheduler)
	before := map[string]bool{}
	for _, p := range rolePods(t, c, "scheduler") {
		before[p.Name] = true
	}
	ob := startInstallObserver(t, c, 500*time.Millisecond)
	defer ob.cancel()
	if err := writeInstallKustomization(s.kustomization, "plugin-scheduler", s.tag); err != nil {
		t.Fatal(err)
	}
	applied := time.Now()
	changed := applyKustomization(t, c, s.kubectl, s.kustomization)
	t.Logf("kubectl apply -k deploy/plugin-scheduler: %s (the rest unchanged)", strings.Join(changed, ", "))

	// Rolled out: every scheduler pod new, with one container running the
	// plugin binary of the image, and one of them leading.
	_, leader, took, ok := waitRollout(t, c, image, installSchedulerLease, func(p *corev1.Pod) bool {
		cs := p.Spec.Containers
		return !before[p.Name] && len(cs) == 1 && len(cs[0].Command) > 0 && cs[0].Command[0] == command
	}, "scheduler")
	if !ok {
		t.Fatalf("the scheduler not switched to %s of %s within %s:\n%s", command, image, took,
			kubectlRun(t, c, s.kubectl, "-n", installNamespace, "get", "pods", "-o", "wide"))
	}
	t.Logf("plugin topology: every scheduler pod runs %s alone, %s leads, %s after apply", command, leader, time.Since(applied).Round(time.Millisecond))

	testInstallJob(t, c, s.nodes, s.kubectl, "install-plugin-batch", installPluginAgent)

	const (
		n   = 8
		mem = 32 << 20
		ns  = "install-plugin"
	)
	cpu, rooms := burstCPU(t, c, n, 0, 0.7)
	framework.CreateNamespace(t, c, ns)
	defer framework.DeleteAllPods(t, c, ns)
	started := time.Now()
	b := startBurst(c, ns, "plugin", n, 150*time.Millisecond, cpu, mem)
	defer func() { _, _, _ = b.stop() }()
	took, ok = framework.Poll(time.Minute, 250*time.Millisecond, func() bool {
		return len(framework.MustPods(t, c, ns).BoundTo) == n
	})
	created, retried, berr := b.stop()
	if berr != nil || !ok {
		t.Fatalf("burst: %d of %d created (%v), %d bound after %s; refused creations %v", created, n, berr,
			len(framework.MustPods(t, c, ns).BoundTo), took, retried)
	}
	placed := time.Since(started)
	ask, largest, refusal := expectOverflowPending(t, c, ns, mem)
	obs := ob.stop(t)
	obs.check(t, 0)

	// Every Binding of the burst came from the binary's default binder.
	var binds []string
	framework.Poll(10*time.Second, 500*time.Millisecond, func() bool {
		binds = nil
		for _, e := range auditFrom(t, c, started, func(e *framework.AuditEvent) bool {
			return e.ObjectRef.Resource == "pods" && e.ObjectRef.Subresource == "binding" && e.ObjectRef.Namespace == ns && e.ResponseStatus.Code < 300
		}) {
			binds = append(binds, e.User.Username+" "+e.UserAgent)
		}
		return len(binds) >= n
	})
	if len(binds) != n {
		t.Errorf("%d Bindings of the burst's %d pods in the audit log: %v", len(binds), n, binds)
	}
	for _, by := range binds {
		if !strings.HasPrefix(by, "system:serviceaccount:"+installNamespace+":"+installSchedName+" "+installPluginAgent) {
			t.Errorf("a burst pod bound by %q, want kube-reclaim-scheduler's binder (%s)", by, installPluginAgent)
		}
	}
	t.Logf("plugin topology: %d pods of %dm/32Mi (room %s) all bound %s after the first was created, by %d Bindings; refused creations %d",
		n, cpu, rooms, placed.Round(time.Millisecond), len(binds), len(retried))
	t.Logf("plugin topology: positive control: a pod asking %dm (largest room %dm) stayed Pending: %s", ask, largest, refusal)
	t.Logf("plugin topology: %s", obs)
}
