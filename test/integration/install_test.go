package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/internal/kubectlreclaim"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

// The install test's builds of kube-reclaim's image (under
// framework.InstallImageRepo, the name its copy of the overlay sets, the
// way deploy/README.md tells users), and its namespace and scheduler.
const (
	installImageTag   = "install-test"
	installUpgradeTag = "install-test-upgrade"
	installNamespace  = "kube-reclaim"
	installSchedName  = "kube-reclaim-scheduler"
)

// installAuditPolicy records what shows the roles talking to the API server:
// nodes/status writes (with the admission webhooks that mutated them) and
// pod bindings (with the client that made them).
const installAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  resources:
  - group: ""
    resources: ["nodes/status", "pods/binding"]
- level: None
`

// TestInstallAppliesTheShippedOverlayOntoRealNodes installs kube-reclaim the
// way its users do: the shipped overlay, changed only by an images: entry in
// a kustomization of one's own, applied by the real kubectl onto two real
// nodes in network namespaces of their own. Every role runs as a pod; the
// webhook is called through its Service with the CA it bootstrapped; the
// publisher reads metrics-server through metrics.k8s.io; a Job opted in by
// its label alone is rewritten, placed by kube-reclaim-scheduler through
// its extender, enforced and completes. Then each leader, and one webhook
// replica, loses its pod: the publisher's standby publishes within the
// lease, the scheduler's places a burst without over-booking a node, and
// kubelets' status writes keep the values. A second build under another
// version is applied the same way during a burst, and the new webhook and
// extender work from the old publisher's annotations. The same install is
// then switched to deploy/plugin-scheduler, whose kube-reclaim-scheduler
// binary (the image carries it) places a Job and a burst on its own. Last,
// `kubectl delete -k` and `kubectl reclaim uninstall` leave no node
// advertising reclaimed capacity.
func TestInstallAppliesTheShippedOverlayOntoRealNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: the install test takes minutes")
	}
	if os.Geteuid() != 0 {
		t.Skip("real nodes need root (kubelet manages cgroups and mounts, the nodes need network namespaces)")
	}
	ctx := context.Background()
	testStart := time.Now()
	names := reclaimable.MustNames(reclaimable.DefaultDomain)
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	kubectl, err := cluster.EnsureKubectl(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	bins, err := cluster.EnsureBinaries(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()

	// Images, before any node runs: this is the part a fresh machine pays for.
	start := time.Now()
	plugin, err := installPluginScheduler(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first, tarballs, err := framework.BuildInstallImages(ctx, root, filepath.Join(work, "first"), installImageTag, plugin, bins)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("images built in %s (kube-reclaim %s in %s: %q)", time.Since(start).Round(time.Millisecond), first.Tag, first.Took.Round(time.Millisecond), first.Version)

	// The default kube-scheduler places the roles' pods, as in any cluster.
	c := cluster.StartForTest(t, cluster.Options{NoMetricsServer: true, EndpointRouting: true, AuditPolicy: installAuditPolicy})
	nodes := map[string]*cluster.RealNode{}
	for _, name := range []string{"install-a", "install-b"} {
		start := time.Now()
		// Kubelet posts an unchanged status every 15 s rather than 5 min, so
		// that the test sees its writes pass the webhook within a minute.
		rn, err := c.AddRealNode(ctx, name, cluster.RealNodeSpec{NetworkNamespace: true, StatusReportFrequency: 15 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		nodes[name] = rn
		ready := time.Since(start)
		start = time.Now()
		if err := rn.ImportImages(ctx, tarballs...); err != nil {
			t.Fatal(err)
		}
		t.Logf("node %s Ready in %s, images imported in %s", name, ready.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
	}
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, kubectl, append([]string{"--kubeconfig", c.Kubeconfig()}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	// metrics-server first, as deploy/README.md asks.
	ms, err := framework.MetricsServerManifest(root)
	if err != nil {
		t.Fatal(err)
	}
	msFile := filepath.Join(work, "metrics-server.yaml")
	if err := os.WriteFile(msFile, ms, 0o644); err != nil {
		t.Fatal(err)
	}
	run("apply", "-f", msFile)
	if took, ok := framework.Poll(3*time.Minute, time.Second, func() bool {
		_, err := c.Metrics.MetricsV1beta1().NodeMetricses().Get(ctx, "install-a", metav1.GetOptions{})
		return err == nil
	}); !ok {
		t.Fatalf("metrics.k8s.io serves no metrics of node install-a after %s:\n%s", took, run("get", "pods,apiservice", "-A", "-o", "wide"))
	} else {
		t.Logf("metrics-server as a pod: node metrics through metrics.k8s.io %s after apply", took.Round(time.Millisecond))
	}

	// The shipped overlay, in a copy, named the way deploy/README.md
	// ("Getting the image") tells users: a kustomization of their own.
	if out, err := exec.CommandContext(ctx, "cp", "-r", filepath.Join(root, "deploy"), filepath.Join(work, "deploy")).CombinedOutput(); err != nil {
		t.Fatalf("copying deploy/: %v: %s", err, out)
	}
	mine := filepath.Join(work, "my-install")
	if err := os.MkdirAll(mine, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := writeInstallKustomization(mine, "default", installImageTag); err != nil {
		t.Fatal(err)
	}
	applied := time.Now()
	t.Logf("kubectl apply -k: %s", strings.TrimSpace(run("apply", "-k", mine)))

	t.Run("every Deployment becomes Available", func(t *testing.T) {
		var last []appsv1.Deployment
		took, ok := framework.Poll(3*time.Minute, 500*time.Millisecond, func() bool {
			l, err := c.Client.AppsV1().Deployments(installNamespace).List(ctx, metav1.ListOptions{})
			if err != nil || len(l.Items) == 0 {
				return false
			}
			last = l.Items
			for _, d := range l.Items {
				if !framework.DeploymentAvailable(&d) {
					return false
				}
			}
			return true
		})
		if !ok {
			t.Fatalf("Deployments not all Available after %s: %s\n%s", took, deploymentSummary(last), run("-n", installNamespace, "get", "pods", "-o", "wide"))
		}
		t.Logf("all %d Deployments Available %s after kubectl apply -k (goal < 60s): %s", len(last), took.Round(time.Millisecond), deploymentSummary(last))
		if took > time.Minute {
			t.Errorf("apply to every Deployment Available took %s, goal under 60s", took.Round(time.Second))
		}
	})

	// The second build of the upgrade subtest: a build of the same tree
	// under another version, so that the binary reports another version
	// and the image has another digest, as a release would. It runs while
	// the next subtests mostly wait (for metrics, then for the kubelets to
	// sync the edited ConfigMap), which hides most of its cost.
	upgrade := startInstallBuild(ctx, root, filepath.Join(work, "upgrade"), installUpgradeTag, plugin, nodes)
	t.Cleanup(func() { <-upgrade.done }) // before the work directory goes

	var annotated time.Time
	t.Run("the publisher publishes through metrics.k8s.io", func(t *testing.T) {
		took, ok := framework.Poll(3*time.Minute, time.Second, func() bool {
			for name := range nodes {
				n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil || n.Annotations[names.Annotation] == "" {
					return false
				}
				// Present, not positive: under the shipped usage policy the
				// reclaimable CPU is what this shared machine leaves idle,
				// often nothing (both nodes see the whole machine's usage).
				_, cpu := n.Status.Allocatable[names.CPU]
				_, mem := n.Status.Allocatable[names.Memory]
				if !cpu || !mem {
					return false
				}
			}
			return true
		})
		if !ok {
			t.Fatalf("nodes not annotated and advertising %s after %s:\n%s", names.CPU, took,
				run("-n", installNamespace, "logs", "deploy/kube-reclaim-publisher", "--tail=30"))
		}
		annotated = time.Now()
		for name := range nodes {
			n, _ := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			cpu, mem := n.Status.Allocatable[names.CPU], n.Status.Allocatable[names.Memory]
			t.Logf("node %s: annotated by the publisher %s after apply, allocatable %s=%s %s=%s", name,
				annotated.Sub(applied).Round(time.Second), names.CPU, cpu.String(), names.Memory, mem.String())
		}
	})

	t.Run("the API server calls the webhook through its Service with the caBundle it bootstrapped", func(t *testing.T) {
		if annotated.IsZero() {
			t.Skip("no node annotated")
		}
		configs := map[string]bool{}
		for _, w := range installWebhooks(t, c) {
			configs[w.config] = true
			if len(w.caBundle) == 0 {
				t.Errorf("webhook %s of %s has an empty caBundle", w.webhook, w.config)
			}
			t.Logf("%s/%s: Service %s, caBundle %d bytes", w.config, w.webhook, w.service, len(w.caBundle))
		}
		if len(configs) == 0 {
			t.Fatal("no MutatingWebhookConfiguration calls a Service in " + installNamespace)
		}
		// A kubelet's own status write, after the publisher annotated its
		// node, that the API server sent through a kube-reclaim webhook.
		for name := range nodes {
			var hit *framework.AuditEvent
			took, ok := framework.Poll(90*time.Second, time.Second, func() bool {
				for _, e := range allAudit(t, c) {
					if e.ObjectRef.Resource == "nodes" && e.ObjectRef.Subresource == "status" && e.ObjectRef.Name == name &&
						e.User.Username == "system:node:"+name && e.StageTimestamp.After(annotated) && e.ResponseStatus.Code < 300 &&
						e.MutatedBy(configs) != "" {
						hit = &e
						return true
					}
				}
				return false
			})
			if !ok {
				t.Fatalf("no kubelet status write of %s through a kube-reclaim webhook within %s", name, took)
			}
			n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := n.Status.Allocatable[names.CPU]; !ok {
				t.Errorf("node %s lost %s after kubelet's status write", name, names.CPU)
			}
			t.Logf("node %s: kubelet %s nodes/status at %s passed %s; node keeps %s", name, hit.Verb,
				hit.StageTimestamp.Format(time.RFC3339), hit.MutatedBy(configs), names.CPU)
		}
	})

	// Both nodes are this one machine, whose CPU other work keeps busy, so
	// the shipped usage policy may leave no CPU to reclaim. The test then
	// does what deploy/README.md ("Configuration") tells users to do to
	// change the policy: edit the installed ConfigMap, here to the request
	// policy (allocatable minus margin minus what regular pods request),
	// which does not depend on the machine's load.
	t.Run("the publisher follows an edit of the installed policy ConfigMap", func(t *testing.T) {
		cms := c.Client.CoreV1().ConfigMaps(installNamespace)
		cm, err := cms.Get(ctx, "kube-reclaim-policy", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		const from, to = "\n  policy: usage ", "\n  policy: request "
		if !strings.Contains(cm.Data["policy.yaml"], from) {
			t.Fatalf("the installed policy has no %q line:\n%s", strings.TrimSpace(from), cm.Data["policy.yaml"])
		}
		cm.Data["policy.yaml"] = strings.Replace(cm.Data["policy.yaml"], from, to, 1)
		edited := time.Now()
		if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		took, ok := framework.Poll(3*time.Minute, time.Second, func() bool {
			for name := range nodes {
				n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
				if err != nil || !strings.Contains(n.Annotations[names.Annotation], `"policy":"request"`) {
					return false
				}
				if q := n.Status.Allocatable[names.CPU]; q.Value() < 100 {
					return false
				}
			}
			return true
		})
		if !ok {
			t.Fatalf("nodes not published under the request policy with %s >= 100 within %s", names.CPU, took)
		}
		for name := range nodes {
			n, _ := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			cpu, mem := n.Status.Allocatable[names.CPU], n.Status.Allocatable[names.Memory]
			t.Logf("node %s under the request policy %s after the edit: %s=%s %s=%s", name, time.Since(edited).Round(time.Second),
				names.CPU, cpu.String(), names.Memory, mem.String())
		}
	})

	t.Run("kubectl reclaim doctor passes on the install", func(t *testing.T) {
		var r kubectlreclaim.DoctorReport
		took, ok := framework.Poll(2*time.Minute, 2*time.Second, func() bool {
			out, err := runReclaim(ctx, c, "doctor", "-o", "json")
			r = kubectlreclaim.DoctorReport{}
			return json.Unmarshal([]byte(out), &r) == nil && err == nil && r.Failed == 0 && len(r.Checks) > 0
		})
		for _, ch := range r.Checks {
			t.Logf("doctor: %s %s: %s", ch.Name, ch.Status, ch.Message)
		}
		if !ok {
			t.Fatalf("kubectl reclaim doctor still failing %d checks after %s", r.Failed, took)
		}
	})

	t.Run("a Job opted in by its label runs rewritten, placed by the extender, enforced, to completion", func(t *testing.T) {
		testInstallJob(t, c, nodes, kubectl, "install-batch", installExtenderAgent)
	})

	t.Run("the publisher leader's pod deleted: the other replica publishes within the lease", func(t *testing.T) {
		testInstallPublisherFailover(t, c, annotated)
	})
	t.Run("a webhook pod deleted: kubelet status writes keep the reclaimed values at every look", func(t *testing.T) {
		testInstallWebhookFailover(t, c, annotated)
	})
	t.Run("the leading kube-reclaim-scheduler pod deleted during a burst: the standby places it, no node over-booked at any look", func(t *testing.T) {
		testInstallSchedulerFailover(t, c, annotated)
	})
	upgraded := t.Run("apply -k of a second build during heartbeats and a burst: rolled out, values kept, nothing over-booked, the old annotation read", func(t *testing.T) {
		testInstallUpgrade(t, c, installUpgrade{annotated: annotated, first: first, pending: upgrade, kustomization: mine,
			overlay: filepath.Join(work, "deploy"), kubectl: kubectl, nodes: nodes})
	})
	t.Run("apply -k of deploy/plugin-scheduler: kube-reclaim-scheduler with the plugin places a Job, enforced, and a burst, nothing over-booked", func(t *testing.T) {
		if !upgraded {
			t.Skip("the upgrade did not pass: which build runs is not known")
		}
		testInstallPluginScheduler(t, c, installSwitch{annotated: annotated, tag: installUpgradeTag, kustomization: mine, kubectl: kubectl, nodes: nodes})
	})

	t.Run("kubectl delete -k and kubectl reclaim uninstall leave no node advertising reclaimed capacity", func(t *testing.T) {
		start := time.Now()
		run("delete", "-k", mine)
		deleted := time.Since(start)
		var out string
		took, ok := framework.Poll(2*time.Minute, 2*time.Second, func() bool {
			o, err := runReclaim(ctx, c, "uninstall")
			out = o
			if err != nil {
				out += err.Error()
			}
			return err == nil
		})
		if !ok {
			t.Fatalf("kubectl reclaim uninstall still failing after %s: %s", took, out)
		}
		t.Logf("kubectl delete -k took %s; kubectl reclaim uninstall succeeded %s later: %s", deleted.Round(time.Millisecond), took.Round(time.Millisecond), strings.TrimSpace(out))
		// Sampled across more than one kubelet status report of each node.
		looks, advertising := 0, 0
		deadline := time.Now().Add(20 * time.Second)
		for time.Now().Before(deadline) {
			l, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range l.Items {
				looks++
				_, cpuC := n.Status.Capacity[names.CPU]
				_, memC := n.Status.Capacity[names.Memory]
				_, cpuA := n.Status.Allocatable[names.CPU]
				_, memA := n.Status.Allocatable[names.Memory]
				if cpuC || memC || cpuA || memA || n.Annotations[names.Annotation] != "" {
					advertising++
					t.Errorf("node %s still advertises reclaimed capacity or carries the annotation", n.Name)
				}
			}
			time.Sleep(time.Second)
		}
		t.Logf("after uninstall: %d node looks over 20s, %d advertising reclaimed capacity", looks, advertising)
	})
	t.Logf("TestInstall took %s", time.Since(testStart).Round(time.Second))
}

// The user agents a reclaimed pod's Binding comes from in each scheduler
// topology: the extender sidecar binds in deploy/default, kube-scheduler's
// default binder in the kube-reclaim-scheduler binary in
// deploy/plugin-scheduler (client-go names the binary).
const (
	installExtenderAgent = "kube-reclaim-extender"
	installPluginAgent   = installSchedName + "/"
)

// testInstallJob creates a Job opted in by its label alone and checks that
// its pod runs rewritten, placed by kube-reclaim-scheduler and bound by a
// client of agent, enforced in its cgroup, to completion.
func testInstallJob(t *testing.T, c *cluster.Cluster, nodes map[string]*cluster.RealNode, kubectl, name, agent string) {
	ctx := context.Background()
	job := &batchv1.Job{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: batchv1.JobSpec{
			BackoffLimit: new(int32),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{names.ReclaimedLabel: "true"}},
				Spec: corev1.PodSpec{
					RestartPolicy:                 corev1.RestartPolicyNever,
					AutomountServiceAccountToken:  new(bool),
					TerminationGracePeriodSeconds: new(int64),
					Containers: []corev1.Container{{
						Name: "main", Image: cluster.WorkloadImage, ImagePullPolicy: corev1.PullNever,
						Env: []corev1.EnvVar{{Name: "EXIT_AFTER", Value: "20s"}},
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi"),
						}},
					}},
				},
			},
		},
	}
	created := time.Now()
	if _, err := c.Client.BatchV1().Jobs("default").Create(ctx, job, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pod *corev1.Pod
	took, ok := framework.Poll(2*time.Minute, 250*time.Millisecond, func() bool {
		l, err := c.Client.CoreV1().Pods("default").List(ctx, metav1.ListOptions{LabelSelector: "job-name=" + name})
		if err != nil || len(l.Items) == 0 {
			return false
		}
		pod = &l.Items[0]
		return pod.Status.Phase == corev1.PodRunning && len(pod.Status.ContainerStatuses) == 1 && pod.Status.ContainerStatuses[0].ContainerID != ""
	})
	if !ok {
		t.Fatalf("the Job's pod is not Running after %s: %+v\n%s", took, pod, kubectlRun(t, c, kubectl, "-n", "default", "get", "events"))
	}
	t.Logf("Job pod %s Running on %s %s after the Job was created", pod.Name, pod.Spec.NodeName, took.Round(time.Millisecond))
	if pod.Spec.SchedulerName != installSchedName {
		t.Errorf("schedulerName %q, want %q (the profile's rewrite)", pod.Spec.SchedulerName, installSchedName)
	}
	res := pod.Spec.Containers[0].Resources
	cpu, mem := res.Requests[names.CPU], res.Requests[names.Memory]
	if cpu.Value() != 100 || mem.Value() != 64<<20 {
		t.Fatalf("rewritten requests %v, want %s=100 %s=64Mi", res.Requests, names.CPU, names.Memory)
	}
	lcpu, lmem := res.Limits[corev1.ResourceCPU], res.Limits[corev1.ResourceMemory]
	t.Logf("rewritten by profile %q: requests %s=%s %s=%s, native limits cpu=%s memory=%s", pod.Annotations[names.Profile],
		names.CPU, cpu.String(), names.Memory, mem.String(), lcpu.String(), lmem.String())
	rn := nodes[pod.Spec.NodeName]
	if rn == nil {
		t.Fatalf("pod placed on %q, not a real node", pod.Spec.NodeName)
	}
	cg := containerCgroup(t, rn, pod)
	memLimit := readCgroupInt(t, filepath.Join("/sys/fs/cgroup/memory", cg, "memory.limit_in_bytes"))
	quota := readCgroupInt(t, filepath.Join("/sys/fs/cgroup/cpu", cg, "cpu.cfs_quota_us"))
	period := readCgroupInt(t, filepath.Join("/sys/fs/cgroup/cpu", cg, "cpu.cfs_period_us"))
	if memLimit != 64<<20 || quota*1000/period != 100 {
		t.Errorf("container cgroup: memory.limit_in_bytes %d (want %d), cpu.cfs_quota_us %d / period %d (want 100 millicores)", memLimit, 64<<20, quota, period)
	}
	t.Logf("enforced: memory.limit_in_bytes=%d cpu.cfs_quota_us=%d cpu.cfs_period_us=%d (%s)", memLimit, quota, period, cg)

	// Placed by kube-reclaim-scheduler and bound by the client of agent:
	// the extender topology's extender, the plugin topology's binary.
	var binding *framework.AuditEvent
	if _, ok := framework.Poll(30*time.Second, time.Second, func() bool {
		for _, e := range allAudit(t, c) {
			if e.ObjectRef.Resource == "pods" && e.ObjectRef.Subresource == "binding" && e.ObjectRef.Name == pod.Name && e.ResponseStatus.Code < 300 {
				binding = &e
				return true
			}
		}
		return false
	}); !ok {
		t.Fatal("no Binding of the Job's pod in the audit log")
	}
	if binding.User.Username != "system:serviceaccount:"+installNamespace+":"+installSchedName || !strings.HasPrefix(binding.UserAgent, agent) {
		t.Errorf("the Job's pod was bound by %s (%s), want %s of %s", binding.User.Username, binding.UserAgent, agent, installSchedName)
	}
	t.Logf("bound by %s, user agent %q", binding.User.Username, binding.UserAgent)
	events, err := c.Client.CoreV1().Events("default").List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + pod.Name + ",reason=Scheduled"})
	if err != nil || len(events.Items) == 0 {
		t.Errorf("no Scheduled event of the Job's pod (%v)", err)
	} else if src := events.Items[0].ReportingController + events.Items[0].Source.Component; !strings.Contains(src, installSchedName) {
		t.Errorf("Scheduled event from %q, want %s", src, installSchedName)
	} else {
		t.Logf("Scheduled event from %s: %s", src, events.Items[0].Message)
	}

	took, ok = framework.Poll(2*time.Minute, 500*time.Millisecond, func() bool {
		j, err := c.Client.BatchV1().Jobs("default").Get(ctx, name, metav1.GetOptions{})
		return err == nil && j.Status.Succeeded == 1
	})
	if !ok {
		t.Fatalf("the Job did not complete within %s", took)
	}
	t.Logf("Job complete %s after it was created", time.Since(created).Round(time.Millisecond))
}

func deploymentSummary(ds []appsv1.Deployment) string {
	var parts []string
	for _, d := range ds {
		parts = append(parts, fmt.Sprintf("%s %d/%d", d.Name, d.Status.AvailableReplicas, d.Status.Replicas))
	}
	return strings.Join(parts, ", ")
}

// allAudit is every completed request the audit log of c holds so far.
func allAudit(t *testing.T, c *cluster.Cluster) []framework.AuditEvent {
	return framework.AuditEvents(t, c, time.Time{}, time.Now().Add(time.Hour), func(*framework.AuditEvent) bool { return true })
}
