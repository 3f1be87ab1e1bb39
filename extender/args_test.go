package extender

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"
	"unsafe"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

const podJSON = `{"metadata":{"name":"p","namespace":"batch","uid":"u1","labels":{"a":"b"}},` +
	`"spec":{"initContainers":[{"name":"i","restartPolicy":"Always","resources":{"requests":{"kube-reclaim.io/reclaimed-cpu":"300"},"limits":{"kube-reclaim.io/reclaimed-cpu":"300"}}}],` +
	`"containers":[{"name":"c","image":"x","resources":{"requests":{"cpu":"1","kube-reclaim.io/reclaimed-cpu":"2000","kube-reclaim.io/reclaimed-memory":"1Gi"},` +
	`"limits":{"kube-reclaim.io/reclaimed-cpu":"2000","kube-reclaim.io/reclaimed-memory":"1Gi"}}}],` +
	`"overhead":{"kube-reclaim.io/reclaimed-memory":"10Mi"}},"status":{"phase":"Pending"}}`

func TestParseArgs(t *testing.T) {
	// podJSON asks 2000m + 300m (a sidecar init container) and 1Gi + 10Mi overhead.
	const wantCPU, wantMem = 2300, gi + 10*mi
	tests := []struct {
		name      string
		body      string
		wantNames []string
		wantErr   error // nil: success; errMalformed: any decoding error
	}{
		{"the scheduler's own encoding", `{"Pod":` + podJSON + `,"Nodes":null,"NodeNames":["n1","n2"]}`, []string{"n1", "n2"}, nil},
		{"whitespace and field order do not matter", ` { "NodeNames" : [ "n1" , "n2" ] , "Pod" : ` + podJSON + ` } ` + "\n", []string{"n1", "n2"}, nil},
		{"field names match case-insensitively, as encoding/json does", `{"pod":` + podJSON + `,"nodenames":["a"]}`, []string{"a"}, nil},
		{"escaped and non-ASCII names are decoded", `{"Pod":` + podJSON + `,"NodeNames":["esc\"aped","n\\2","\u00fcn\u00efcode"]}`, []string{`esc"aped`, `n\2`, "ünïcode"}, nil},
		{"empty NodeNames", `{"Pod":` + podJSON + `,"NodeNames":[]}`, []string{}, nil},
		{"null NodeNames", `{"Pod":` + podJSON + `,"NodeNames":null}`, nil, nil},
		{"a repeated field keeps the last value", `{"Pod":` + podJSON + `,"NodeNames":["a"],"NodeNames":["b","c"]}`, []string{"b", "c"}, nil},
		// An escaped name sends the body to encoding/json.
		{"escaped: a repeated field keeps the last value", `{"Pod":` + podJSON + `,"NodeNames":["\u0061"],"NodeNames":["b","c"]}`, []string{"b", "c"}, nil},
		{"escaped: names after a null", `{"Pod":` + podJSON + `,"NodeNames":null,"NodeNames":["\u0061"]}`, []string{"a"}, nil},
		{"escaped: a null after names", `{"Pod":` + podJSON + `,"NodeNames":["\u0061"],"NodeNames":null}`, nil, nil},
		{"unknown fields are ignored", `{"Pod":` + podJSON + `,"Extra":1,"NodeNames":["a"]}`, []string{"a"}, nil},
		{"Nodes next to NodeNames is fine", `{"Pod":` + podJSON + `,"Nodes":{"items":[{"metadata":{"name":"x"}}]},"NodeNames":["a"]}`, []string{"a"}, nil},
		{"an empty Nodes list without NodeNames is fine", `{"Pod":` + podJSON + `,"Nodes":{"items":[]}}`, nil, nil},
		{"full Nodes without NodeNames", `{"Pod":` + podJSON + `,"Nodes":{"items":[{"metadata":{"name":"x"}}]}}`, nil, errNodesGiven},
		{"a null pod", `{"Pod":null,"NodeNames":["a"]}`, nil, errNoPod},
		{"no pod", `{}`, nil, errNoPod},
		{"a null name decodes as encoding/json decodes it", `{"Pod":` + podJSON + `,"NodeNames":["a",null]}`, []string{"a", ""}, nil},
		{"a missing first element", `{"Pod":` + podJSON + `,"NodeNames":,"a"]}`, nil, errMalformed},
		{"a control character in a name", `{"Pod":` + podJSON + `,"NodeNames":["a` + "\x01" + `"]}`, nil, errMalformed},
		{"an object for NodeNames", `{"Pod":` + podJSON + `,"NodeNames":{"a":1}}`, nil, errMalformed},
		{"a number for a name", `{"Pod":` + podJSON + `,"NodeNames":["a",1]}`, nil, errMalformed},
		{"a trailing comma", `{"Pod":` + podJSON + `,"NodeNames":["a",]}`, nil, errMalformed},
		{"a truncated object", `{"Pod":` + podJSON + `,"NodeNames":["a"]`, nil, errMalformed},
		{"data after the object", `{"Pod":` + podJSON + `,"NodeNames":["a"]} x`, nil, errMalformed},
		{"a pod of the wrong shape", `{"Pod":{"spec":"oops"},"NodeNames":["a"]}`, nil, errMalformed},
		{"an array", `[]`, nil, errMalformed},
		{"an empty body", ``, nil, errMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args, err := parseArgs([]byte(tt.body))
			switch {
			case errors.Is(tt.wantErr, errMalformed):
				if err == nil || errors.Is(err, errNoPod) || errors.Is(err, errNodesGiven) {
					t.Fatalf("err = %v, want a decoding error", err)
				}
				return
			case !errors.Is(err, tt.wantErr):
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			case err != nil:
				return
			}
			if got := nodeNames(args); !reflect.DeepEqual(got, tt.wantNames) {
				t.Errorf("names = %#v, want %#v", got, tt.wantNames)
			}
			r, mismatch := testNames.PodRequest(args.Pod)
			if mismatch || r.CPUMilli != wantCPU || r.MemoryBytes != wantMem {
				t.Errorf("pod request = %+v (mismatch %v), want %dm / %d bytes", r, mismatch, wantCPU, wantMem)
			}
		})
	}
}

// errMalformed marks the TestParseArgs cases that must fail to decode.
var errMalformed = errors.New("malformed")

// The answers decode, with encoding/json, into the upstream types with the
// expected content, also for names that need escaping (which send the
// body to encoding/json): names the cache does not hold are left out.
func TestAnswersDecodeIntoUpstreamTypes(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, filterCluster()...)
	names := []string{"roomy", "cpu-short", `we"ird`, "ünï", "<&>", "busy"}
	body, _ := json.Marshal(extenderv1.ExtenderArgs{Pod: pod("p", "", 2000, 2*gi), NodeNames: &names})
	var fr extenderv1.ExtenderFilterResult
	decodeOK(t, f.post("/filter", body), &fr)
	want := extenderv1.ExtenderFilterResult{NodeNames: &[]string{"roomy"}, FailedNodes: extenderv1.FailedNodesMap{
		"cpu-short": "reclaimed-cpu: need 2000m, free 500m", "busy": "reclaimed-cpu: need 2000m, free 500m; reclaimed-memory: need 2Gi, free 1Gi"}}
	if !reflect.DeepEqual(fr, want) {
		t.Errorf("filter = %+v\nwant %+v", fr, want)
	}
	var pl extenderv1.HostPriorityList
	decodeOK(t, f.post("/prioritize", body), &pl)
	if len(pl) != 3 || pl[0].Host != "roomy" || pl[0].Score == 0 || pl[1].Host != "cpu-short" || pl[2].Host != "busy" {
		t.Errorf("prioritize = %+v", pl)
	}
}

// FuzzParseArgs feeds arbitrary bodies to parseArgs and to /filter and
// /prioritize. parseArgs (json-iterator) must read what encoding/json, the
// decoder kube-scheduler's own encoding is meant for, reads; and whatever the
// body, the answer is a 400 naming the problem or a 200 that accounts for
// every node name the body carries that the extender's cache holds exactly
// once, and no other, in the scheduler's types.
func FuzzParseArgs(f *testing.F) {
	seeds := []string{
		`{"Pod":` + podJSON + `,"Nodes":null,"NodeNames":["roomy","cpu-short","busy","stale","missing","gone"]}`,
		`{"NodeNames":["roomy"],"Pod":{"spec":{"containers":[{"resources":{"requests":{"kube-reclaim.io/reclaimed-cpu":"5"},"limits":{"kube-reclaim.io/reclaimed-cpu":"5"}}}]}}}`,
		`{"Pod":{"spec":{"containers":[{"resources":{"limits":{"kube-reclaim.io/reclaimed-cpu":"1"}}}]}},"NodeNames":["roomy","a"]}`,
		`{"pod":` + podJSON + `,"nodenames":["roomy","roomy","esc\"aped","\u00fc"]}`,
		`{"Pod":{},"NodeNames":[]}`,
		`{"Pod":` + podJSON + `,"Nodes":{"items":[{"metadata":{"name":"x"}}]}}`,
		`{"Pod":{},"NodeNames":,"roomy"]}`, `{"Pod":{},"NodeNames":["roomy",null,"busy"]}`, `{"Pod":{},"NodeNames":["ro\u006fmy"]}`,
		`{"Pod":null}`, `{"Pod":{"spec":"oops"}}`, `{}`, `[]`, ``, `null`,
		`{"Pod":{},"NodeNames":null,"NodeNames":["ro\u006fmy","busy"]}`, `{"Pod":{},"NodeNames":["ro\u006fmy"],"NodeNames":null}`,
		`{"Pod":{},"NodeNames":"roomy\u0000"}`, `{"Pod":{},"NodeNames":["roomy",{"a":1}],"x":"\u0000"}`,
	}
	for _, s := range seeds {
		f.Add(s)
	}
	fx := newFixture(f, fixtureOpts{}, filterCluster()...)
	fx.ext.cache.mu.RLock()
	cached := map[string]bool{}
	for n := range fx.ext.cache.nodes {
		cached[n] = true
	}
	fx.ext.cache.mu.RUnlock()
	f.Fuzz(func(t *testing.T, body string) {
		var ref extenderv1.ExtenderArgs
		refErr := json.Unmarshal([]byte(body), &ref)
		// parseArgs reads what encoding/json reads.
		if args, err := parseArgs([]byte(body)); err == nil {
			if refErr != nil {
				t.Fatalf("parseArgs accepted %q, which encoding/json refuses: %v", body, refErr)
			}
			if ref.Pod == nil {
				t.Fatalf("parseArgs found a pod in %q, encoding/json none", body)
			}
			if !reflect.DeepEqual(nodeNames(args), nodeNames(&ref)) {
				t.Fatalf("names %q, encoding/json %q for %q", nodeNames(args), nodeNames(&ref), body)
			}
			r, m := testNames.PodRequest(args.Pod)
			if wr, wm := testNames.PodRequest(ref.Pod); r != wr || m != wm {
				t.Fatalf("pod request %+v %v, encoding/json %+v %v for %q", r, m, wr, wm, body)
			}
		}
		for _, verb := range []string{"filter", "prioritize"} {
			rec := httptest.NewRecorder()
			fx.h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/"+verb, strings.NewReader(body)))
			got := rec.Body.String()
			if rec.Code != http.StatusOK {
				if rec.Code != http.StatusBadRequest || !(strings.HasPrefix(got, "malformed "+verb+" request: ") || strings.Contains(got, "nodeCacheCapable: true")) {
					t.Fatalf("%s %q: %d %q, want 200 or a 400 naming the problem", verb, body, rec.Code, got)
				}
				known := knownNames(nodeNames(&ref), cached)
				if refErr == nil && ref.Pod != nil && (ref.NodeNames != nil || ref.Nodes == nil || len(ref.Nodes.Items) == 0) && len(known) <= len(cached) {
					t.Fatalf("%s %q refused (%q) although it carries a pod and node names", verb, body, got)
				}
				continue
			}
			if refErr != nil || ref.Pod == nil {
				t.Fatalf("%s %q answered 200 %q, but encoding/json says %v (pod %v)", verb, body, got, refErr, ref.Pod != nil)
			}
			checkAnswer(t, verb, rec.Body.Bytes(), knownNames(nodeNames(&ref), cached))
		}
	})
}

// knownNames are the names the cache holds, in order: the others are left
// out of the answers.
func knownNames(names []string, cached map[string]bool) []string {
	var known []string
	for _, n := range names {
		if cached[n] {
			known = append(known, n)
		}
	}
	return known
}

// checkAnswer checks that a 200 answer lists every name once, in order where
// the type has an order.
func checkAnswer(t *testing.T, verb string, answer []byte, names []string) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(answer))
	dec.DisallowUnknownFields()
	if verb == "prioritize" {
		var pl extenderv1.HostPriorityList
		if err := dec.Decode(&pl); err != nil {
			t.Fatalf("prioritize answer %q: %v", answer, err)
		}
		if len(pl) != len(names) {
			t.Fatalf("prioritize answered %d hosts for %d names: %q", len(pl), len(names), answer)
		}
		for i, h := range pl {
			if h.Host != names[i] || h.Score < extenderv1.MinExtenderPriority || h.Score > extenderv1.MaxExtenderPriority {
				t.Fatalf("prioritize answer %d is %+v, name %q: %q", i, h, names[i], answer)
			}
		}
		return
	}
	var fr extenderv1.ExtenderFilterResult
	if err := dec.Decode(&fr); err != nil {
		t.Fatalf("filter answer %q: %v", answer, err)
	}
	if fr.Error != "" || fr.Nodes != nil || fr.NodeNames == nil {
		t.Fatalf("filter answer %q: want NodeNames, no Nodes, no Error", answer)
	}
	outcome := map[string]int{} // 1 passed, 2 failed, 4 unresolvable
	for _, n := range *fr.NodeNames {
		outcome[n] |= 1
	}
	for n := range fr.FailedNodes {
		outcome[n] |= 2
	}
	for n := range fr.FailedAndUnresolvableNodes {
		outcome[n] |= 4
	}
	passed := 0
	for _, n := range names {
		switch outcome[n] {
		case 1:
			if passed >= len(*fr.NodeNames) || (*fr.NodeNames)[passed] != n {
				t.Fatalf("filter passed %q out of input order %q: %q", n, names, answer)
			}
			passed++
		case 2, 4:
		default:
			t.Fatalf("filter outcome of %q is %d, want exactly one: %q", n, outcome[n], answer)
		}
	}
	unique := map[string]bool{}
	for _, n := range names {
		unique[n] = true
	}
	if len(outcome) != len(unique) || passed != len(*fr.NodeNames) {
		t.Fatalf("filter answer %q names nodes the request %q did not", answer, names)
	}
}

// Names the cache knows are handed out as the cache's own strings, not
// copied from every request; unknown names are counted, not kept.
func TestKnownNodeNamesAreNotCopied(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, filterCluster()...)
	s := f.ext.server
	for _, tt := range []struct{ name, body string }{
		{"json-iterator", `{"Pod":` + podJSON + `,"NodeNames":["roomy","ghost","busy"]}`},
		{"encoding/json (an escaped name)", `{"Pod":` + podJSON + `,"NodeNames":["roomy","gh\u006fst","busy"]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rq := new(request)
			args, err := decodeArgs(s.argsJSON, s.cache, []byte(tt.body), rq)
			if err != nil {
				t.Fatal(err)
			}
			got := nodeNames(args)
			if !reflect.DeepEqual(got, []string{"roomy", "busy"}) || rq.unknown != 1 {
				t.Fatalf("names = %q with %d unknown, want roomy, busy and 1", got, rq.unknown)
			}
			s.cache.mu.RLock()
			defer s.cache.mu.RUnlock()
			for _, n := range got {
				if e := s.cache.nodes[n]; e == nil || unsafe.StringData(e.name) != unsafe.StringData(n) {
					t.Errorf("%q does not share the cache's string", n)
				}
			}
		})
	}
}

// A body repeating known names beyond the cache's size is refused: it is
// not kube-scheduler's, and would otherwise grow the answer with the body.
func TestRepeatedNodeNamesBeyondTheCacheAreRefused(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, node("n1", 4000, 4*gi, time.Minute), node("n2", 4000, 4*gi, time.Minute))
	for _, tt := range []struct {
		name  string
		names []string
		want  int
	}{
		{"as many known names as cached nodes", []string{"n1", "n2"}, http.StatusOK},
		{"one known name repeated beyond the cache", []string{"n1", "n1", "n1"}, http.StatusBadRequest},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, esc := range []bool{false, true} {
				names := append([]string{}, tt.names...)
				body, _ := json.Marshal(extenderv1.ExtenderArgs{Pod: pod("p", "", 1000, gi), NodeNames: &names})
				if esc { // the same names through encoding/json
					body = bytes.ReplaceAll(body, []byte(`"n1"`), []byte(`"\u006e1"`))
				}
				rec := f.post("/filter", body)
				if rec.Code != tt.want || (tt.want != http.StatusOK && !strings.Contains(rec.Body.String(), "repeats node names")) {
					t.Errorf("escaped %v: %d %q, want %d", esc, rec.Code, rec.Body.String(), tt.want)
				}
			}
		})
	}
}
