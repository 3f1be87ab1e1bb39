package integration

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cli-runtime/pkg/genericiooptions"

	"github.com/kube-reclaim/kube-reclaim/internal/kubectlreclaim"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
	"github.com/kube-reclaim/kube-reclaim/webhook"
)

// runReclaim runs `kubectl reclaim args...` in-process against c as its
// admin and returns what it printed.
func runReclaim(ctx context.Context, c *cluster.Cluster, args ...string) (string, error) {
	var out, errOut bytes.Buffer
	code := kubectlreclaim.Main(ctx, append([]string{"--kubeconfig", c.Kubeconfig()}, args...),
		genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut})
	if code != 0 {
		return out.String(), &exitError{code: code, stderr: errOut.String()}
	}
	return out.String(), nil
}

type exitError struct {
	code   int
	stderr string
}

func (e *exitError) Error() string { return strings.TrimSpace(e.stderr) }

// TestUninstallLeavesNoNodeAdvertisingReclaimedCapacity: what kube-reclaim
// leaves on the nodes after kubectl delete -k, and the one command that
// removes it. The default scheduler (no extender here) places a pod asking
// for reclaimed resources wherever a node advertises them; after the clean-up
// no node does, so the same pod stays Pending, and a batch pod that was
// running keeps running.
func TestUninstallLeavesNoNodeAdvertisingReclaimedCapacity(t *testing.T) {
	ctx := context.Background()
	c := cluster.StartForTest(t, cluster.Options{NoMetricsServer: true, HeartbeatInterval: 2 * time.Second})
	const ns = "uninstall"
	framework.CreateNamespace(t, c, ns)
	spec := cluster.NodeSpec{NamePrefix: "un", CPU: resource.MustParse("8"), Memory: resource.MustParse("32Gi")}
	nodes := framework.AddReadyNodes(t, c, 2, spec, time.Minute)
	names := framework.Names
	for _, n := range nodes {
		framework.SetAnnotation(t, c, n, reclaimable.Annotation{CPUMilli: 2000, MemoryBytes: 4 << 30, Policy: "usage", WriteTime: time.Now()})
		framework.SetReclaimedStatus(t, c, n, 2000, 4<<30)
	}
	batch := func(name string) *corev1.Pod {
		p := framework.ReclaimedPod(ns, name, 1000, 1<<30)
		p.Spec.SchedulerName = corev1.DefaultSchedulerName
		return p
	}
	// Positive control: while nodes advertise reclaimed capacity, the default
	// scheduler places the pod.
	framework.CreatePod(t, c, batch("before"))
	if node := podNode(t, c, ns, "before", time.Minute); node == "" {
		t.Fatalf("the default scheduler did not place a reclaimed pod while nodes advertise room: %s", framework.SchedulingMessage(c, ns, "before"))
	}

	// The command checks that kubectl delete -k ran: a node-status
	// webhook still registered makes it refuse. (Registered after the pod
	// above: it points nowhere, and its pod hook fails closed.)
	cfg := webhook.MutatingWebhookConfiguration("kube-reclaim-webhook", webhook.URLClientConfig("https://127.0.0.1:1/none", c.CA().CertPEM))
	if _, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Create(ctx, cfg, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	out, err := runReclaim(ctx, c, "uninstall", "--publisher-lease-name=")
	if err == nil || !strings.Contains(err.Error(), "MutatingWebhookConfiguration kube-reclaim-webhook mutates nodes/status") {
		t.Fatalf("uninstall with the webhook still registered: err %v, want a refusal naming it\n%s", err, out)
	}
	if err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().Delete(ctx, cfg.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The Lease check is on by default; with no publisher, its Lease is missing.
	start := time.Now()
	out, err = runReclaim(ctx, c, "uninstall")
	if err != nil {
		t.Fatalf("uninstall: %v\n%s", err, out)
	}
	t.Logf("uninstall took %s:\n%s", time.Since(start).Round(time.Millisecond), out)
	if !strings.Contains(out, "cleaned 2 of 2 nodes") || !strings.Contains(out, ns+"/before") {
		t.Errorf("uninstall output lacks the two nodes or the running batch pod:\n%s", out)
	}

	// Sample throughout several node heartbeats: no node advertises
	// reclaimed capacity or carries the annotation, a new reclaimed pod stays
	// Pending, and the one placed before stays where it is.
	// The API server drops the deleted webhook from its chain a moment later.
	var createErr error
	if _, ok := framework.Poll(30*time.Second, 500*time.Millisecond, func() bool {
		_, createErr = c.Client.CoreV1().Pods(ns).Create(ctx, batch("after"), metav1.CreateOptions{})
		return createErr == nil
	}); !ok {
		t.Fatalf("creating the pod after the clean-up: %v", createErr)
	}
	looks, advertising := 0, 0
	framework.Poll(20*time.Second, time.Second, func() bool {
		looks++
		list, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := range list.Items {
			n := &list.Items[i]
			_, ann := n.Annotations[names.Annotation]
			_, inCap := n.Status.Capacity[names.CPU]
			_, inAlloc := n.Status.Allocatable[names.Memory]
			if ann || inCap || inAlloc {
				advertising++
				t.Errorf("look %d: node %s still carries kube-reclaim's values (annotation %v, capacity %v, allocatable %v)", looks, n.Name, ann, inCap, inAlloc)
			}
		}
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "after", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if p.Spec.NodeName != "" {
			t.Fatalf("look %d: the reclaimed pod created after the clean-up was placed on %s", looks, p.Spec.NodeName)
		}
		return false
	})
	msg := framework.SchedulingMessage(c, ns, "after")
	if !strings.Contains(msg, "Insufficient "+string(names.CPU)) {
		t.Errorf("the pending pod's scheduling message %q does not name the reclaimed resource", msg)
	}
	before, err := c.Client.CoreV1().Pods(ns).Get(ctx, "before", metav1.GetOptions{})
	if err != nil || before.Spec.NodeName == "" || before.DeletionTimestamp != nil {
		t.Errorf("the batch pod placed before the clean-up: %v %+v", err, before)
	}
	t.Logf("%d looks over 20s: %d nodes advertising reclaimed capacity; the new pod Pending: %s", looks, advertising, msg)

	out, err = runReclaim(ctx, c, "uninstall")
	if err != nil || !strings.Contains(out, "cleaned 0 of 2 nodes") {
		t.Errorf("a second uninstall: %v\n%s", err, out)
	}
}
