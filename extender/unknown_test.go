package extender

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"runtime"
	"testing"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// unknownNamesBody is a filter body of a pod asking 1000m / 1Gi with the
// known names first, then n distinct four-letter names no cache holds,
// written as kube-scheduler writes names or, escaped, as only
// encoding/json reads them.
func unknownNamesBody(t testing.TB, known []string, n int, escaped bool) []byte {
	t.Helper()
	p, err := json.Marshal(pod("p", "", 1000, gi))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteString(`{"Pod":`)
	b.Write(p)
	b.WriteString(`,"NodeNames":[`)
	for i, k := range known {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, "%q", k)
	}
	for i := range n {
		if i > 0 || len(known) > 0 {
			b.WriteByte(',')
		}
		name := []byte{'"', 'a' + byte(i/17576%26), 'a' + byte(i/676%26), 'a' + byte(i/26%26), 'a' + byte(i%26), '"'}
		if escaped && i == 0 {
			name = []byte(`"\u0041aaa"`) // one escape sends the whole body to encoding/json
		}
		b.Write(name)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// allocs returns the mallocs and bytes one POST of body to path costs.
func allocs(f *fixture, path string, body []byte) (mallocs, allocated uint64, rec *httptest.ResponseRecorder) {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	rec = httptest.NewRecorder()
	f.h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
	runtime.ReadMemStats(&after)
	return after.Mallocs - before.Mallocs, after.TotalAlloc - before.TotalAlloc, rec
}

// Names the cache does not hold are counted, not collected: a body of a
// hundred thousand of them costs no allocation per name and memory of
// about the body's size, and the answer still judges the known names.
func TestUnknownNodeNamesCostNoMemoryPerName(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, filterCluster()...)
	known := []string{"cpu-short", "roomy", "busy"}
	for _, tt := range []struct {
		name    string
		escaped bool
		// perName bounds the allocations per unknown name, bytesPerName
		// what they allocate beyond three times the body.
		perName      float64
		bytesPerName int
	}{
		{"json-iterator", false, 0.001, 0},
		// The fallback reads each name into a short-lived string.
		{"encoding/json", true, 2.01, 64},
	} {
		t.Run(tt.name, func(t *testing.T) {
			const small, large = 1000, 100000
			for _, path := range []string{"/filter", "/prioritize"} {
				f.t = t
				smallBody, largeBody := unknownNamesBody(t, known, small, tt.escaped), unknownNamesBody(t, known, large, tt.escaped)
				allocs(f, path, smallBody) // warm the pools
				ms, _, _ := allocs(f, path, smallBody)
				ml, bl, rec := allocs(f, path, largeBody)
				if per := (float64(ml) - float64(ms)) / (large - small); per > tt.perName {
					t.Errorf("%s: %.3f allocations per unknown name (%d for %d names, %d for %d), want at most %v",
						path, per, ms, small, ml, large, tt.perName)
				}
				if limit := uint64(3*len(largeBody) + tt.bytesPerName*large + 1<<20); bl > limit {
					t.Errorf("%s: %d bytes allocated for a %d-byte body, want at most %d", path, bl, len(largeBody), limit)
				}
				if rec.Code != http.StatusOK || rec.Body.Len() > 1024 {
					t.Fatalf("%s: %d, %d bytes: %.300s", path, rec.Code, rec.Body.Len(), rec.Body.String())
				}
				if path == "/filter" {
					var res extenderv1.ExtenderFilterResult
					decodeOK(t, rec, &res)
					wantFailed := extenderv1.FailedNodesMap{"cpu-short": "reclaimed-cpu: need 1000m, free 500m", "busy": "reclaimed-cpu: need 1000m, free 500m"}
					if !reflect.DeepEqual(deref(res.NodeNames), []string{"roomy"}) || !reflect.DeepEqual(res.FailedNodes, wantFailed) {
						t.Errorf("filter = %v %v, want roomy passed and the two short nodes failed", deref(res.NodeNames), res.FailedNodes)
					}
				}
			}
			f.t = t
			// The unknown names are counted once per call, as one aggregate.
			if got := f.filtered("unknown-node"); got < large {
				t.Errorf("filtered_nodes_total{reason=unknown-node} = %v, want at least %d", got, large)
			}
		})
	}
}

// Nothing sized by an unusual request stays in the request pool.
func TestPooledRequestsKeepNothingLarge(t *testing.T) {
	for len(requests) > 0 {
		<-requests
	}
	big := &request{names: make([]string, 0, maxPooledNames+1)}
	putRequest(big)
	bigMap := &request{failed: extenderv1.FailedNodesMap{}}
	for i := range maxPooledNames + 1 {
		bigMap.failed[fmt.Sprint(i)] = ""
	}
	putRequest(bigMap)
	small := &request{names: make([]string, 0, 10)}
	small.body.Grow(100)
	putRequest(small)
	if n := len(requests); n != 1 {
		t.Fatalf("%d requests pooled, want only the small one", n)
	}
	if rq := <-requests; rq != small {
		t.Error("the pooled request is not the small one")
	}
}
