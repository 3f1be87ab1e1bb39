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

// parseArgs decodes a filter or prioritize body as the server does, but
// without a node cache (every name is kept) and without pod records (the
// body's pod is read).
func parseArgs(body []byte) (*request, error) {
	rq := &request{scratch: make([]byte, 0, 64)}
	return rq, (&argsDecoder{names: testNames}).decode(body, rq)
}

func TestParseArgs(t *testing.T) {
	// podJSON asks 2000m + 300m (a sidecar init container) and 1Gi + 10Mi overhead.
	const wantCPU, wantMem = 2300, gi + 10*mi
	containers := func(n int) string {
		return `{"Pod":{"spec":{"containers":[` + strings.Repeat(`{},`, n-1) + `{}]}},"NodeNames":["a"]}`
	}
	tests := []struct {
		name      string
		body      string
		wantNames []string
		// wantErr: nil for success; errMalformed for any decoding error,
		// errBound for one beyond the decoders' bounds.
		wantErr error
	}{
		{"the scheduler's own encoding", `{"Pod":` + podJSON + `,"Nodes":null,"NodeNames":["n1","n2"]}`, []string{"n1", "n2"}, nil},
		{"whitespace and field order do not matter", ` { "NodeNames" : [ "n1" , "n2" ] , "Pod" : ` + podJSON + ` } ` + "\n", []string{"n1", "n2"}, nil},
		{"field names match case-insensitively, as encoding/json does", `{"pod":` + podJSON + `,"nodenames":["a"]}`, []string{"a"}, nil},
		{"escaped and non-ASCII names are decoded", `{"Pod":` + podJSON + `,"NodeNames":["esc\"aped","n\\2","\u00fcn\u00efcode"]}`, []string{`esc"aped`, `n\2`, "ünïcode"}, nil},
		{"empty NodeNames", `{"Pod":` + podJSON + `,"NodeNames":[]}`, []string{}, nil},
		{"null NodeNames", `{"Pod":` + podJSON + `,"NodeNames":null}`, nil, nil},
		{"unknown fields are skipped", `{"Pod":` + podJSON + `,"Extra":{"x":[1,{"y":null}]},"NodeNames":["a"]}`, []string{"a"}, nil},
		{"an empty Nodes list is fine", `{"Pod":` + podJSON + `,"Nodes":{"items":[]},"NodeNames":["a"]}`, []string{"a"}, nil},
		{"a null name decodes as encoding/json decodes it", `{"Pod":` + podJSON + `,"NodeNames":["a",null]}`, []string{"a", ""}, nil},
		{"as many containers as the bound", containers(maxContainers), []string{"a"}, nil},
		{"full Nodes", `{"Pod":` + podJSON + `,"Nodes":{"items":[{"metadata":{"name":"x"}}]}}`, nil, errNodesGiven},
		{"full Nodes next to NodeNames", `{"Pod":` + podJSON + `,"Nodes":{"items":[{}]},"NodeNames":["a"]}`, nil, errNodesGiven},
		{"Nodes are refused at their first item, whatever follows", `{"Pod":{},"Nodes":{"items":[{},` + strings.Repeat("x", 100), nil, errNodesGiven},
		{"a null pod", `{"Pod":null,"NodeNames":["a"]}`, nil, errNoPod},
		{"no pod", `{}`, nil, errNoPod},
		{"null", `null`, nil, errNoPod},
		{"one container more than the bound", containers(maxContainers + 1), nil, errBound},
		{"a name longer than the API server allows", `{"Pod":{"metadata":{"name":"` + strings.Repeat("n", maxNameBytes+1) + `"}},"NodeNames":[]}`, nil, errBound},
		{"a quantity longer than the bound", `{"Pod":{"spec":{"overhead":{"cpu":"` + strings.Repeat("1", maxQuantityBytes) + `"}}},"NodeNames":[]}`, nil, errBound},
		{"a repeated field", `{"Pod":` + podJSON + `,"NodeNames":["a"],"NodeNames":["b","c"]}`, nil, errMalformed},
		{"a field repeated in another case", `{"Pod":` + podJSON + `,"pod":{}}`, nil, errMalformed},
		{"a repeated field of the pod", `{"Pod":{"spec":{"nodeName":"a","NodeName":"b"}}}`, nil, errMalformed},
		{"a missing first element", `{"Pod":` + podJSON + `,"NodeNames":,"a"]}`, nil, errMalformed},
		{"a control character in a name", `{"Pod":` + podJSON + `,"NodeNames":["a` + "\x01" + `"]}`, nil, errMalformed},
		{"an object for NodeNames", `{"Pod":` + podJSON + `,"NodeNames":{"a":1}}`, nil, errMalformed},
		{"a number for a name", `{"Pod":` + podJSON + `,"NodeNames":["a",1]}`, nil, errMalformed},
		{"a trailing comma", `{"Pod":` + podJSON + `,"NodeNames":["a",]}`, nil, errMalformed},
		{"a truncated object", `{"Pod":` + podJSON + `,"NodeNames":["a"]`, nil, errMalformed},
		{"data after the object", `{"Pod":` + podJSON + `,"NodeNames":["a"]} x`, nil, errMalformed},
		{"a pod of the wrong shape", `{"Pod":{"spec":"oops"},"NodeNames":["a"]}`, nil, errMalformed},
		{"a quantity that is not one", `{"Pod":{"spec":{"overhead":{"cpu":"lots"}}}}`, nil, errMalformed},
		{"a creation time that is not RFC 3339", `{"Pod":{"metadata":{"creationTimestamp":"yesterday"}}}`, nil, errMalformed},
		{"invalid UTF-8", `{"Pod":{"metadata":{"name":"` + "\xff" + `"}}}`, nil, errMalformed},
		{"an array", `[]`, nil, errMalformed},
		{"an empty body", ``, nil, errMalformed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rq, err := parseArgs([]byte(tt.body))
			var be *bodyError
			switch {
			case errors.Is(tt.wantErr, errMalformed):
				if err == nil || errors.Is(err, errNoPod) || errors.Is(err, errNodesGiven) || (errors.As(err, &be) && be.bound) {
					t.Fatalf("err = %v, want a decoding error", err)
				}
				return
			case errors.Is(tt.wantErr, errBound):
				if !errors.As(err, &be) || !be.bound {
					t.Fatalf("err = %v, want a bound's", err)
				}
				return
			case !errors.Is(err, tt.wantErr):
				t.Fatalf("err = %v, want %v", err, tt.wantErr)
			case err != nil:
				return
			}
			if got := rq.names; len(got) != len(tt.wantNames) || (len(got) > 0 && !reflect.DeepEqual(got, tt.wantNames)) {
				t.Errorf("names = %#v, want %#v", got, tt.wantNames)
			}
			if tt.body != containers(maxContainers) && (rq.rec.mismatch || rq.rec.req != req(wantCPU, wantMem)) {
				t.Errorf("pod request = %+v (mismatch %v), want %dm / %d bytes", rq.rec.req, rq.rec.mismatch, wantCPU, wantMem)
			}
		})
	}
}

// A decoding error says where in the body it is.
func TestDecodingErrorsNameTheField(t *testing.T) {
	for _, tt := range []struct{ body, want string }{
		{`{"Pod":{"spec":{"containers":[{},{"resources":{"limits":{"cpu":true}}}]}}}`, "Pod.spec.containers[1].resources.limits.cpu: expects a quantity, found a boolean"},
		{`{"Pod":{"metadata":{"uid":7}}}`, "Pod.metadata.uid: expects a string, found a number"},
		{`{"Pod":{},"NodeNames":["a",{}]}`, "NodeNames[1]: expects a string, found an object"},
		{`{"Pod":{},"Nodes":{"items":[{}]}}`, "Nodes.items: carries Nodes (full node objects)"},
		{`{"Pod":{"spec":{"initContainers":[` + strings.Repeat(`{},`, maxContainers) + `{}]}}}`, "Pod.spec.initContainers: more than 256 containers"},
		{`{"Pod":{"status":{"phase":"Pending","Phase":"Running"}}}`, "Pod.status.phase: the field is repeated"},
	} {
		if _, err := parseArgs([]byte(tt.body)); err == nil || err.Error() != tt.want {
			t.Errorf("%.60s: err = %v, want %q", tt.body, err, tt.want)
		}
	}
}

// errMalformed and errBound mark the TestParseArgs cases that must fail to
// decode, for any reason or for a bound.
var (
	errMalformed = errors.New("malformed")
	errBound     = errors.New("bound")
)

// FuzzParseArgs feeds arbitrary bodies to the decoder of filter and
// prioritize bodies and to /filter and /prioritize. A body both the decoder
// and encoding/json (the decoder kube-scheduler's own encoding is meant
// for) accept reads the same to both; a body encoding/json reads, written
// again as kube-scheduler writes it, the decoder accepts unless it is
// beyond one of its bounds; and whatever the body, the answer is a 400
// naming the problem or a 200 that accounts for every node name the body
// carries that the extender's cache holds exactly once, and no other, in
// the scheduler's types.
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
		`{"Pod":{"metadata":{"namespace":"batch","name":"roomy-1","uid":"uid-roomy-1","resourceVersion":"1","creationTimestamp":"2025-03-01T12:00:00Z"},` +
			`"spec":{"nodeName":null,"schedulerName":"s","overhead":{"cpu":1,"memory":null},"initContainers":[{"name":"i","restartPolicy":"Always"}]},"status":{"phase":"Pending"}},"NodeNames":["roomy"]}`,
	}
	for _, s := range seeds {
		f.Add(s)
	}
	fx := newFixture(f, fixtureOpts{}, filterCluster()...)
	cached := map[string]bool{}
	for _, n := range fx.ext.cache.Names() {
		cached[n] = true
	}
	f.Fuzz(func(t *testing.T, body string) {
		var ref extenderv1.ExtenderArgs
		refErr := json.Unmarshal([]byte(body), &ref)
		rq, err := parseArgs([]byte(body))
		if err == nil && refErr == nil {
			sameAsEncodingJSON(t, body, rq, &ref)
		}
		if refErr == nil && ref.Pod != nil {
			// What encoding/json read, as kube-scheduler writes it.
			canonical, merr := json.Marshal(&ref)
			if merr != nil {
				t.Fatalf("encoding what encoding/json read of %q: %v", body, merr)
			}
			crq, cerr := parseArgs(canonical)
			var be *bodyError
			switch {
			case cerr == nil:
				sameAsEncodingJSON(t, string(canonical), crq, &ref)
			case errors.Is(cerr, errNodesGiven):
				if ref.Nodes == nil || len(ref.Nodes.Items) == 0 {
					t.Fatalf("%q refused for Nodes, which has no item", canonical)
				}
			case errors.As(cerr, &be) && be.bound:
			default:
				t.Fatalf("refused %q (%v), which encoding/json reads", canonical, cerr)
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
				if err == nil && len(knownNames(rq.names, cached)) <= len(cached) {
					t.Fatalf("%s %q refused (%q) although it decodes", verb, body, got)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s %q answered 200 %q, but the decoder says %v", verb, body, got, err)
			}
			checkAnswer(t, verb, rec.Body.Bytes(), knownNames(rq.names, cached))
		}
	})
}

// sameAsEncodingJSON fails t unless rq, decoded from body, holds what
// encoding/json read of it (ref): the same names and the same pod record.
func sameAsEncodingJSON(t *testing.T, body string, rq *request, ref *extenderv1.ExtenderArgs) {
	t.Helper()
	var want []string
	if ref.NodeNames != nil {
		want = *ref.NodeNames
	}
	if len(rq.names) != len(want) || (len(want) > 0 && !reflect.DeepEqual(rq.names, want)) {
		t.Fatalf("names %q, encoding/json %q for %q", rq.names, want, body)
	}
	if ref.Pod == nil {
		t.Fatalf("the decoder found a pod in %q, encoding/json none", body)
	}
	if got, want := *rq.rec, *newPodRecord(testNames, ref.Pod); got != want {
		t.Fatalf("pod record %+v, encoding/json's %+v for %q", got, want, body)
	}
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
		{"plain names", `{"Pod":` + podJSON + `,"NodeNames":["roomy","ghost","busy"]}`},
		{"an escaped name", `{"Pod":` + podJSON + `,"NodeNames":["roomy","gh\u006fst","busy"]}`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			rq := getRequest()
			if err := s.args.decode([]byte(tt.body), rq); err != nil {
				t.Fatal(err)
			}
			got := rq.names
			if !reflect.DeepEqual(got, []string{"roomy", "busy"}) || rq.unknown != 1 {
				t.Fatalf("names = %q with %d unknown, want roomy, busy and 1", got, rq.unknown)
			}
			s.cache.RLock()
			defer s.cache.RUnlock()
			for _, n := range got {
				if e := s.cache.EntryLocked([]byte(n)); e == nil || unsafe.StringData(e.Name()) != unsafe.StringData(n) {
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
