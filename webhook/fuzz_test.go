package webhook

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus/testutil"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	sigsjson "sigs.k8s.io/json"

	"github.com/kube-reclaim/kube-reclaim/enforcement"
	"github.com/kube-reclaim/kube-reclaim/test/benchfixture"
)

// FuzzHandler drives the whole HTTP handler (router, body limit, decoding,
// mutation, answer) with arbitrary bodies. Seeds are in
// testdata/fuzz/FuzzHandler. The handler must never panic (its recover would
// hide it, so the panic counter must stay zero), never deny, and answer
// either 400/413 or 200 with an allowed AdmissionReview whose patch, if any,
// is a valid JSONPatch and, for a body that is valid JSON, comes from a
// review the apiserver's decoder accepts, echoes its UID and applies cleanly
// to its object.
func FuzzHandler(f *testing.F) {
	th := newTestHandler(f, testNames, nil)
	th.MaxRequestBytes = 16 << 10
	f.Fuzz(func(t *testing.T, body []byte) {
		checkFuzzAnswer(t, th, Path, body)
	})
}

// FuzzPodHandler is FuzzHandler for the pod route, seeded with pod reviews.
// The pod route may deny (a pod that cannot be made safe, or one it cannot
// process: it fails closed), but a denial must say why; a patch must
// leave a pod that enforcement.Enforced accepts.
func FuzzPodHandler(f *testing.F) {
	th := newTestHandler(f, testNames, nil)
	th.MaxRequestBytes = 16 << 10
	for _, obj := range []json.RawMessage{
		podJSON(regular),
		podJSON(reclaimed2c4g),
		podJSON(regular, reclaimed2c4g),
		podJSON(`{"requests":{"cpu":"250m","kube-reclaim.io/reclaimed-cpu":"1000","kube-reclaim.io/reclaimed-memory":"1Gi"},"limits":{"cpu":"8","kube-reclaim.io/reclaimed-cpu":"1000","kube-reclaim.io/reclaimed-memory":"1Gi"}}`),
		podJSON(`{"limits":{"kube-reclaim.io/reclaimed-cpu":"1000"}}`),
		podJSON(`{"requests":{"kube-reclaim.io/reclaimed-memory":"1Gi"},"limits":{"kube-reclaim.io/reclaimed-memory":"2Gi"}}`),
	} {
		f.Add(podReview(f, "CREATE", obj))
	}
	f.Add(podReview(f, "UPDATE", podJSON(reclaimed2c4g)))
	for _, obj := range []json.RawMessage{podJSON(resized("0", "2", "0", "4Gi")), podJSON(resized("0", "3", "0", "4Gi"))} {
		f.Add(reviewSpec{kind: "Pod", resource: "pods", subResource: "resize", operation: "UPDATE", object: obj}.json(f))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		checkFuzzAnswer(t, th, PodPath, body)
	})
}

// checkFuzzAnswer posts body to path and checks the answer's invariants.
func checkFuzzAnswer(t *testing.T, th testHandler, path string, body []byte) {
	{
		rec := httptest.NewRecorder()
		th.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
		if panics := testutil.ToFloat64(th.metrics.errors.WithLabelValues(ErrPanic)); panics != 0 {
			t.Fatalf("the handler panicked on %q", body)
		}
		switch rec.Code {
		case http.StatusBadRequest, http.StatusRequestEntityTooLarge:
			if rec.Body.Len() == 0 {
				t.Fatalf("%d without a message", rec.Code)
			}
			return
		case http.StatusOK:
		default:
			t.Fatalf("status %d for %q", rec.Code, body)
		}
		var out struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
			Response   *struct {
				UID       string  `json:"uid"`
				Allowed   bool    `json:"allowed"`
				PatchType *string `json:"patchType"`
				Patch     *string `json:"patch"`
				Status    *struct {
					Code    int    `json:"code"`
					Message string `json:"message"`
				} `json:"status"`
			} `json:"response"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("answer is not JSON: %v: %s", err, rec.Body)
		}
		if out.Kind != "AdmissionReview" || (out.APIVersion != admissionV1 && out.APIVersion != admissionV1beta1) || out.Response == nil {
			t.Fatalf("answer is not an AdmissionReview: %s", rec.Body)
		}
		if !out.Response.Allowed {
			if path != PodPath {
				t.Fatalf("denied: %s", rec.Body)
			}
			if st := out.Response.Status; st == nil || st.Message == "" || (st.Code != 403 && st.Code != 422 && st.Code != 500) || out.Response.Patch != nil {
				t.Fatalf("denial without a code, a message, or with a patch: %s", rec.Body)
			}
			return
		}
		if out.Response.Patch == nil {
			if out.Response.PatchType != nil {
				t.Fatalf("patchType without patch: %s", rec.Body)
			}
			return
		}
		if out.Response.PatchType == nil || *out.Response.PatchType != "JSONPatch" {
			t.Fatalf("patch without patchType JSONPatch: %s", rec.Body)
		}
		patch, err := base64.StdEncoding.DecodeString(*out.Response.Patch)
		if err != nil {
			t.Fatalf("patch is not base64: %v", err)
		}
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			t.Fatalf("invalid JSONPatch %s: %v", patch, err)
		}
		if !utf8.Valid(body) || !json.Valid(body) {
			// The reference decoder below rewrites invalid UTF-8, and
			// json-iterator takes a few non-RFC numbers (-01) in values the
			// webhook skips: nothing the apiserver sends, so only the
			// answer's shape is checked.
			return
		}
		var in struct {
			Request struct {
				UID    string          `json:"uid"`
				Object json.RawMessage `json:"object"`
			} `json:"request"`
		}
		if err := sigsjson.UnmarshalCaseSensitivePreserveInts(body, &in); err != nil {
			t.Fatalf("patched a review the apiserver's decoder rejects (%v): %q", err, body)
		}
		if out.Response.UID != in.Request.UID {
			t.Fatalf("uid %q answered for request uid %q", out.Response.UID, in.Request.UID)
		}
		patched, err := p.Apply(in.Request.Object)
		if err != nil {
			t.Fatalf("patch %s does not apply to %s: %v", patch, in.Request.Object, err)
		}
		if path == PodPath {
			var pod corev1.Pod
			if err := json.Unmarshal(patched, &pod); err != nil {
				t.Fatalf("patched pod does not decode: %v: %s", err, patched)
			}
			if err := enforcement.Enforced(&pod.Spec, testNames); err != nil {
				t.Fatalf("patched pod is not enforced: %v\npatch %s", err, patch)
			}
		}
	}
}

// FuzzDecodeReview drives the bounded decoding of node and pod reviews
// (bounded.go) with arbitrary bodies: it never panics, what it decodes is
// within every bound, and on a body the apiserver's decoder
// (sigs.k8s.io/json) also reads, a successful decode reads the same
// object.
func FuzzDecodeReview(f *testing.F) {
	f.Add(benchfixture.RealisticReview(testNames, testNow, true))
	f.Add(reviewSpec{object: newNode("n1").setAnnotation(annKey, annotationValue(700, 800, testNow)).setLabel("a", "b").json(f)}.json(f))
	f.Add(podReview(f, "CREATE", podJSON(regular, reclaimed2c4g)))
	f.Add(podReview(f, "CREATE", json.RawMessage(`{"spec":{"overhead":{"cpu":"1"},"initContainers":[{"name":"s","restartPolicy":"Always","resources":{"claims":[{"name":"g"}]}}],"containers":[`+items(257, `{"name":"c%d"}`)+`]}}`)))
	f.Add(reviewSpec{object: json.RawMessage(`{"metadata":{"labels":null,"annotations":{}},"status":{"capacity":{` + items(1025, `"r%d":"1"`) + `}}}`)}.json(f))
	f.Fuzz(func(t *testing.T, body []byte) {
		var node admissionReview[nodeObject]
		nodeErr := decodeReview(body, &node)
		var pod admissionReview[podObject]
		podErr := decodeReview(body, &pod)
		if nodeErr == nil && node.Request != nil && node.Request.Object != nil {
			o := node.Request.Object
			if o.Metadata != nil && (len(o.Metadata.Labels) > 4096 || len(o.Metadata.Annotations) > 4096) ||
				o.Status != nil && (len(o.Status.Capacity) > 1024 || len(o.Status.Allocatable) > 1024) {
				t.Fatalf("node decoded past a bound: %q", body)
			}
		}
		if podErr == nil && pod.Request != nil && pod.Request.Object != nil {
			o := pod.Request.Object
			within := len(o.Metadata.Labels) <= 4096 && len(o.Metadata.Annotations) <= 4096 && len(o.Spec.Overhead) <= 64 &&
				len(o.Spec.Containers) <= 256 && len(o.Spec.InitContainers) <= 256
			for _, c := range append(append([]podContainer{}, o.Spec.InitContainers...), o.Spec.Containers...) {
				r := c.Resources
				within = within && len(r.Requests) <= 64 && len(r.Limits) <= 64 && len(r.Claims) <= 64
			}
			if !within {
				t.Fatalf("pod decoded past a bound: %q", body)
			}
		}
		if !utf8.Valid(body) || !json.Valid(body) {
			return
		}
		var refNode admissionReview[nodeObject]
		if nodeErr == nil && sigsjson.UnmarshalCaseSensitivePreserveInts(body, &refNode) == nil && !reflect.DeepEqual(node, refNode) {
			t.Fatalf("node review read differently:\n%+v\nthe apiserver's decoder:\n%+v", node, refNode)
		}
		var refPod admissionReview[podObject]
		if podErr == nil && sigsjson.UnmarshalCaseSensitivePreserveInts(body, &refPod) == nil && !reflect.DeepEqual(pod, refPod) {
			t.Fatalf("pod review read differently:\n%+v\nthe apiserver's decoder:\n%+v", pod, refPod)
		}
	})
}
