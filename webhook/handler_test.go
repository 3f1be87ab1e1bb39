package webhook

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1beta1 "k8s.io/api/admission/v1beta1"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/benchfixture"
	"github.com/kube-reclaim/kube-reclaim/test/metrictest"
)

const (
	cpuKey = "kube-reclaim.io/reclaimed-cpu"
	memKey = "kube-reclaim.io/reclaimed-memory"
	annKey = "kube-reclaim.io/reclaimable"
)

func TestInjectsReclaimedResourcesFromTheAnnotation(t *testing.T) {
	fresh := annotationValue(2500, 6442450944, testNow.Add(-time.Minute))
	cases := []struct {
		name     string
		node     func() node
		alive    bool
		wantCPU  string // in capacity and allocatable after the patch
		wantMem  string
		wantKept map[string]string // other entries of allocatable that must survive
		noPatch  bool
		reason   string // stale injection reason counted, if any
	}{
		{name: "fresh annotation sets both to the annotated values",
			node: func() node { return newNode("n1").setAnnotation(annKey, fresh) }, alive: true,
			wantCPU: "2500", wantMem: "6442450944", wantKept: map[string]string{"cpu": "3800m", "memory": "15Gi", "pods": "110"}},
		{name: "stale annotation sets zero",
			node: func() node {
				return newNode("n1").setAnnotation(annKey, annotationValue(2500, 6442450944, testNow.Add(-11*time.Minute)))
			},
			alive: true, wantCPU: "0", wantMem: "0", reason: reclaimable.ReasonWriteTooOld},
		{name: "missing annotation sets zero",
			node: func() node { return newNode("n1") }, alive: true, wantCPU: "0", wantMem: "0", reason: reclaimable.ReasonMissing},
		{name: "malformed annotation sets zero",
			node:  func() node { return newNode("n1").setAnnotation(annKey, "{not json") },
			alive: true, wantCPU: "0", wantMem: "0", reason: reclaimable.ReasonMalformed},
		{name: "negative annotated values set zero",
			node: func() node {
				return newNode("n1").setAnnotation(annKey, annotationValue(-5, 100, testNow.Add(-time.Minute)))
			},
			alive: true, wantCPU: "0", wantMem: "0", reason: reclaimable.ReasonMalformed},
		{name: "annotation far in the future sets zero",
			node: func() node {
				return newNode("n1").setAnnotation(annKey, annotationValue(2500, 100, testNow.Add(time.Hour)))
			},
			alive: true, wantCPU: "0", wantMem: "0", reason: reclaimable.ReasonFuture},
		{name: "expired publisher lease sets zero even for a fresh annotation",
			node:  func() node { return newNode("n1").setAnnotation(annKey, fresh) },
			alive: false, wantCPU: "0", wantMem: "0", reason: reclaimable.ReasonPublisherDown},
		{name: "stale values already zero need no patch",
			node: func() node {
				return newNode("n1").setStatus("capacity", cpuKey, "0").setStatus("capacity", memKey, "0").
					setStatus("allocatable", cpuKey, "0").setStatus("allocatable", memKey, "0")
			},
			alive: true, noPatch: true, reason: reclaimable.ReasonMissing},
		{name: "values already equal need no patch",
			node: func() node {
				return newNode("n1").setAnnotation(annKey, fresh).
					setStatus("capacity", cpuKey, "2500").setStatus("capacity", memKey, "6442450944").
					setStatus("allocatable", cpuKey, "2500").setStatus("allocatable", memKey, "6442450944")
			},
			alive: true, noPatch: true},
		{name: "values equal in another spelling need no patch",
			node: func() node {
				return newNode("n1").setAnnotation(annKey, fresh).
					setStatus("capacity", cpuKey, "2500").setStatus("capacity", memKey, "6Gi").
					setStatus("allocatable", cpuKey, "2.5k").setStatus("allocatable", memKey, "6Gi")
			},
			alive: true, noPatch: true},
		{name: "values removed by hand come back",
			node: func() node {
				return newNode("n1").setAnnotation(annKey, fresh).
					setStatus("capacity", cpuKey, "2500").setStatus("capacity", memKey, "6442450944")
			},
			alive: true, wantCPU: "2500", wantMem: "6442450944"},
		{name: "zeroed by kubelet re-registration come back",
			node: func() node {
				return newNode("n1").setAnnotation(annKey, fresh).
					setStatus("capacity", cpuKey, "0").setStatus("capacity", memKey, "0").
					setStatus("allocatable", cpuKey, "0").setStatus("allocatable", memKey, "0")
			},
			alive: true, wantCPU: "2500", wantMem: "6442450944"},
		{name: "absent capacity map is added whole",
			node: func() node {
				n := newNode("n1").setAnnotation(annKey, fresh)
				delete(n.status(), "capacity")
				return n
			},
			// Without a native capacity nothing bounds the room: zero.
			alive: true, wantCPU: "0", wantMem: "0"},
		{name: "null allocatable map is replaced whole",
			node: func() node {
				n := newNode("n1").setAnnotation(annKey, fresh)
				n.status()["allocatable"] = nil
				return n
			},
			alive: true, wantCPU: "0", wantMem: "0"},
		{name: "absent status is added whole",
			node: func() node {
				n := newNode("n1").setAnnotation(annKey, fresh)
				delete(n, "status")
				return n
			},
			alive: true, wantCPU: "0", wantMem: "0"},
		{name: "absent annotations map counts as missing",
			node: func() node {
				n := newNode("n1")
				delete(n.meta(), "annotations")
				return n
			},
			alive: true, wantCPU: "0", wantMem: "0", reason: reclaimable.ReasonMissing},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			th := newTestHandler(t, testNames, func(time.Time) bool { return c.alive })
			obj := c.node().json(t)
			a := post(t, th, reviewSpec{uid: "abc-123", object: obj, oldObject: obj}.json(t))
			if a.code != http.StatusOK || !a.allowed || a.uid != "abc-123" || a.apiVersion != "admission.k8s.io/v1" || a.kind != "AdmissionReview" {
				t.Fatalf("answer = %+v, want 200 allowed v1 with uid abc-123", a)
			}
			if c.reason != "" {
				if got := testutil.ToFloat64(th.metrics.stale.WithLabelValues(c.reason)); got != 1 {
					t.Errorf("stale injections{reason=%s} = %v, want 1", c.reason, got)
				}
			}
			if c.noPatch {
				if a.patch != nil || a.patchType != nil {
					t.Fatalf("want no patch, got %s", a.patch)
				}
				if got := metrictest.HistogramCount(t, th.metrics.duration.WithLabelValues(OutcomeUnchanged)); got != 1 {
					t.Errorf("unchanged reviews = %v, want 1", got)
				}
				return
			}
			if a.patchType == nil || *a.patchType != "JSONPatch" {
				t.Fatalf("patchType = %v, want JSONPatch", a.patchType)
			}
			got := decodeNode(t, apply(t, obj, a.patch))
			for _, m := range []map[string]string{got.Status.Capacity, got.Status.Allocatable} {
				if m[cpuKey] != c.wantCPU || m[memKey] != c.wantMem {
					t.Errorf("got cpu=%q memory=%q, want %q and %q (capacity %v, allocatable %v)",
						m[cpuKey], m[memKey], c.wantCPU, c.wantMem, got.Status.Capacity, got.Status.Allocatable)
				}
			}
			for k, v := range c.wantKept {
				if got.Status.Allocatable[k] != v {
					t.Errorf("allocatable[%s] = %q, want it untouched (%q)", k, got.Status.Allocatable[k], v)
				}
			}
			if got := testutil.ToFloat64(th.metrics.patches.WithLabelValues(PatchReclaimed)); got != 1 {
				t.Errorf("patches{kind=reclaimed} = %v, want 1", got)
			}
		})
	}
}

func TestPatchOnlyTouchesWhatDiffers(t *testing.T) {
	th := newTestHandler(t, testNames, nil)
	obj := newNode("n1").setAnnotation(annKey, annotationValue(2500, 1000, testNow.Add(-time.Minute))).
		setStatus("capacity", cpuKey, "2500").setStatus("capacity", memKey, "1000").
		setStatus("allocatable", cpuKey, "2500").setStatus("allocatable", memKey, "999").json(t)
	a := post(t, th, reviewSpec{object: obj}.json(t))
	want := `[{"op":"add","path":"/status/allocatable/kube-reclaim.io~1reclaimed-memory","value":"1000"}]`
	if string(a.patch) != want {
		t.Fatalf("patch = %s\nwant    %s", a.patch, want)
	}
}

func TestPatchEscapesSlashesOfCustomDomain(t *testing.T) {
	names := reclaimable.MustNames("reclaim.example.org")
	th := newTestHandler(t, names, nil)
	obj := newNode("n1").setAnnotation("reclaim.example.org/reclaimable", annotationValue(1200, 3000, testNow.Add(-time.Minute))).json(t)
	a := post(t, th, reviewSpec{object: obj}.json(t))
	for _, path := range []string{
		`"/status/capacity/reclaim.example.org~1reclaimed-cpu"`,
		`"/status/capacity/reclaim.example.org~1reclaimed-memory"`,
		`"/status/allocatable/reclaim.example.org~1reclaimed-cpu"`,
		`"/status/allocatable/reclaim.example.org~1reclaimed-memory"`,
	} {
		if !bytes.Contains(a.patch, []byte(path)) {
			t.Errorf("patch %s lacks path %s", a.patch, path)
		}
	}
	got := decodeNode(t, apply(t, obj, a.patch))
	if got.Status.Allocatable["reclaim.example.org/reclaimed-cpu"] != "1200" || got.Status.Capacity["reclaim.example.org/reclaimed-memory"] != "3000" {
		t.Errorf("patched status = %+v", got.Status)
	}
	if _, ok := got.Status.Capacity[cpuKey]; ok {
		t.Errorf("default-domain resource written with a custom domain: %v", got.Status.Capacity)
	}
}

func TestEscapeKey(t *testing.T) {
	for in, want := range map[string]string{
		"cpu":                       "cpu",
		"kube-reclaim.io/reclaimed": "kube-reclaim.io~1reclaimed",
		"a~b/c":                     "a~0b~1c",
		"~1":                        "~01",
		"//":                        "~1~1",
	} {
		if got := escapeKey(in); got != want {
			t.Errorf("escapeKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestV1beta1RequestIsAnsweredInV1beta1(t *testing.T) {
	th := newTestHandler(t, testNames, nil)
	obj := newNode("n1").setAnnotation(annKey, annotationValue(700, 2048, testNow.Add(-time.Minute))).json(t)
	rec := httptest.NewRecorder()
	th.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, Path,
		bytes.NewReader(reviewSpec{apiVersion: "admission.k8s.io/v1beta1", uid: "beta-uid", object: obj}.json(t))))
	if rec.Code != http.StatusOK {
		t.Fatalf("code %d: %s", rec.Code, rec.Body)
	}
	var out admissionv1beta1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.APIVersion != "admission.k8s.io/v1beta1" || out.Kind != "AdmissionReview" || out.Response == nil {
		t.Fatalf("answer = %s", rec.Body)
	}
	if out.Response.UID != "beta-uid" || !out.Response.Allowed || out.Response.PatchType == nil || *out.Response.PatchType != admissionv1beta1.PatchTypeJSONPatch {
		t.Fatalf("response = %+v", out.Response)
	}
	got := decodeNode(t, apply(t, obj, out.Response.Patch))
	if got.Status.Capacity[cpuKey] != "700" || got.Status.Allocatable[memKey] != "2048" {
		t.Errorf("patched status = %+v", got.Status)
	}
}

func TestCreateOfANodeIsMutated(t *testing.T) {
	th := newTestHandler(t, testNames, nil)
	obj := newNode("n1").setAnnotation(annKey, annotationValue(300, 400, testNow.Add(-time.Minute))).json(t)
	a := post(t, th, reviewSpec{operation: "CREATE", subResource: "-", object: obj}.json(t))
	got := decodeNode(t, apply(t, obj, a.patch))
	if got.Status.Capacity[cpuKey] != "300" || got.Status.Allocatable[memKey] != "400" {
		t.Errorf("patched status = %+v", got.Status)
	}
}

func TestRequestsOtherThanNodeStatusAreAllowedUntouched(t *testing.T) {
	obj := newNode("n1").json(t)
	for _, c := range []struct {
		name string
		spec reviewSpec
	}{
		{"update of the node itself", reviewSpec{subResource: "-"}},
		{"delete of a node", reviewSpec{operation: "DELETE", subResource: "-"}},
		{"create with a status subresource", reviewSpec{operation: "CREATE"}},
		{"pods", reviewSpec{resource: "pods", kind: "Pod", subResource: "-"}},
		{"pods status", reviewSpec{resource: "pods", kind: "Pod"}},
		{"a resource named nodes in another group", reviewSpec{resource: "nodes"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			th := newTestHandler(t, testNames, nil)
			c.spec.object, c.spec.uid = obj, "skip-uid"
			body := c.spec.json(t)
			if c.name == "a resource named nodes in another group" {
				body = bytes.Replace(body, []byte(`"resource":{"group":""`), []byte(`"resource":{"group":"example.com"`), 1)
			}
			a := post(t, th, body)
			if a.code != http.StatusOK || !a.allowed || a.uid != "skip-uid" || a.patch != nil {
				t.Fatalf("answer = %+v, want allowed, uid echoed, no patch", a)
			}
			if got := metrictest.HistogramCount(t, th.metrics.duration.WithLabelValues(OutcomeSkipped)); got != 1 {
				t.Errorf("skipped reviews = %v, want 1", got)
			}
		})
	}
}

func TestNeverDenies(t *testing.T) {
	obj := newNode("n1").setAnnotation(annKey, annotationValue(1, 1, testNow.Add(-time.Minute))).json(t)
	valid := reviewSpec{uid: "u-7", object: obj}.json(t)
	cases := []struct {
		name     string
		body     []byte
		max      int64
		alive    func(time.Time) bool
		wantCode int
		wantUID  string // for 200 answers
		wantErr  string // errors_total kind
		wantText string // for 400/413 bodies
	}{
		{name: "truncated review is allowed with its uid", body: valid[:len(valid)/2],
			wantCode: 200, wantUID: "u-7", wantErr: ErrMalformed},
		{name: "review with trailing garbage is allowed with its uid", body: append(append([]byte{}, valid...), []byte(" }")...),
			wantCode: 200, wantUID: "u-7", wantErr: ErrMalformed},
		{name: "capacity of the wrong type is allowed with its uid",
			body:     reviewSpec{uid: "u-8", object: json.RawMessage(`{"kind":"Node","metadata":{"name":"n1"},"status":{"capacity":{"cpu":4}}}`)}.json(t),
			wantCode: 200, wantUID: "u-8", wantErr: ErrMalformed},
		{name: "object that is not an object is allowed with its uid",
			body:     reviewSpec{uid: "u-9", object: json.RawMessage(`"a string"`)}.json(t),
			wantCode: 200, wantUID: "u-9", wantErr: ErrMalformed},
		{name: "wrong request kind is allowed", body: reviewSpec{uid: "u-10", kind: "Pod", object: obj}.json(t),
			wantCode: 200, wantUID: "u-10", wantErr: ErrWrongKind},
		{name: "object of the wrong kind is allowed",
			body:     reviewSpec{uid: "u-11", object: json.RawMessage(`{"kind":"Pod","metadata":{"name":"p"}}`)}.json(t),
			wantCode: 200, wantUID: "u-11", wantErr: ErrWrongKind},
		{name: "no object is allowed", body: reviewSpec{uid: "u-12"}.json(t),
			wantCode: 200, wantUID: "u-12", wantErr: ErrNoObject},
		{name: "null object is allowed", body: reviewSpec{uid: "u-13", object: json.RawMessage(`null`)}.json(t),
			wantCode: 200, wantUID: "u-13", wantErr: ErrNoObject},
		{name: "a panic is recovered and allowed with the uid", body: valid,
			alive:    func(time.Time) bool { panic("boom") },
			wantCode: 200, wantUID: "u-7", wantErr: ErrPanic},
		{name: "oversized body gets 413", body: valid, max: int64(len(valid) - 1),
			wantCode: 413, wantErr: ErrBodyTooLarge, wantText: "larger than"},
		{name: "a body that is not JSON gets 400", body: []byte("hello"),
			wantCode: 400, wantErr: ErrNotAdmissionReview, wantText: "not an AdmissionReview"},
		{name: "an empty body gets 400", body: nil,
			wantCode: 400, wantErr: ErrNotAdmissionReview, wantText: "not an AdmissionReview"},
		{name: "a node instead of a review gets 400", body: obj,
			wantCode: 400, wantErr: ErrNotAdmissionReview, wantText: "not an AdmissionReview"},
		{name: "a review of another API version gets 400",
			body:     bytes.Replace(valid, []byte("admission.k8s.io/v1"), []byte("admission.k8s.io/v2"), 1),
			wantCode: 400, wantErr: ErrNotAdmissionReview, wantText: "not an AdmissionReview"},
		{name: "a review without request gets 400", body: []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`),
			wantCode: 400, wantErr: ErrNoRequest, wantText: "no request"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			th := newTestHandler(t, testNames, c.alive)
			th.MaxRequestBytes = c.max
			a := post(t, th, c.body)
			if a.code != c.wantCode {
				t.Fatalf("code = %d (%s), want %d", a.code, a.body, c.wantCode)
			}
			if c.wantCode == 200 {
				if !a.allowed || a.uid != c.wantUID || a.patch != nil || a.patchType != nil {
					t.Errorf("answer = %+v, want allowed with uid %q and no patch", a, c.wantUID)
				}
			} else if !strings.Contains(string(a.body), c.wantText) {
				t.Errorf("body %q lacks %q", a.body, c.wantText)
			}
			if got := testutil.ToFloat64(th.metrics.errors.WithLabelValues(c.wantErr)); got != 1 {
				t.Errorf("errors_total{kind=%s} = %v, want 1", c.wantErr, got)
			}
			if got := metrictest.HistogramCount(t, th.metrics.duration.WithLabelValues(OutcomeError)); got != 1 {
				t.Errorf("error reviews = %v, want 1", got)
			}
		})
	}
}

func TestOnlyPostIsServed(t *testing.T) {
	th := newTestHandler(t, testNames, nil)
	rec := httptest.NewRecorder()
	th.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, Path, nil))
	if rec.Code != http.StatusMethodNotAllowed {
		t.Errorf("GET %s = %d, want 405", Path, rec.Code)
	}
	rec = httptest.NewRecorder()
	th.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/mutate", nil))
	if rec.Code != http.StatusNotFound {
		t.Errorf("POST /mutate = %d, want 404", rec.Code)
	}
}

func TestRealisticReview(t *testing.T) {
	th := newTestHandler(t, testNames, nil)
	for _, needsPatch := range []bool{true, false} {
		body := benchfixture.RealisticReview(testNames, testNow, needsPatch)
		if len(body) < 30_000 || len(body) > 36_000 {
			t.Errorf("review is %d bytes, want about 33 KB", len(body))
		}
		a := post(t, th, body)
		if a.code != 200 || !a.allowed || a.uid != benchfixture.SampleReviewUID {
			t.Fatalf("answer = %+v", a)
		}
		if needsPatch != (a.patch != nil) {
			t.Fatalf("needsPatch=%v but patch = %s", needsPatch, a.patch)
		}
		var rv struct {
			Request struct {
				Object json.RawMessage `json:"object"`
			} `json:"request"`
		}
		if err := json.Unmarshal(body, &rv); err != nil {
			t.Fatal(err)
		}
		got := decodeNode(t, apply(t, rv.Request.Object, a.patch))
		for _, m := range []map[string]string{got.Status.Capacity, got.Status.Allocatable} {
			if m[cpuKey] != "2500" || m[memKey] != "6442450944" {
				t.Errorf("reclaimed values after the review: %v", m)
			}
		}
	}
}

func TestCachedJudgementMatchesJudgeOnTheFullAnnotation(t *testing.T) {
	withExplanation := func(cpu, mem int64, written time.Time) string {
		a := reclaimable.Annotation{CPUMilli: cpu, MemoryBytes: mem, Policy: "usage", Pool: "batch", ZeroReason: "",
			MetricsTime: written.Add(-time.Minute), WriteTime: written,
			Explanation: &reclaimable.Explanation{CPU: reclaimable.ResourceExplanation{Result: cpu, Terms: []reclaimable.Term{{Name: "allocatable", Value: 4000}}}}}
		v, err := a.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	values := []string{
		withExplanation(1500, 2048, testNow.Add(-time.Minute)),
		withExplanation(1500, 2048, testNow.Add(-11*time.Minute)),
		withExplanation(1500, 2048, testNow.Add(time.Hour)),
		withExplanation(1500, 2048, testNow.Add(9*time.Minute)),
		withExplanation(-1, 2048, testNow.Add(-time.Minute)),
		withExplanation(0, 0, testNow.Add(-time.Minute)),
		annotationValue(700, 800, testNow.Add(-time.Minute)),
		`{"cpu":1,"memory":2,"explanation":{"cpu":"not an object"},"writeTime":"2026-03-01T11:59:00Z"}`,
		`{"cpu":1,"memory":2}`,
		`not json`,
		``,
	}
	th := newTestHandler(t, testNames, nil)
	for _, alive := range []bool{true, false} {
		th.nodes.alive = func(time.Time) bool { return alive }
		for _, v := range values {
			for range 2 { // the second time from the cache
				got := th.nodes.judge("n1", v, true, testNow)
				want := reclaimable.Judge(v, true, testNow, 10*time.Minute, alive)
				if got.Fresh != want.Fresh || got.Reason != want.Reason || got.Room != want.Room || got.Detail != want.Detail {
					t.Errorf("alive=%v value %s:\n got %+v\nwant %+v", alive, v, got, want)
				}
			}
		}
	}
	if got := th.nodes.judge("n1", "", false, testNow); got.Reason != reclaimable.ReasonMissing {
		t.Errorf("absent annotation judged %+v", got)
	}
}

// The object is read the way the apiserver's own decoder reads it: escapes
// in keys, repeated members, null maps and fields the webhook skips do not
// change what it sees.
func TestReadsTheObjectLikeTheAPIServerDecoder(t *testing.T) {
	fresh := annotationValue(2500, 6442450944, testNow.Add(-time.Minute))
	quoted, _ := json.Marshal(fresh)
	cases := []struct {
		name    string
		object  string
		wantCPU string // reclaimed cpu in capacity and allocatable after the patch
	}{
		{name: "escaped slash in the annotation key",
			object:  `{"kind":"Node","metadata":{"name":"n1","annotations":{"kube-reclaim.io\u002freclaimable":` + string(quoted) + `}},"status":{"capacity":{"cpu":"4","memory":"16Gi"},"allocatable":{"cpu":"4","memory":"16Gi"}}}`,
			wantCPU: "2500"},
		{name: "annotations in a repeated metadata member are merged",
			object:  `{"kind":"Node","metadata":{"name":"n1","labels":{"a":"1"}},"metadata":{"annotations":{"kube-reclaim.io/reclaimable":` + string(quoted) + `}},"status":{"capacity":{"cpu":"4","memory":"16Gi"},"allocatable":{"cpu":"4","memory":"16Gi"}}}`,
			wantCPU: "2500"},
		{name: "a repeated status member wins as a whole when it is null",
			object: `{"kind":"Node","metadata":{"name":"n1","annotations":{"kube-reclaim.io/reclaimable":` + string(quoted) + `}},"status":{"capacity":{"cpu":"1"}},"status":null}`,
			// No status, so no native size bounds the room: zero.
			wantCPU: "0"},
		{name: "deep unknown fields, numbers and literals are skipped",
			object: ` { "kind" : "Node" , "spec" : { "x" : [ 1 , -2.5e+3 , true , false , null , { } , [ [ [ ] ] ] ] } ,` +
				` "metadata" : { "name" : "n1" , "annotations" : { "kube-reclaim.io/reclaimable" : ` + string(quoted) + ` } } ,` +
				` "status" : { "images" : [ { "names" : [ "a\"b\\c\u00e9\ud83d\ude00" ] , "sizeBytes" : 12 } ] ,` +
				` "capacity" : { "cpu" : "4" , "x" : null , "memory" : "16Gi" } , "allocatable" : {"cpu":"4","memory":"16Gi"} } } `,
			wantCPU: "2500"},
		{name: "a key differing only in case is not the annotation",
			object:  `{"kind":"Node","metadata":{"name":"n1","Annotations":{"kube-reclaim.io/reclaimable":` + string(quoted) + `}},"status":{"capacity":{}}}`,
			wantCPU: "0"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			th := newTestHandler(t, testNames, nil)
			obj := json.RawMessage(c.object)
			a := post(t, th, reviewSpec{uid: "dec-1", object: obj}.json(t))
			if a.code != http.StatusOK || !a.allowed || a.uid != "dec-1" || a.patch == nil {
				t.Fatalf("answer = %+v, want allowed with a patch", a)
			}
			got := decodeNode(t, apply(t, obj, a.patch))
			for _, m := range []map[string]string{got.Status.Capacity, got.Status.Allocatable} {
				if m[cpuKey] != c.wantCPU {
					t.Errorf("reclaimed cpu %q, want %q (status %+v)", m[cpuKey], c.wantCPU, got.Status)
				}
			}
		})
	}
}

// A review that needs a patch is not patched when any part of it is not
// JSON, even a part the webhook does not read: such a body is not what the
// apiserver sends. The valid review is the positive control. (The decoder
// does take a few non-RFC 8259 numbers such as -01 in skipped values; see
// reviewJSON.)
func TestMalformedJSONIsNeverPatched(t *testing.T) {
	obj := newNode("n1").setAnnotation(annKey, annotationValue(1, 1, testNow.Add(-time.Minute))).json(t)
	const marker = `"MARKER"`
	review := string(reviewSpec{uid: "m-1", object: obj, oldObject: json.RawMessage(`{"x":` + marker + `}`)}.json(t))
	if !strings.Contains(review, marker) {
		t.Fatalf("marker missing from %s", review)
	}
	t.Run("valid review is patched", func(t *testing.T) {
		th := newTestHandler(t, testNames, nil)
		if a := post(t, th, []byte(review)); a.code != 200 || a.patch == nil || a.uid != "m-1" {
			t.Fatalf("answer = %+v, want a patch", a)
		}
	})
	for _, bad := range []string{
		`01`, `1.`, `.5`, `1e`, `-`, `+1`, `1.5.5`, `tru`, `nul`, `"\x"`, `"\u12g4"`, "\"tab\there\"",
		`[1,]`, `[1 2]`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,"a":1}`, `{'a':1}`, `{"a":1 "b":2}`,
	} {
		t.Run(bad, func(t *testing.T) {
			th := newTestHandler(t, testNames, nil)
			a := post(t, th, []byte(strings.Replace(review, marker, bad, 1)))
			if a.code != http.StatusOK || !a.allowed || a.patch != nil || a.patchType != nil || a.uid != "m-1" {
				t.Fatalf("answer = %+v, want allowed with uid m-1 and no patch", a)
			}
			if got := testutil.ToFloat64(th.metrics.errors.WithLabelValues(ErrMalformed)); got != 1 {
				t.Errorf("errors_total{kind=malformed} = %v, want 1", got)
			}
		})
	}
}
