package webhook

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/enforcement"
	"github.com/kube-reclaim/kube-reclaim/test/metrictest"
)

// podJSON is a Pod as the apiserver sends it on CREATE (after defaulting),
// written by hand: containers with the given resources blocks.
func podJSON(resources ...string) json.RawMessage {
	var cs []string
	for i, r := range resources {
		cs = append(cs, `{"name":"c`+string(rune('0'+i))+`","image":"busybox","resources":`+r+`,"terminationMessagePolicy":"File","imagePullPolicy":"Always"}`)
	}
	return json.RawMessage(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"batch","labels":{"app":"x"},` +
		`"managedFields":[{"manager":"kubectl","operation":"Update","apiVersion":"v1","time":"2026-03-01T11:59:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{}}}]},` +
		`"spec":{"containers":[` + strings.Join(cs, ",") + `],"restartPolicy":"Never","schedulerName":"default-scheduler",` +
		`"tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}]},"status":{"phase":"Pending","qosClass":"BestEffort"}}`)
}

const (
	reclaimed2c4g = `{"requests":{"kube-reclaim.io/reclaimed-cpu":"2000","kube-reclaim.io/reclaimed-memory":"4Gi"},"limits":{"kube-reclaim.io/reclaimed-cpu":"2000","kube-reclaim.io/reclaimed-memory":"4Gi"}}`
	regular       = `{"requests":{"cpu":"100m","memory":"64Mi"}}`
)

func podReview(t testing.TB, operation string, object json.RawMessage) []byte {
	return reviewSpec{kind: "Pod", resource: "pods", subResource: "-", operation: operation, object: object}.json(t)
}

// podAnswer posts body to the pod route and decodes the answer with the
// admission/v1 types.
func podAnswer(t testing.TB, h http.Handler, body []byte) (int, *admissionv1.AdmissionResponse) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, PodPath, bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		return rec.Code, nil
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil {
		t.Fatalf("answer is not an AdmissionReview with a response: %v: %s", err, rec.Body)
	}
	return rec.Code, out.Response
}

func patchedPod(t *testing.T, object json.RawMessage, resp *admissionv1.AdmissionResponse) *corev1.Pod {
	t.Helper()
	var pod corev1.Pod
	if err := json.Unmarshal(apply(t, object, resp.Patch), &pod); err != nil {
		t.Fatal(err)
	}
	return &pod
}

func TestPodWebhook(t *testing.T) {
	q := resource.MustParse
	tests := []struct {
		name      string
		operation string
		object    json.RawMessage
		rewriter  PodRewriter
		// wantPatch: the answer carries a patch and the patched pod's first
		// container has these limits and requests.
		wantLimits, wantRequests corev1.ResourceList
		wantOutcome              string
		wantDenied               []string // substrings of the denial message
		wantCode                 int32
		wantDenialReason         string
		wantErrKind              string
	}{
		{
			name: "regular pod is allowed without a patch", operation: "CREATE",
			object: podJSON(regular), wantOutcome: OutcomeUnchanged,
		},
		{
			name: "reclaimed pod gets limits equal to its grant and explicit zero requests", operation: "CREATE",
			object:       podJSON(reclaimed2c4g),
			wantLimits:   corev1.ResourceList{corev1.ResourceCPU: q("2"), corev1.ResourceMemory: q("4Gi"), cpuKey: q("2000"), memKey: q("4Gi")},
			wantRequests: corev1.ResourceList{corev1.ResourceCPU: q("0"), corev1.ResourceMemory: q("0"), cpuKey: q("2000"), memKey: q("4Gi")},
			wantOutcome:  OutcomePatched,
		},
		{
			name: "reclaimed pod already enforced (reinvocation) is allowed without a patch", operation: "CREATE",
			object: podJSON(`{"requests":{"cpu":"0","memory":"0","kube-reclaim.io/reclaimed-cpu":"2000","kube-reclaim.io/reclaimed-memory":"4Gi"},` +
				`"limits":{"cpu":"2","memory":"4Gi","kube-reclaim.io/reclaimed-cpu":"2000","kube-reclaim.io/reclaimed-memory":"4Gi"}}`),
			wantOutcome: OutcomeUnchanged,
		},
		{
			name: "pod that cannot be made safe is denied with what to change", operation: "CREATE",
			object:      podJSON(regular, `{"requests":{"kube-reclaim.io/reclaimed-cpu":"1000"},"limits":{"kube-reclaim.io/reclaimed-cpu":"1000"}}`),
			wantOutcome: OutcomeDenied, wantCode: 403, wantDenialReason: string(enforcement.ReasonNoMemoryGrant),
			wantDenied: []string{`container "c1"`, "granted no memory", "add kube-reclaim.io/reclaimed-memory"},
		},
		{
			name: "update of a pod is skipped", operation: "UPDATE",
			object: podJSON(reclaimed2c4g), wantOutcome: OutcomeSkipped,
		},
		{
			name: "pod object that does not decode is denied: the pod route fails closed", operation: "CREATE",
			object:      json.RawMessage(`{"apiVersion":"v1","kind":"Pod","spec":{"containers":"not a list"}}`),
			wantOutcome: OutcomeError, wantCode: 500, wantErrKind: ErrMalformed,
			wantDenied: []string{"kube-reclaim could not process this pod", "refused rather than admitted without the limits"},
		},
		{
			name: "rewriter runs before enforcement and its changes are patched", operation: "CREATE",
			object: podJSON(`{"requests":{"cpu":"500m","memory":"1Gi"}}`),
			rewriter: rewriteFunc(func(_ string, p *corev1.Pod) error {
				r := &p.Spec.Containers[0].Resources
				if _, done := r.Requests[cpuKey]; done { // idempotent, as PodRewriter requires
					return nil
				}
				r.Requests = corev1.ResourceList{cpuKey: q("500"), memKey: q("1Gi")}
				r.Limits = corev1.ResourceList{cpuKey: q("500"), memKey: q("1Gi")}
				p.Spec.SchedulerName = "reclaim-scheduler"
				return nil
			}),
			wantLimits:   corev1.ResourceList{corev1.ResourceCPU: q("500m"), corev1.ResourceMemory: q("1Gi"), cpuKey: q("500"), memKey: q("1Gi")},
			wantRequests: corev1.ResourceList{corev1.ResourceCPU: q("0"), corev1.ResourceMemory: q("0"), cpuKey: q("500"), memKey: q("1Gi")},
			wantOutcome:  OutcomePatched,
		},
		{
			name: "rewriter error denies the pod with its message", operation: "CREATE",
			object:      podJSON(regular),
			rewriter:    rewriteFunc(func(string, *corev1.Pod) error { return errors.New("profile batch: opt-out annotation malformed") }),
			wantOutcome: OutcomeDenied, wantCode: 403, wantDenialReason: DenialRewrite,
			wantDenied: []string{"profile batch: opt-out annotation malformed"},
		},
		{
			name: "rewriter changing a field the webhook does not patch denies the pod", operation: "CREATE",
			object:      podJSON(regular),
			rewriter:    rewriteFunc(func(_ string, p *corev1.Pod) error { p.Spec.NodeName = "n1"; return nil }),
			wantOutcome: OutcomeError, wantCode: 500, wantErrKind: ErrRewriteUnpatched,
			wantDenied: []string{"changed fields the pod webhook does not patch"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			th := newTestHandler(t, testNames, nil)
			th.SetPodRewriter(tt.rewriter)
			code, resp := podAnswer(t, th, podReview(t, tt.operation, tt.object))
			if code != http.StatusOK {
				t.Fatalf("HTTP %d", code)
			}
			if resp.UID != "uid-1" {
				t.Errorf("uid %q", resp.UID)
			}
			if got := metrictest.HistogramCount(t, th.metrics.podDuration.WithLabelValues(tt.wantOutcome)); got != 1 {
				t.Errorf("pod reviews with outcome %s = %v, want 1", tt.wantOutcome, got)
			}
			if got := metrictest.HistogramCount(t, th.metrics.duration.WithLabelValues(tt.wantOutcome)); got != 0 {
				t.Errorf("a pod review was counted as a node review")
			}
			if tt.wantDenied != nil {
				if resp.Allowed || resp.Result == nil {
					t.Fatalf("allowed=%v result=%v, want a denial", resp.Allowed, resp.Result)
				}
				if resp.Result.Code != tt.wantCode {
					t.Errorf("code %d, want %d", resp.Result.Code, tt.wantCode)
				}
				if tt.wantCode == 403 && resp.Result.Reason != metav1.StatusReasonForbidden {
					t.Errorf("reason %q, want Forbidden", resp.Result.Reason)
				}
				for _, s := range tt.wantDenied {
					if !strings.Contains(resp.Result.Message, s) {
						t.Errorf("message %q does not say %q", resp.Result.Message, s)
					}
				}
				if resp.Patch != nil {
					t.Errorf("denial carries a patch %s", resp.Patch)
				}
				if tt.wantDenialReason != "" {
					if got := testutil.ToFloat64(th.metrics.denials.WithLabelValues(tt.wantDenialReason)); got != 1 {
						t.Errorf("pod_denials_total{reason=%s} = %v, want 1", tt.wantDenialReason, got)
					}
				}
				if tt.wantErrKind != "" {
					if got := testutil.ToFloat64(th.metrics.errors.WithLabelValues(tt.wantErrKind)); got != 1 {
						t.Errorf("errors_total{kind=%s} = %v, want 1", tt.wantErrKind, got)
					}
				}
				return
			}
			if !resp.Allowed {
				t.Fatalf("denied: %v", resp.Result)
			}
			if tt.wantLimits == nil {
				if resp.Patch != nil || resp.PatchType != nil {
					t.Fatalf("unexpected patch %s", resp.Patch)
				}
				return
			}
			if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
				t.Fatalf("patchType %v", resp.PatchType)
			}
			pod := patchedPod(t, tt.object, resp)
			got := pod.Spec.Containers[0].Resources
			if !sameList(got.Limits, tt.wantLimits) || !sameList(got.Requests, tt.wantRequests) {
				t.Errorf("resources after the patch: requests %v limits %v\nwant requests %v limits %v", got.Requests, got.Limits, tt.wantRequests, tt.wantLimits)
			}
			if err := enforcement.Enforced(&pod.Spec, testNames); err != nil {
				t.Errorf("patched pod is not enforced: %v", err)
			}
			// Nothing but resources (and what a rewriter set) changed.
			var before corev1.Pod
			if err := json.Unmarshal(tt.object, &before); err != nil {
				t.Fatal(err)
			}
			if pod.Name != before.Name || len(pod.ManagedFields) != 1 || len(pod.Spec.Tolerations) != 1 || pod.Spec.Containers[0].Image != "busybox" {
				t.Errorf("patch touched other fields: %+v", pod)
			}
			if tt.rewriter != nil && pod.Spec.SchedulerName != "reclaim-scheduler" {
				t.Errorf("rewriter's schedulerName was not patched: %q", pod.Spec.SchedulerName)
			}
			// A second review of the patched pod (reinvocation) changes nothing.
			again, err := json.Marshal(pod)
			if err != nil {
				t.Fatal(err)
			}
			if _, resp2 := podAnswer(t, th, podReview(t, "CREATE", again)); !resp2.Allowed || resp2.Patch != nil {
				t.Errorf("reinvocation answered allowed=%v patch=%s", resp2.Allowed, resp2.Patch)
			}
		})
	}
}

func TestPodWebhookAnswersInTheReviewsVersion(t *testing.T) {
	th := newTestHandler(t, testNames, nil)
	body := reviewSpec{apiVersion: admissionV1beta1, kind: "Pod", resource: "pods", subResource: "-", operation: "CREATE",
		object: podJSON(`{"limits":{"kube-reclaim.io/reclaimed-cpu":"1"}}`)}.json(t)
	rec := httptest.NewRecorder()
	th.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, PodPath, bytes.NewReader(body)))
	var out map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out["apiVersion"] != admissionV1beta1 {
		t.Errorf("apiVersion %v, want %s", out["apiVersion"], admissionV1beta1)
	}
	// Positive control of the decode: this pod is denied (no memory grant).
	if resp := out["response"].(map[string]any); resp["allowed"] != false {
		t.Errorf("answer %s, want a denial", rec.Body)
	}
}

type rewriteFunc func(string, *corev1.Pod) error

func (f rewriteFunc) RewritePod(ns string, p *corev1.Pod) error { return f(ns, p) }

func sameList(a, b corev1.ResourceList) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		w, ok := b[k]
		if !ok || v.Cmp(w) != 0 {
			return false
		}
	}
	return true
}

// BenchmarkPodReview measures the whole handler on pod reviews: one that
// needs limits (decode, copy, Enforce, patch) and one already enforced.
func BenchmarkPodReview(b *testing.B) {
	for _, c := range []struct {
		name string
		obj  json.RawMessage
	}{
		{"patch", podJSON(regular, reclaimed2c4g)},
		{"unchanged", podJSON(`{"requests":{"cpu":"0","memory":"0","kube-reclaim.io/reclaimed-cpu":"2000","kube-reclaim.io/reclaimed-memory":"4Gi"},` +
			`"limits":{"cpu":"2","memory":"4Gi","kube-reclaim.io/reclaimed-cpu":"2000","kube-reclaim.io/reclaimed-memory":"4Gi"}}`)},
	} {
		b.Run(c.name, func(b *testing.B) {
			h := NewHandler(testNames, 10*time.Minute, nil, nil)
			benchServeAt(b, h, PodPath, podReview(b, "CREATE", c.obj))
		})
	}
}
