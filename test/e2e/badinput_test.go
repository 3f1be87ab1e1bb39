package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

func (e *env) testBadInput(t *testing.T) {
	const ns = "bad-input"
	e.useNamespace(t, ns)
	e.waitPublished(t, 2*time.Minute)
	start := time.Now()
	before := mustViews(t, e)

	t.Run("malformed annotations get zero injected and never block a status write; the publisher repairs them", func(t *testing.T) {
		e.testMalformedAnnotations(t)
	})
	t.Run("a node created with a malformed annotation becomes Ready", func(t *testing.T) {
		nodes, err := e.c.AddNodes(context.Background(), 1, cluster.NodeSpec{NamePrefix: "e2e-bad", CPU: resource.MustParse("16"),
			Memory: resource.MustParse("64Gi"), Annotations: map[string]string{names.Annotation: "}{ garbage"}})
		t.Cleanup(func() {
			for _, n := range nodes {
				if n != "" {
					_ = e.c.Client.CoreV1().Nodes().Delete(context.Background(), n, metav1.DeleteOptions{})
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		created := time.Now()
		if err := e.c.WaitNodesReady(context.Background(), nodes, 90*time.Second); err != nil {
			t.Fatal(err)
		}
		t.Logf("node %s with annotation %q Ready after %s (its first status writes went through the webhook)", nodes[0], "}{ garbage",
			time.Since(created).Round(100*time.Millisecond))
	})
	t.Run("reclaimed requests different from limits get a clear error; limits alone pass", func(t *testing.T) {
		e.testRequestsNotLimits(t, ns)
	})
	t.Run("regular pods are never denied", func(t *testing.T) {
		var pods []*corev1.Pod
		for i := 0; i < 5; i++ {
			pods = append(pods, framework.RegularPod(ns, fmt.Sprintf("regular-%d", i), "", "250m", "256Mi"))
		}
		framework.CreatePods(t, e.c, pods)
		took, ok := framework.Poll(90*time.Second, 500*time.Millisecond, func() bool {
			n := 0
			for p := range framework.MustPods(t, e.c, ns).BoundTo {
				if strings.HasPrefix(p, "regular-") {
					n++
				}
			}
			return n == 5
		})
		if !ok {
			t.Fatalf("regular pods not all scheduled within %s", took.Round(time.Second))
		}
		t.Logf("5 regular pods scheduled in %s", took.Round(100*time.Millisecond))
	})
	t.Run("an absurd policy file is rejected with an Event and the old policy stays in force", func(t *testing.T) {
		e.testAbsurdPolicy(t)
	})

	// Nothing denied: every node status write since the start succeeded, and
	// every node heartbeated and stayed Ready.
	writers := checkStatusWrites(t, e.c, start, time.Now())
	for n, v := range mustViews(t, e) {
		if b, ok := before[n]; ok && (!v.Heartbeat.After(b.Heartbeat) || !v.Ready) {
			t.Errorf("node %s: heartbeat %s (was %s), Ready %v", n, v.Heartbeat, b.Heartbeat, v.Ready)
		}
	}
	t.Logf("node status writes during the bad-input tests, by writer (none failed): %v", writers)
}

func (e *env) testMalformedAnnotations(t *testing.T) {
	ctx := context.Background()
	wh := e.s.HealthPort(stack.Webhook)
	now := time.Now().UTC()
	valid := func(cpu, mem int64, written time.Time) string {
		v, err := reclaimable.Annotation{CPUMilli: cpu, MemoryBytes: mem, Policy: "usage", WriteTime: written}.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	cases := []struct {
		name, value, reason string
		want                reclaimable.Resources
	}{
		{"garbage", "}{ not json", reclaimable.ReasonMalformed, reclaimable.Resources{}},
		{"negative values", fmt.Sprintf(`{"cpu":-4000,"memory":1073741824,"policy":"usage","writeTime":%q}`, now.Format(time.RFC3339)),
			reclaimable.ReasonMalformed, reclaimable.Resources{}},
		{"no write time", `{"cpu":4000,"memory":1073741824,"policy":"usage"}`, reclaimable.ReasonMalformed, reclaimable.Resources{}},
		{"wrong types", `{"cpu":"lots","memory":[1],"writeTime":"yesterday"}`, reclaimable.ReasonMalformed, reclaimable.Resources{}},
		{"empty", "", reclaimable.ReasonMalformed, reclaimable.Resources{}},
		{"written an hour in the future", valid(4000, gib, now.Add(time.Hour)), reclaimable.ReasonFuture, reclaimable.Resources{}},
		{"written long ago", valid(4000, gib, now.Add(-time.Hour)), reclaimable.ReasonWriteTooOld, reclaimable.Resources{}},
		// Controls: values the webhook must trust.
		{"control: written 20s in the future (clock skew)", valid(4000, gib, now.Add(20*time.Second)), "", reclaimable.Resources{CPUMilli: 4000, MemoryBytes: gib}},
		{"control: fresh", valid(3000, 2*gib, now), "", reclaimable.Resources{CPUMilli: 3000, MemoryBytes: 2 * gib}},
	}
	bogus := map[string]interface{}{string(names.CPU): "777", string(names.Memory): "777"}
	for i, tc := range cases {
		node := e.nodes[i%len(e.nodes)]
		done := false
		for attempt := 1; attempt <= 5 && !done; attempt++ {
			var reasonBefore float64
			if tc.reason != "" {
				reasonBefore = framework.Scrape(t, wh, "kube_reclaim_webhook_stale_injections_total", "reason", tc.reason)
			}
			if _, err := framework.PatchNode(ctx, e.c, node, map[string]interface{}{"metadata": map[string]interface{}{
				"annotations": map[string]interface{}{names.Annotation: tc.value}}}); err != nil {
				t.Fatalf("%s: writing the annotation: %v", tc.name, err)
			}
			// A status write carrying other values, as a stale writer would.
			n, err := framework.PatchNode(ctx, e.c, node, map[string]interface{}{"status": map[string]interface{}{
				"capacity": bogus, "allocatable": bogus}}, "status")
			if err != nil {
				t.Errorf("%s: the status write was refused: %v", tc.name, err)
				break
			}
			if n.Annotations[names.Annotation] != tc.value {
				t.Logf("%s: the publisher repaired the annotation between the two writes; again (attempt %d)", tc.name, attempt)
				continue
			}
			done = true
			v := framework.ViewOf(n, time.Now(), staleAfter)
			if v.Capacity != tc.want || v.Allocatable != tc.want {
				t.Errorf("%s: status write stored capacity %+v allocatable %+v, want %+v injected in both", tc.name, v.Capacity, v.Allocatable, tc.want)
			}
			if tc.reason != "" {
				if got := framework.Scrape(t, wh, "kube_reclaim_webhook_stale_injections_total", "reason", tc.reason); got <= reasonBefore {
					t.Errorf("%s: the webhook did not count a %s injection", tc.name, tc.reason)
				}
			}
			t.Logf("%-48s on %s: status write accepted, %dm/%s injected", tc.name, node, v.Capacity.CPUMilli, mib(v.Capacity.MemoryBytes))
		}
		if !done {
			t.Errorf("%s: could not write the annotation and status before the publisher repaired it, 5 times", tc.name)
		}
	}
	if errs := framework.Scrape(t, wh, "kube_reclaim_webhook_errors_total"); errs != 0 {
		t.Errorf("the webhook counted %v errors", errs)
	}
	// The publisher rewrites every annotation it cannot trust, and status follows.
	fixed := time.Now()
	e.waitPublished(t, 2*time.Minute) // a publisher cycle and the webhook on a heartbeat, on a busy machine
	t.Logf("the publisher repaired every node within %s", time.Since(fixed).Round(100*time.Millisecond))
}

func (e *env) testRequestsNotLimits(t *testing.T, ns string) {
	ctx := context.Background()
	q := func(v int64) resource.Quantity { return *resource.NewQuantity(v, resource.DecimalSI) }
	cases := []struct {
		name     string
		req, lim corev1.ResourceList
	}{
		{"requests below limits", corev1.ResourceList{names.CPU: q(1000), names.Memory: q(gib)}, corev1.ResourceList{names.CPU: q(2000), names.Memory: q(gib)}},
		{"requests without limits", corev1.ResourceList{names.CPU: q(1000)}, nil},
	}
	for i, tc := range cases {
		p := framework.ReclaimedPod(ns, fmt.Sprintf("mismatch-%d", i), 1000, gib)
		p.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: tc.req, Limits: tc.lim}
		_, err := e.c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		if err != nil {
			// The pod webhook (it runs before validation) or the apiserver's
			// own validation: extended resources cannot be overcommitted. The
			// error must name the resource.
			t.Logf("%s: rejected by the apiserver: %v", tc.name, err)
			msg := err.Error()
			byWebhook := apierrors.IsForbidden(err) && strings.Contains(msg, `admission webhook "pods.kube-reclaim.io" denied the request`) &&
				strings.Contains(msg, string(names.CPU)) && (strings.Contains(msg, "set limits.") || strings.Contains(msg, "set them equal"))
			byValidation := apierrors.IsInvalid(err) && (strings.Contains(msg, "must be equal to "+string(names.CPU)+" limit") ||
				strings.Contains(msg, "Limit must be set for non overcommitable resources"))
			if !byWebhook && !byValidation {
				t.Errorf("%s: want a denial saying the limit must equal the request, got %v", tc.name, err)
			}
			continue
		}
		// Accepted: it must wait with the extender's explanation.
		var msg string
		// The scheduler's Event comes after an extender call and the event
		// broadcaster's write: allow for a busy machine.
		framework.Poll(60*time.Second, time.Second, func() bool {
			msg = framework.SchedulingMessage(e.c, ns, p.Name)
			return strings.Contains(msg, "requests differ from its limits")
		})
		if _, bound := framework.MustPods(t, e.c, ns).BoundTo[p.Name]; bound {
			t.Errorf("%s: pod bound", tc.name)
		}
		t.Logf("%s: accepted and Pending: %s", tc.name, msg)
		if !strings.Contains(msg, "requests differ from its limits") {
			t.Errorf("%s: FailedScheduling does not explain the mismatch: %q", tc.name, msg)
		}
	}
	// Limits alone are fine: the apiserver defaults requests to them.
	p := framework.ReclaimedPod(ns, "limits-only", 500, gib/2)
	p.Spec.Containers[0].Resources.Requests = nil
	framework.CreatePod(t, e.c, p)
	took, ok := framework.Poll(60*time.Second, 500*time.Millisecond, func() bool {
		_, bound := framework.MustPods(t, e.c, ns).BoundTo["limits-only"]
		return bound
	})
	if !ok {
		t.Fatalf("a reclaimed pod with limits only was not scheduled: %s", framework.SchedulingMessage(e.c, ns, "limits-only"))
	}
	t.Logf("a reclaimed pod with limits only (requests defaulted) was scheduled in %s", took.Round(100*time.Millisecond))
}

func (e *env) testAbsurdPolicy(t *testing.T) {
	ctx := context.Background()
	orig, err := os.ReadFile(e.s.PolicyFile)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := os.WriteFile(e.s.PolicyFile, orig, 0o644); err != nil {
			t.Error(err)
		}
	})
	pub := e.s.HealthPort(stack.Publisher)
	errors0 := framework.Scrape(t, pub, "kube_reclaim_publisher_config_reloads_total", "result", "error")
	files := []struct {
		name, content string
		mentions      []string
	}{
		{"absurd values", `default:
  policy: everything
  window: -5m
  peak: p250
  cpu: {margin: 7, maxRatio: 40, minimum: -3}
  memory: {margin: -1}
  colour: blue
pools:
- name: ""
  nodeSelector: {}
`, []string{"everything", "margin", "window", "colour"}},
		{"not YAML", "default: [unclosed\n\t- : :\n", []string{"YAML"}},
	}
	var last time.Time
	for _, f := range files {
		written := time.Now()
		if err := os.WriteFile(e.s.PolicyFile, []byte(f.content), 0o644); err != nil {
			t.Fatal(err)
		}
		var ev *corev1.Event
		took, ok := framework.Poll(60*time.Second, 500*time.Millisecond, func() bool {
			list, err := e.c.Client.CoreV1().Events("kube-reclaim").List(ctx, metav1.ListOptions{FieldSelector: "reason=PolicyRejected"})
			if err != nil {
				return false
			}
			for i := range list.Items {
				it := &list.Items[i]
				if it.InvolvedObject.Name == "kube-reclaim-policy" && !framework.EventTime(*it).Before(written.Truncate(time.Second)) &&
					strings.Contains(it.Message, f.mentions[0]) {
					ev = it
					return true
				}
			}
			return false
		})
		if !ok {
			t.Fatalf("%s: no PolicyRejected Event on ConfigMap kube-reclaim/kube-reclaim-policy within %s", f.name, took.Round(time.Second))
		}
		t.Logf("%s: %s Event after %s: %s", f.name, ev.Type, took.Round(100*time.Millisecond), ev.Message)
		if ev.Type != corev1.EventTypeWarning {
			t.Errorf("%s: Event type %s, want Warning", f.name, ev.Type)
		}
		for _, m := range f.mentions {
			if !strings.Contains(ev.Message, m) {
				t.Errorf("%s: the Event does not mention %q: %s", f.name, m, ev.Message)
			}
		}
		last = written
	}
	if got := framework.Scrape(t, pub, "kube_reclaim_publisher_config_reloads_total", "result", "error") - errors0; got < float64(len(files)) {
		t.Errorf("config_reloads_total{result=error} rose by %v, want %d", got, len(files))
	}
	// The old policy stays in force: every annotation written after the last
	// rejection still shows the old margin and window.
	after := last.Add(time.Second).Truncate(time.Second)
	var waiting []string
	took, ok := framework.Poll(refreshInterval+3*period+15*time.Second, time.Second, func() bool {
		waiting = waiting[:0]
		for n, v := range mustViews(t, e) {
			if v.Ann == nil || v.Ann.WriteTime.Before(after) {
				waiting = append(waiting, n)
			}
		}
		return len(waiting) == 0
	})
	if !ok {
		t.Fatalf("annotations of %v not rewritten within %s of the rejection", waiting, took.Round(time.Second))
	}
	for n, v := range mustViews(t, e) {
		if v.Ann.Explanation == nil || v.Ann.Policy != string(policy.PolicyUsage) {
			t.Errorf("node %s: policy %q, explanation %v", n, v.Ann.Policy, v.Ann.Explanation)
			continue
		}
		wantMargin := marginOf(v.AllocCPU, e.settings.CPU.Margin)
		gotMargin, note := int64(-1), ""
		for _, term := range v.Ann.Explanation.CPU.Terms {
			switch term.Name {
			case policy.TermMargin:
				gotMargin = term.Value
			case policy.TermRegularPeakUsage:
				note = term.Note
			}
		}
		if gotMargin != wantMargin || !strings.Contains(note, "over "+e.settings.Window.String()) {
			t.Errorf("node %s: annotation written after the rejection has margin %dm and peak %q, want the old policy's %dm over %s",
				n, gotMargin, note, wantMargin, e.settings.Window)
		}
	}
	if !framework.Ready(pub) || !e.c.Process(stack.Publisher).Running() {
		t.Error("the publisher is not running and ready after the rejected files")
	}
	t.Logf("every annotation rewritten %s after the last rejection still carries the old policy (margin %.0f%%, window %s)",
		took.Round(100*time.Millisecond), e.settings.CPU.Margin*100, e.settings.Window)
}
