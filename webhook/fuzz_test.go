package webhook

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"unicode/utf8"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	sigsjson "sigs.k8s.io/json"
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
		rec := httptest.NewRecorder()
		th.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body)))
		if panics := th.counter(t, "kube_reclaim_webhook_errors_total", "kind", ErrPanic); panics != 0 {
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
			} `json:"response"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("answer is not JSON: %v: %s", err, rec.Body)
		}
		if out.Kind != "AdmissionReview" || (out.APIVersion != admissionV1 && out.APIVersion != admissionV1beta1) || out.Response == nil {
			t.Fatalf("answer is not an AdmissionReview: %s", rec.Body)
		}
		if !out.Response.Allowed {
			t.Fatalf("denied: %s", rec.Body)
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
		if _, err := p.Apply(in.Request.Object); err != nil {
			t.Fatalf("patch %s does not apply to %s: %v", patch, in.Request.Object, err)
		}
	})
}
