package extender

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/kube-reclaim/kube-reclaim/internal/serving"
	"github.com/kube-reclaim/kube-reclaim/test/metrictest"
)

func TestBadInput(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, node("n1", 4000, 4*gi, time.Minute))
	f.ext.server.maxBody = 4096
	validPod := `{"metadata":{"name":"p","namespace":"batch"},"spec":{"containers":[]}}`
	tests := []struct {
		name     string
		method   string
		path     string
		body     string
		wantCode int
		wantBody string // substring
	}{
		{"truncated JSON is a 400", "POST", "/filter", `{"Pod": {`, 400,
			"malformed filter request: unexpected end of JSON input at byte 9 (expected a JSON ExtenderArgs)"},
		{"invalid JSON is a 400 that says where", "POST", "/filter", `{"Pod": {}, "NodeNames": [x1]}`, 400,
			"malformed filter request: invalid character 'x' looking for beginning of value at byte 27 (expected a JSON ExtenderArgs)"},
		{"wrong JSON type is a 400 naming the field", "POST", "/prioritize", `{"Pod": {}, "NodeNames": "n1"}`, 400,
			"malformed prioritize request: NodeNames: expects an array, found a string (expected a JSON ExtenderArgs)"},
		{"an empty body is a 400", "POST", "/filter", ``, 400,
			"malformed filter request: empty body, expected a JSON ExtenderArgs"},
		{"data after the JSON object is a 400", "POST", "/filter", `{"Pod":` + validPod + `} {}`, 400,
			"malformed filter request: invalid character '{' after top-level value at byte 80 (expected a JSON ExtenderArgs)"},
		{"a request without a pod is a 400", "POST", "/filter", `{"NodeNames": ["n1"]}`, 400,
			"malformed filter request: no Pod"},
		{"full Nodes instead of NodeNames is a 400 asking for nodeCacheCapable", "POST", "/filter",
			`{"Pod":` + validPod + `, "Nodes": {"items": [{"metadata": {"name": "n1"}}]}}`, 400,
			"configure this extender with nodeCacheCapable: true"},
		{"a bind without a node is a 400", "POST", "/bind", `{"PodName": "p", "PodNamespace": "batch"}`, 400,
			"malformed bind request: PodName, PodNamespace and Node are required"},
		{"a malformed bind is a 400", "POST", "/bind", `[]`, 400,
			"malformed bind request: expects a JSON object, found an array (expected a JSON ExtenderBindingArgs)"},
		{"a bind with a name longer than the API server allows is a 400", "POST", "/bind", `{"PodName":"` + strings.Repeat("p", 254) + `","PodNamespace":"batch","PodUID":"u","Node":"n1"}`, 400,
			"malformed bind request: PodName: longer than 253 bytes, more than the API server allows"},
		{"an oversized bind body is a 413", "POST", "/bind", `{"PodName":"p","x":"` + strings.Repeat("x", 4096) + `"}`, 413,
			"bind request body is larger than 4096 bytes"},
		{"full Nodes next to NodeNames is a 400 too", "POST", "/filter",
			`{"Pod":` + validPod + `, "NodeNames": ["n1"], "Nodes": {"items": [{}, {}]}}`, 400,
			"configure this extender with nodeCacheCapable: true"},
		{"a pod of more containers than the bound is a 400 naming the field", "POST", "/filter",
			`{"Pod": {"spec": {"containers": [` + strings.Repeat(`{},`, maxContainers) + `{}]}}, "NodeNames": ["n1"]}`, 400,
			"malformed filter request: Pod.spec.containers: more than 256 containers (expected a JSON ExtenderArgs)"},
		{"an oversized body is a 413", "POST", "/filter", `{"Pod":` + validPod + `, "NodeNames": ["` + strings.Repeat("n", 5000) + `"]}`, 413,
			"filter request body is larger than 4096 bytes"},
		{"GET is a 405", "GET", "/filter", ``, 405, "method GET not allowed on /filter"},
		{"PUT on bind is a 405", "PUT", "/bind", `{}`, 405, "only accepts POST"},
		{"an unknown path is a 404", "POST", "/preempt", `{}`, 404, "serves POST /filter, /prioritize and /bind"},
		{"empty NodeNames answers an empty filter result", "POST", "/filter", `{"Pod":` + validPod + `, "NodeNames": []}`, 200,
			`{"Nodes":null,"NodeNames":[],"FailedNodes":{},"FailedAndUnresolvableNodes":null,"Error":""}`},
		{"missing NodeNames answers an empty filter result", "POST", "/filter", `{"Pod":` + validPod + `}`, 200,
			`"NodeNames":[]`},
		{"empty NodeNames answers an empty priority list", "POST", "/prioritize", `{"Pod":` + validPod + `, "NodeNames": []}`, 200, `[]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			f.h.ServeHTTP(rec, httptest.NewRequest(tt.method, tt.path, strings.NewReader(tt.body)))
			if rec.Code != tt.wantCode || !strings.Contains(rec.Body.String(), tt.wantBody) {
				t.Errorf("got %d %q\nwant %d containing %q", rec.Code, rec.Body.String(), tt.wantCode, tt.wantBody)
			}
			if tt.wantCode == 405 && rec.Header().Get("Allow") != "POST" {
				t.Errorf("Allow = %q, want POST", rec.Header().Get("Allow"))
			}
		})
	}
}

// /readyz fails, and the verbs answer 503, until the informers have synced:
// a partial pod list would under-count bound pods.
func TestNotReadyUntilInformersSynced(t *testing.T) {
	f := newFixture(t, fixtureOpts{noStart: true}, node("n1", 4000, 4*gi, time.Minute), pod("p", "", 1000, gi))
	release := make(chan struct{})
	f.client.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		<-release
		return false, nil, nil
	})
	health := serving.NewHealth(prometheus.NewRegistry())
	f.ext.registerHealth(health)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.ext.informers.run(ctx, new(sync.WaitGroup))

	if failed := health.Ready(); len(failed) != 1 || !strings.Contains(failed[0], "informers not synced") {
		t.Errorf("Ready() = %q, want the informers check failing", failed)
	}
	rec := f.post("/filter", extenderv1.ExtenderArgs{Pod: pod("p", "", 1000, gi), NodeNames: &[]string{"n1"}})
	if rec.Code != http.StatusServiceUnavailable || !strings.Contains(rec.Body.String(), "not synced") {
		t.Errorf("filter before sync: %d %q, want 503", rec.Code, rec.Body.String())
	}
	close(release)
	if !f.ext.waitForSync(ctx) {
		t.Fatal("no sync")
	}
	if failed := health.Ready(); len(failed) != 0 {
		t.Errorf("Ready() after sync = %q", failed)
	}
	if res := f.filter(pod("p", "", 1000, gi), "n1"); len(deref(res.NodeNames)) != 1 {
		t.Errorf("filter after sync: %+v", res)
	}
}

// The scheduler's HTTP client against the real server loop: keep-alive,
// graceful shutdown.
func TestServeOverHTTP(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, node("n1", 4000, 4*gi, time.Minute))
	srv := httptest.NewServer(f.h)
	defer srv.Close()
	body, _ := json.Marshal(extenderv1.ExtenderArgs{Pod: pod("p", "", 1000, gi), NodeNames: &[]string{"n1", "n2"}})
	resp, err := http.Post(srv.URL+"/filter", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var res extenderv1.ExtenderFilterResult
	if err := json.NewDecoder(resp.Body).Decode(&res); err != nil {
		t.Fatal(err)
	}
	if got := deref(res.NodeNames); len(got) != 1 || got[0] != "n1" || len(res.FailedNodes) != 0 {
		t.Errorf("got %+v", res)
	}
}

func TestDefinitelyNotBound(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"conflict (already bound)", apiErr(409), true},
		{"forbidden", apiErr(403), true},
		{"not found", apiErr(404), true},
		{"too many requests (not processed)", apiErr(429), true},
		{"request timeout", apiErr(408), false},
		{"internal error", apiErr(500), false},
		{"gateway timeout", apiErr(504), false},
		{"context deadline", context.DeadlineExceeded, false},
		{"connection reset", errors.New("read: connection reset by peer"), false},
	}
	for _, tt := range tests {
		if got := definitelyNotBound(tt.err); got != tt.want {
			t.Errorf("%s: definitelyNotBound = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func apiErr(code int32) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: code}}
}

func TestNodesPerCallCountsTheNamesOfEachWellFormedCall(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, node("n1", 4000, 4*gi, time.Minute), node("n2", 4000, 4*gi, time.Minute))
	f.filter(pod("p", "", 1000, gi), "n1", "n2", "n3")
	f.prioritize(pod("p", "", 1000, gi), "n1", "n2")
	f.prioritize(pod("p", "", 1000, gi), "n2")
	// A malformed call is no call of the scheduler's: not counted.
	if rec := f.post("/filter", "{not json"); rec.Code != http.StatusBadRequest {
		t.Fatalf("malformed filter answered %d", rec.Code)
	}
	for verb, want := range map[string]struct{ count, sum float64 }{"filter": {1, 3}, "prioritize": {2, 3}} {
		count, sum := metrictest.Histogram(t, f.ext.server.metrics.nodesPerCall.WithLabelValues(verb))
		if float64(count) != want.count || sum != want.sum {
			t.Errorf("nodes_per_call{verb=%s}: %v calls, %v names; want %v, %v", verb, count, sum, want.count, want.sum)
		}
	}
}
