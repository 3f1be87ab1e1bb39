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
// expected content, also for names that need escaping.
func TestAnswersDecodeIntoUpstreamTypes(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, filterCluster()...)
	names := []string{"roomy", "cpu-short", `we"ird`, "ünï", "<&>"}
	body, _ := json.Marshal(extenderv1.ExtenderArgs{Pod: pod("p", "", 2000, 2*gi), NodeNames: &names})
	var fr extenderv1.ExtenderFilterResult
	decodeOK(t, f.post("/filter", body), &fr)
	want := extenderv1.ExtenderFilterResult{NodeNames: &[]string{"roomy"}, FailedNodes: extenderv1.FailedNodesMap{
		"cpu-short": "reclaimed-cpu: need 2000m, free 500m", `we"ird`: msgUnknownNode, "ünï": msgUnknownNode, "<&>": msgUnknownNode}}
	if !reflect.DeepEqual(fr, want) {
		t.Errorf("filter = %+v\nwant %+v", fr, want)
	}
	var pl extenderv1.HostPriorityList
	decodeOK(t, f.post("/prioritize", body), &pl)
	if len(pl) != 5 || pl[0].Host != "roomy" || pl[0].Score == 0 || pl[2].Host != `we"ird` || pl[3].Host != "ünï" || pl[4].Host != "<&>" {
		t.Errorf("prioritize = %+v", pl)
	}
}

// FuzzParseArgs feeds arbitrary bodies to parseArgs and to /filter and
// /prioritize. parseArgs (json-iterator) must read what encoding/json, the
// decoder kube-scheduler's own encoding is meant for, reads; and whatever the
// body, the answer is a 400 naming the problem or a 200 that accounts for
// every node name the body carries exactly once, in the scheduler's types.
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
	}
	for _, s := range seeds {
		f.Add(s)
	}
	fx := newFixture(f, fixtureOpts{}, filterCluster()...)
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
				if refErr == nil && ref.Pod != nil && (ref.NodeNames != nil || ref.Nodes == nil || len(ref.Nodes.Items) == 0) {
					t.Fatalf("%s %q refused (%q) although it carries a pod and node names", verb, body, got)
				}
				continue
			}
			if refErr != nil || ref.Pod == nil {
				t.Fatalf("%s %q answered 200 %q, but encoding/json says %v (pod %v)", verb, body, got, refErr, ref.Pod != nil)
			}
			checkAnswer(t, verb, rec.Body.Bytes(), nodeNames(&ref))
		}
	})
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
// copied from every request; unknown names are copied.
func TestKnownNodeNamesAreNotCopied(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, filterCluster()...)
	s := f.ext.server
	body := []byte(`{"Pod":` + podJSON + `,"NodeNames":["roomy","ghost","busy"]}`)
	args, err := decodeArgs(s.argsJSON, body, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := nodeNames(args)
	if !reflect.DeepEqual(got, []string{"roomy", "ghost", "busy"}) {
		t.Fatalf("names = %q", got)
	}
	s.cache.mu.RLock()
	defer s.cache.mu.RUnlock()
	for i, known := range []bool{true, false, true} {
		e := s.cache.nodes[got[i]]
		shared := e != nil && unsafe.StringData(e.name) == unsafe.StringData(got[i])
		if shared != known {
			t.Errorf("%q: shares the cache's string = %v, want %v", got[i], shared, known)
		}
	}
}
