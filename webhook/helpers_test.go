package webhook

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Fixed instant of every test; annotations are written relative to it.
var testNow = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var testNames = reclaimable.MustNames("kube-reclaim.io")

// annotationValue is a reclaimable annotation written by hand, independent of
// reclaimable.Annotation.Marshal.
func annotationValue(cpu, memory int64, written time.Time) string {
	return fmt.Sprintf(`{"cpu":%d,"memory":%d,"policy":"usage","metricsTime":%q,"writeTime":%q}`,
		cpu, memory, written.Add(-30*time.Second).Format(time.RFC3339), written.Format(time.RFC3339))
}

type testHandler struct {
	*Handler
	reg *prometheus.Registry
}

func TestMain(m *testing.M) {
	// The webhook logs every problem it absorbs; the tests provoke many.
	logrus.SetOutput(io.Discard)
	os.Exit(m.Run())
}

func newTestHandler(t testing.TB, names reclaimable.Names, alive func(time.Time) bool) testHandler {
	t.Helper()
	reg := prometheus.NewRegistry()
	h := NewHandler(names, 10*time.Minute, alive, reg)
	h.nodes.now = func() time.Time { return testNow }
	return testHandler{Handler: h, reg: reg}
}

// node is a Node object in JSON form, built by hand.
type node map[string]any

func newNode(name string) node {
	return node{
		"apiVersion": "v1", "kind": "Node",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"kubernetes.io/hostname": name}, "annotations": map[string]any{}},
		"status": map[string]any{
			"capacity":    map[string]any{"cpu": "4", "memory": "16Gi", "pods": "110"},
			"allocatable": map[string]any{"cpu": "3800m", "memory": "15Gi", "pods": "110"},
			"conditions":  []any{map[string]any{"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-03-01T11:59:50Z"}},
		},
	}
}

func (n node) meta() map[string]any   { return n["metadata"].(map[string]any) }
func (n node) status() map[string]any { return n["status"].(map[string]any) }

func (n node) setAnnotation(k, v string) node {
	n.meta()["annotations"].(map[string]any)[k] = v
	return n
}

func (n node) setLabel(k, v string) node {
	n.meta()["labels"].(map[string]any)[k] = v
	return n
}

func (n node) setStatus(field, k, v string) node {
	n.status()[field].(map[string]any)[k] = v
	return n
}

func (n node) json(t testing.TB) []byte {
	t.Helper()
	b, err := json.Marshal(n)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// reviewSpec describes an AdmissionReview request, written as plain JSON.
type reviewSpec struct {
	apiVersion  string // default admission.k8s.io/v1
	uid         string // default "uid-1"
	kind        string // default Node
	resource    string // default nodes
	subResource string // default status (set "-" for none)
	operation   string // default UPDATE
	namespace   string // request namespace, default none
	object      json.RawMessage
	oldObject   json.RawMessage
}

func (s reviewSpec) json(t testing.TB) []byte {
	t.Helper()
	or := func(v, d string) string {
		if v == "" {
			return d
		}
		return v
	}
	sub := or(s.subResource, "status")
	if sub == "-" {
		sub = ""
	}
	type kind struct {
		Group   string `json:"group"`
		Version string `json:"version"`
		Kind    string `json:"kind"`
	}
	type res struct {
		Group    string `json:"group"`
		Version  string `json:"version"`
		Resource string `json:"resource"`
	}
	// Fields in the order the apiserver writes them: uid first.
	type request struct {
		UID         string          `json:"uid"`
		Kind        kind            `json:"kind"`
		Resource    res             `json:"resource"`
		SubResource string          `json:"subResource,omitempty"`
		Name        string          `json:"name"`
		Namespace   string          `json:"namespace,omitempty"`
		Operation   string          `json:"operation"`
		UserInfo    map[string]any  `json:"userInfo"`
		Object      json.RawMessage `json:"object,omitempty"`
		OldObject   json.RawMessage `json:"oldObject,omitempty"`
	}
	b, err := json.Marshal(struct {
		APIVersion string  `json:"apiVersion"`
		Kind       string  `json:"kind"`
		Request    request `json:"request"`
	}{
		APIVersion: or(s.apiVersion, "admission.k8s.io/v1"), Kind: "AdmissionReview",
		Request: request{
			UID: or(s.uid, "uid-1"), Kind: kind{Version: "v1", Kind: or(s.kind, "Node")},
			Resource: res{Version: "v1", Resource: or(s.resource, "nodes")}, SubResource: sub,
			Name: "n1", Namespace: s.namespace, Operation: or(s.operation, "UPDATE"), UserInfo: map[string]any{"username": "system:node:n1"},
			Object: s.object, OldObject: s.oldObject,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// answer is the decoded reply of the webhook (v1 and v1beta1 share the shape).
type answer struct {
	code       int
	body       []byte
	apiVersion string
	kind       string
	uid        string
	allowed    bool
	patchType  *string
	patch      []byte
}

func post(t testing.TB, h http.Handler, body []byte) answer {
	t.Helper()
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, Path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	res := rec.Result()
	b, _ := io.ReadAll(res.Body)
	a := answer{code: res.StatusCode, body: b}
	if res.StatusCode != http.StatusOK {
		return a
	}
	var out struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
		Response   *struct {
			UID       string  `json:"uid"`
			Allowed   bool    `json:"allowed"`
			PatchType *string `json:"patchType"`
			Patch     string  `json:"patch"`
		} `json:"response"`
	}
	if err := json.Unmarshal(b, &out); err != nil || out.Response == nil {
		t.Fatalf("answer is not an AdmissionReview with a response: %v: %s", err, b)
	}
	a.apiVersion, a.kind = out.APIVersion, out.Kind
	a.uid, a.allowed, a.patchType = out.Response.UID, out.Response.Allowed, out.Response.PatchType
	if out.Response.Patch != "" {
		p, err := base64.StdEncoding.DecodeString(out.Response.Patch)
		if err != nil {
			t.Fatalf("patch is not base64: %v", err)
		}
		a.patch = p
	}
	return a
}

// apply applies a JSONPatch to a JSON document, like the apiserver does.
func apply(t testing.TB, doc, patch []byte) []byte {
	t.Helper()
	if patch == nil {
		return doc
	}
	p, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		t.Fatalf("invalid JSONPatch %s: %v", patch, err)
	}
	out, err := p.Apply(doc)
	if err != nil {
		t.Fatalf("applying %s: %v", patch, err)
	}
	return out
}

// decodedNode is the part of a node the assertions look at.
type decodedNode struct {
	Metadata struct {
		Labels      map[string]string `json:"labels"`
		Annotations map[string]string `json:"annotations"`
	} `json:"metadata"`
	Status struct {
		Capacity    map[string]string `json:"capacity"`
		Allocatable map[string]string `json:"allocatable"`
	} `json:"status"`
}

func decodeNode(t testing.TB, b []byte) decodedNode {
	t.Helper()
	var n decodedNode
	if err := json.Unmarshal(b, &n); err != nil {
		t.Fatalf("decoding node %s: %v", b, err)
	}
	return n
}
