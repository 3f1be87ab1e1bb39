package integration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/enforcement"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

// writePolicy replaces the policy file atomically, as a ConfigMap volume
// swaps its symlink.
func writePolicy(t *testing.T, path, doc string) {
	t.Helper()
	if err := os.WriteFile(path+".tmp", []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(path+".tmp", path); err != nil {
		t.Fatal(err)
	}
}

// optedInPod is an ordinary pod (native requests only) carrying the opt-in
// label: what a Deployment's template becomes with one label added.
func optedInPod(ns, name, cpu, memory string) *corev1.Pod {
	return framework.ServicePod(ns, name).Label(names.ReclaimedLabel, "true").Req(cpu, memory).Obj()
}

// TestPodProfiles runs the webhook with a policy file on the real
// apiserver, under the shipped webhook configuration: an opted-in pod is
// rewritten and enforced, a changed file takes effect without a restart,
// and with the webhook down opted-in pods are refused.
func TestPodProfiles(t *testing.T) {
	ctx := context.Background()
	const ns = "profiles"
	c := apiOnlyCluster(t, ns)
	if _, err := c.Client.CoreV1().Namespaces().Patch(ctx, ns, "application/merge-patch+json",
		[]byte(`{"metadata":{"labels":{"team":"data"}}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	waitDefaultServiceAccount(t, c, ns)
	never := corev1.PreemptNever
	if _, err := c.Client.SchedulingV1().PriorityClasses().Create(ctx, &schedulingv1.PriorityClass{
		ObjectMeta: metav1.ObjectMeta{Name: "batch-low"}, Value: -5, PreemptionPolicy: &never,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods := c.Client.CoreV1().Pods(ns)

	policyFile := filepath.Join(t.TempDir(), "policy.yaml")
	writePolicy(t, policyFile, `
profiles:
- name: data
  namespaceSelector: {matchLabels: {team: data}}
  schedulerName: kube-reclaim-scheduler
  priorityClassName: batch-low
`)
	wh := registerWebhook(t, c, "--publisher-lease-name=",
		"--config="+policyFile, "--config-reload-interval=200ms")

	// The apiserver applies a new configuration within a second or so.
	var stored *corev1.Pod
	attempts := 0
	if _, ok := framework.Poll(30*time.Second, 500*time.Millisecond, func() bool {
		attempts++
		p, err := pods.Create(ctx, optedInPod(ns, fmt.Sprintf("job-%d", attempts), "500m", "256Mi"), metav1.CreateOptions{})
		if err != nil {
			t.Logf("attempt %d: %v", attempts, err)
			return false
		}
		stored = p
		return p.Annotations[names.Profile] != ""
	}); !ok {
		t.Fatalf("an opted-in pod was never rewritten; last stored %+v", stored)
	}

	t.Run("an opted-in pod is rewritten by its profile and enforced", func(t *testing.T) {
		r := stored.Spec.Containers[0].Resources
		t.Logf("stored: requests %v, limits %v, qosClass %s, priority %v (%s), preemption %v, scheduler %s, annotations %v",
			r.Requests, r.Limits, stored.Status.QOSClass, *stored.Spec.Priority, stored.Spec.PriorityClassName,
			*stored.Spec.PreemptionPolicy, stored.Spec.SchedulerName, stored.Annotations)
		for _, w := range []struct {
			list corev1.ResourceList
			name corev1.ResourceName
			q    string
		}{
			{r.Limits, corev1.ResourceCPU, "500m"}, {r.Limits, corev1.ResourceMemory, "256Mi"},
			{r.Requests, corev1.ResourceCPU, "0"}, {r.Requests, corev1.ResourceMemory, "0"},
			{r.Requests, names.CPU, "500"}, {r.Limits, names.CPU, "500"},
			{r.Requests, names.Memory, "256Mi"}, {r.Limits, names.Memory, "256Mi"},
		} {
			if got, ok := w.list[w.name]; !ok || got.Cmp(resource.MustParse(w.q)) != 0 {
				t.Errorf("%s = %s (present %v), want %s", w.name, got.String(), ok, w.q)
			}
		}
		if stored.Status.QOSClass != corev1.PodQOSBurstable {
			t.Errorf("qosClass %s, want Burstable", stored.Status.QOSClass)
		}
		if err := enforcement.Enforced(&stored.Spec, names); err != nil {
			t.Errorf("not enforced: %v", err)
		}
		rec, err := reclaimable.ParseProfileRewrite(stored.Annotations[names.ProfileRewrite])
		if err != nil || stored.Annotations[names.Profile] != "data" || rec[stored.Spec.Containers[0].Name] != (reclaimable.Resources{CPUMilli: 500, MemoryBytes: 256 << 20}) {
			t.Errorf("annotations %v (%v)", stored.Annotations, err)
		}
		if stored.Spec.SchedulerName != "kube-reclaim-scheduler" {
			t.Errorf("schedulerName %q", stored.Spec.SchedulerName)
		}
		// The Priority admission plugin resolved the pod's (absent) class to
		// 0 before the webhook ran; the stored priority must be the
		// profile's class, or the pod would be scheduled and preempted at 0.
		if stored.Spec.PriorityClassName != "batch-low" || stored.Spec.Priority == nil || *stored.Spec.Priority != -5 ||
			stored.Spec.PreemptionPolicy == nil || *stored.Spec.PreemptionPolicy != corev1.PreemptNever {
			t.Errorf("priority class %q value %v preemption %v, want batch-low -5 Never",
				stored.Spec.PriorityClassName, stored.Spec.Priority, stored.Spec.PreemptionPolicy)
		}
	})

	t.Run("an opted-in pod that cannot be made safe is refused with what to add", func(t *testing.T) {
		p := optedInPod(ns, "no-memory", "250m", "1Mi")
		delete(p.Spec.Containers[0].Resources.Requests, corev1.ResourceMemory)
		delete(p.Spec.Containers[0].Resources.Limits, corev1.ResourceMemory)
		_, err := pods.Create(ctx, p, metav1.CreateOptions{})
		t.Logf("apiserver: %v", err)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `admission webhook "pods.kube-reclaim.io" denied the request`) ||
			!strings.Contains(err.Error(), "add resources.requests.memory") {
			t.Errorf("want a denial saying to add a memory request, got %v", err)
		}
	})

	t.Run("the opt-out annotation keeps an opted-in pod as it is", func(t *testing.T) {
		p := optedInPod(ns, "opted-out", "250m", "64Mi")
		p.Annotations = map[string]string{names.OptOut: "true"}
		got, err := pods.Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if names.IsReclaimedPod(got) || got.Annotations[names.Profile] != "" || got.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 250 {
			t.Errorf("opted-out pod changed: %+v %v", got.Spec.Containers[0].Resources, got.Annotations)
		}
	})

	t.Run("a changed policy file takes effect without a restart; a broken one is rejected", func(t *testing.T) {
		reloads := func(result string) float64 {
			return wh.Metric(t, "kube_reclaim_webhook_config_reloads_total", "result", result)
		}
		errorsBefore := reloads("error")
		writePolicy(t, policyFile, "profiles: [{name: Not_Valid}]\n")
		if _, ok := framework.Poll(20*time.Second, 200*time.Millisecond, func() bool { return reloads("error") > errorsBefore }); !ok {
			t.Fatal("the broken file was never rejected")
		}
		// The last good profile stays in force.
		if got, err := pods.Create(ctx, optedInPod(ns, "after-broken", "100m", "64Mi"), metav1.CreateOptions{}); err != nil || got.Annotations[names.Profile] != "data" {
			t.Errorf("after a broken file: %v, profile %q", err, got.Annotations[names.Profile])
		}

		writePolicy(t, policyFile, `
profiles:
- name: other-team
  namespaceSelector: {matchLabels: {team: other}}
- name: data-v2
  namespaceSelector: {matchExpressions: [{key: team, operator: In, values: [data, ml]}]}
`)
		var got *corev1.Pod
		n := 0
		if _, ok := framework.Poll(20*time.Second, 200*time.Millisecond, func() bool {
			n++
			p, err := pods.Create(ctx, optedInPod(ns, fmt.Sprintf("reload-%d", n), "100m", "64Mi"), metav1.CreateOptions{})
			if err != nil {
				t.Logf("create: %v", err)
				return false
			}
			got = p
			return p.Annotations[names.Profile] == "data-v2"
		}); !ok {
			t.Fatalf("the new profile never took effect; last profile %q", got.Annotations[names.Profile])
		}
		if got.Spec.SchedulerName != corev1.DefaultSchedulerName || got.Spec.PriorityClassName != "" {
			t.Errorf("data-v2 sets no scheduler or class, got %q %q", got.Spec.SchedulerName, got.Spec.PriorityClassName)
		}

		// A profile removed: an opted-in pod no profile selects is refused.
		writePolicy(t, policyFile, "profiles: [{name: other-team, namespaceSelector: {matchLabels: {team: other}}}]\n")
		var lastErr error
		if _, ok := framework.Poll(20*time.Second, 200*time.Millisecond, func() bool {
			n++
			_, lastErr = pods.Create(ctx, optedInPod(ns, fmt.Sprintf("reload-%d", n), "100m", "64Mi"), metav1.CreateOptions{})
			return lastErr != nil
		}); !ok || !strings.Contains(lastErr.Error(), "no kube-reclaim profile selects it") {
			t.Errorf("want a refusal once no profile selects the namespace, got %v", lastErr)
		}
	})

	t.Run("webhook down: an opted-in pod is refused naming the webhook, a regular pod is created", func(t *testing.T) {
		if err := c.KillComponent("webhook"); err != nil {
			t.Fatal(err)
		}
		_, err := pods.Create(ctx, optedInPod(ns, "while-down", "100m", "64Mi"), metav1.CreateOptions{})
		t.Logf("opted-in pod while the webhook is down: %v", err)
		if err == nil || !strings.Contains(err.Error(), `failed calling webhook "pods.kube-reclaim.io"`) {
			t.Errorf("want a refusal naming pods.kube-reclaim.io, got %v", err)
		}
		if _, err := pods.Create(ctx, framework.RegularPod(ns, "regular-while-down", "", "100m", "32Mi"), metav1.CreateOptions{}); err != nil {
			t.Errorf("a regular pod was refused while the webhook is down: %v", err)
		}
	})
}
