package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/enforcement"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

// TestPodEnforcement registers the shipped webhook configuration (both
// webhooks) on the real apiserver and checks what it stores for reclaimed
// and regular pods, with the webhook up and down. No node is needed: the
// apiserver stores a pod's spec and QoS class at creation.
func TestPodEnforcement(t *testing.T) {
	ctx := context.Background()
	const ns = "enforce"
	c := apiOnlyCluster(t, ns)
	waitDefaultServiceAccount(t, c, ns)
	pods := c.Client.CoreV1().Pods(ns)

	// The reference for "unchanged": a regular pod created before any
	// webhook configuration exists.
	regularBefore, err := pods.Create(ctx, regularPod(ns, "regular-before"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	wh := registerWebhook(t, c, "--publisher-lease-name=")
	reviews := func() float64 { return wh.Metric(t, "kube_reclaim_webhook_pod_review_duration_seconds_count") }

	// The apiserver applies a new configuration within a second or so: wait
	// until a reclaimed pod is enforced.
	var stored *corev1.Pod
	if _, ok := framework.Poll(30*time.Second, 500*time.Millisecond, func() bool {
		_ = pods.Delete(ctx, "batch", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		p, err := pods.Create(ctx, framework.ReclaimedPod(ns, "batch", 2000, 4<<30), metav1.CreateOptions{})
		if err != nil {
			return false
		}
		stored = p
		_, hasLimit := p.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU]
		return hasLimit
	}); !ok {
		t.Fatalf("the webhook configuration never took effect: stored %+v", stored.Spec.Containers[0].Resources)
	}

	t.Run("a reclaimed pod is stored with native limits equal to its grant, zero requests, Burstable", func(t *testing.T) {
		p, err := pods.Get(ctx, "batch", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		r := p.Spec.Containers[0].Resources
		t.Logf("stored: requests %v, limits %v, qosClass %s", r.Requests, r.Limits, p.Status.QOSClass)
		want := []struct {
			list corev1.ResourceList
			name corev1.ResourceName
			q    string
		}{
			{r.Limits, corev1.ResourceCPU, "2"}, {r.Limits, corev1.ResourceMemory, "4Gi"},
			{r.Requests, corev1.ResourceCPU, "0"}, {r.Requests, corev1.ResourceMemory, "0"},
			{r.Limits, names.CPU, "2000"}, {r.Requests, names.Memory, "4Gi"},
		}
		for _, w := range want {
			got, ok := w.list[w.name]
			if !ok || got.Cmp(resource.MustParse(w.q)) != 0 {
				t.Errorf("%s = %s (present %v), want %s", w.name, got.String(), ok, w.q)
			}
		}
		if p.Status.QOSClass != corev1.PodQOSBurstable {
			t.Errorf("qosClass %s, want Burstable", p.Status.QOSClass)
		}
		if err := enforcement.Enforced(&p.Spec, names); err != nil {
			t.Errorf("stored pod is not enforced: %v", err)
		}
	})

	t.Run("a regular pod is never sent to the webhook and is stored byte-for-byte as without it", func(t *testing.T) {
		// The webhook observes a review's duration after it has answered,
		// so the count can trail the create that caused it (the setup's
		// last reclaimed pod, the control below). Start from a count that
		// has stopped moving.
		before := reviews()
		framework.Poll(10*time.Second, 500*time.Millisecond, func() bool {
			prev := before
			before = reviews()
			return before == prev
		})
		after, err := pods.Create(ctx, regularPod(ns, "regular-after"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got := reviews(); got != before {
			t.Errorf("the webhook reviewed a regular pod: pod reviews %v -> %v", before, got)
		}
		a, b := specJSON(t, regularBefore), specJSON(t, after)
		if a != b {
			t.Errorf("regular pod stored differently with the webhook configured:\nwithout: %s\nwith:    %s", a, b)
		}
		if after.Status.QOSClass != regularBefore.Status.QOSClass {
			t.Errorf("qosClass %s, without the webhook %s", after.Status.QOSClass, regularBefore.Status.QOSClass)
		}
		// Positive control: the same count sees a reclaimed pod's review,
		// once it has been observed (after the answer, see above).
		framework.CreatePod(t, c, framework.ReclaimedPod(ns, "control", 500, 1<<30))
		var got float64
		framework.Poll(30*time.Second, 200*time.Millisecond, func() bool { got = reviews(); return got >= before+1 })
		if got != before+1 {
			t.Errorf("pod reviews %v -> %v after a regular and then a reclaimed pod, want +1", before, got)
		}
	})

	t.Run("a reclaimed pod that cannot be made safe is refused with what to change", func(t *testing.T) {
		p := framework.ReclaimedPod(ns, "no-memory", 1000, 0)
		for _, l := range []corev1.ResourceList{p.Spec.Containers[0].Resources.Requests, p.Spec.Containers[0].Resources.Limits} {
			delete(l, names.Memory)
		}
		_, err := pods.Create(ctx, p, metav1.CreateOptions{})
		t.Logf("apiserver: %v", err)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `admission webhook "pods.kube-reclaim.io" denied the request`) ||
			!strings.Contains(err.Error(), `container "job"`) || !strings.Contains(err.Error(), "add "+string(names.Memory)) {
			t.Errorf("want a Forbidden denial by pods.kube-reclaim.io naming the container and the fix, got %v", err)
		}
	})

	t.Run("LimitRange: its min and defaults apply before the webhook; an explicit zero request below min is refused", func(t *testing.T) {
		const lns = "enforce-limitrange"
		framework.CreateNamespace(t, c, lns)
		waitDefaultServiceAccount(t, c, lns)
		lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: "min", Namespace: lns}, Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
			Type: corev1.LimitTypeContainer,
			Min:  corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m")},
		}}}}
		if _, err := c.Client.CoreV1().LimitRanges(lns).Create(ctx, lr, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// API defaulting turns min into defaultRequest, and LimitRanger
		// (which caches a namespace's LimitRanges for up to 30s: retry until
		// it has seen this one) fills the absent cpu request with it before
		// the webhook runs: the pod asks the min natively, its limit is
		// min + grant.
		var p *corev1.Pod
		attempts := 0
		if _, ok := framework.Poll(90*time.Second, time.Second, func() bool {
			attempts++
			var err error
			p, err = c.Client.CoreV1().Pods(lns).Create(ctx, framework.ReclaimedPod(lns, fmt.Sprintf("min-%d", attempts), 1000, 1<<30), metav1.CreateOptions{})
			return err == nil && p.Spec.Containers[0].Resources.Requests.Cpu().MilliValue() != 0
		}); !ok {
			t.Fatalf("LimitRanger never defaulted the cpu request to the min (%d attempts)", attempts)
		}
		r := p.Spec.Containers[0].Resources
		t.Logf("with a LimitRange min cpu 10m: stored requests %v, limits %v", r.Requests, r.Limits)
		if r.Requests.Cpu().MilliValue() != 10 || r.Limits.Cpu().MilliValue() != 1010 || r.Requests.Memory().Value() != 0 {
			t.Errorf("want request cpu 10m (the min), limit 1010m (min + grant), memory request 0; got requests %v limits %v", r.Requests, r.Limits)
		}
		// An explicit zero request, as a user or a rewrite may write it, is
		// below the min: LimitRanger's validation after the webhook refuses it.
		zero := framework.ReclaimedPod(lns, "explicit-zero", 1000, 1<<30)
		zero.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU] = resource.MustParse("0")
		_, err := c.Client.CoreV1().Pods(lns).Create(ctx, zero, metav1.CreateOptions{})
		t.Logf("explicit cpu request 0 with a LimitRange min cpu 10m: %v", err)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "minimum cpu usage per Container is 10m, but request is 0") {
			t.Errorf("want LimitRanger's Forbidden on the zero cpu request, got %v", err)
		}

		// Defaults: LimitRanger fills absent requests/limits first; the
		// webhook then keeps a default limit below the grant.
		lr.Spec.Limits[0] = corev1.LimitRangeItem{Type: corev1.LimitTypeContainer,
			Default:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
			DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}}
		if _, err := c.Client.CoreV1().LimitRanges(lns).Update(ctx, lr, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Poll(90*time.Second, time.Second, func() bool { // LimitRanger's lister and 30s cache catch up
			attempts++
			p, err = c.Client.CoreV1().Pods(lns).Create(ctx, framework.ReclaimedPod(lns, fmt.Sprintf("defaulted-%d", attempts), 1000, 1<<30), metav1.CreateOptions{})
			return err == nil && p.Spec.Containers[0].Resources.Limits.Cpu().MilliValue() == 500
		})
		if err != nil {
			t.Fatal(err)
		}
		r = p.Spec.Containers[0].Resources
		t.Logf("with LimitRange defaults: stored requests %v, limits %v", r.Requests, r.Limits)
		if r.Requests.Cpu().MilliValue() != 100 || r.Limits.Cpu().MilliValue() != 500 || r.Limits.Memory().Value() != 512<<20 {
			t.Errorf("want LimitRange's defaults kept (request cpu 100m, limits 500m/512Mi), got requests %v limits %v", r.Requests, r.Limits)
		}
	})

	t.Run("ResourceQuota: a reclaimed pod is charged its grant under limits and nothing under requests", func(t *testing.T) {
		const qns = "enforce-quota"
		framework.CreateNamespace(t, c, qns)
		waitDefaultServiceAccount(t, c, qns)
		rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "q", Namespace: qns}, Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{
			corev1.ResourceRequestsCPU: resource.MustParse("1"), corev1.ResourceRequestsMemory: resource.MustParse("1Gi"),
			corev1.ResourceLimitsCPU: resource.MustParse("8"), corev1.ResourceLimitsMemory: resource.MustParse("16Gi"),
		}}}
		if _, err := c.Client.CoreV1().ResourceQuotas(qns).Create(ctx, rq, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Quota admission refuses pods until the quota controller has
		// computed the quota's status.
		var err error
		framework.Poll(60*time.Second, 500*time.Millisecond, func() bool {
			_, err = c.Client.CoreV1().Pods(qns).Create(ctx, framework.ReclaimedPod(qns, "batch", 2000, 4<<30), metav1.CreateOptions{})
			return err == nil
		})
		if err != nil {
			t.Fatalf("reclaimed pod under a quota on requests and limits: %v", err)
		}
		// Quota admission charges the pod, but the quota controller can
		// recount from a pod cache that has not seen the pod yet and write
		// zeros back; it recounts only when the quota's spec changes, a
		// counted object goes away, or every five minutes. So each look
		// that does not see the charge changes the spec (a pod count
		// ceiling), which makes the controller count the stored pods again.
		bumps := 0
		charged := func(used corev1.ResourceList) bool {
			return used.Name(corev1.ResourceLimitsCPU, resource.DecimalSI).MilliValue() == 2000 && used.Name(corev1.ResourceLimitsMemory, resource.BinarySI).Value() == 4<<30 &&
				used.Name(corev1.ResourceRequestsCPU, resource.DecimalSI).IsZero() && used.Name(corev1.ResourceRequestsMemory, resource.BinarySI).IsZero()
		}
		var used corev1.ResourceList
		framework.Poll(60*time.Second, 500*time.Millisecond, func() bool {
			got, gerr := c.Client.CoreV1().ResourceQuotas(qns).Get(ctx, "q", metav1.GetOptions{})
			if gerr != nil {
				err = gerr
				return false
			}
			used = got.Status.Used
			if charged(used) {
				return true
			}
			bumps++
			got.Spec.Hard[corev1.ResourcePods] = *resource.NewQuantity(int64(100+bumps), resource.DecimalSI)
			if _, uerr := c.Client.CoreV1().ResourceQuotas(qns).Update(ctx, got, metav1.UpdateOptions{}); uerr != nil {
				err = uerr
			}
			return false
		})
		t.Logf("quota used after one reclaimed pod (2 cores, 4Gi), after %d recounts asked: %v", bumps, used)
		if !charged(used) {
			t.Errorf("want limits.cpu 2, limits.memory 4Gi, requests 0; used %v (last error %v)", used, err)
		}
	})

	t.Run("webhook down: a reclaimed pod is refused naming the webhook, a regular pod is created", func(t *testing.T) {
		if err := c.KillComponent("webhook"); err != nil {
			t.Fatal(err)
		}
		_, err := pods.Create(ctx, framework.ReclaimedPod(ns, "while-down", 1000, 1<<30), metav1.CreateOptions{})
		t.Logf("reclaimed pod while the webhook is down: %v", err)
		if err == nil || !strings.Contains(err.Error(), `failed calling webhook "pods.kube-reclaim.io"`) {
			t.Errorf("want a refusal naming pods.kube-reclaim.io, got %v", err)
		}
		if _, err := pods.Create(ctx, framework.RegularPod(ns, "regular-while-down", "", "100m", "32Mi"), metav1.CreateOptions{}); err != nil {
			t.Errorf("a regular pod was refused while the webhook is down: %v", err)
		}
	})
}

// regularPod is framework.RegularPod without the service account token
// volume, whose name the apiserver draws at random for every pod.
func regularPod(ns, name string) *corev1.Pod {
	p := framework.RegularPod(ns, name, "", "250m", "64Mi")
	p.Spec.AutomountServiceAccountToken = new(bool)
	return p
}

// specJSON is a pod's stored spec as JSON, for byte comparison.
func specJSON(t *testing.T, p *corev1.Pod) string {
	t.Helper()
	b, err := json.Marshal(p.Spec)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// waitDefaultServiceAccount waits for the controller-manager to create the
// namespace's default ServiceAccount, without which pods are refused.
func waitDefaultServiceAccount(t *testing.T, c *cluster.Cluster, ns string) {
	t.Helper()
	if _, ok := framework.Poll(60*time.Second, 250*time.Millisecond, func() bool {
		_, err := c.Client.CoreV1().ServiceAccounts(ns).Get(context.Background(), "default", metav1.GetOptions{})
		return err == nil
	}); !ok {
		t.Fatalf("no default ServiceAccount in %s", ns)
	}
}
