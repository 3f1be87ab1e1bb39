package extender

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// slowParse is the reference: encoding/json with the upstream types.
func slowParse(body []byte) (names []string, req any, podNil bool, err error) {
	var args extenderv1.ExtenderArgs
	if err = json.Unmarshal(body, &args); err != nil {
		return nil, nil, false, err
	}
	if args.NodeNames != nil {
		names = *args.NodeNames
	}
	if args.Pod == nil {
		return names, nil, true, nil
	}
	r, m := testNames.PodRequest(args.Pod)
	return names, [2]any{r, m}, false, nil
}

func checkAgainstReference(t *testing.T, body []byte) {
	t.Helper()
	wantNames, wantReq, wantNil, wantErr := slowParse(body)
	got, err := fastParseArgs(body, nil)
	if err != nil {
		return // the fast path declined; parseArgs uses the reference
	}
	if wantErr != nil {
		t.Fatalf("fast path accepted what encoding/json rejects (%v): %q", wantErr, body)
	}
	if len(got.names) != len(wantNames) || (len(wantNames) > 0 && !reflect.DeepEqual(got.names, wantNames)) {
		t.Fatalf("names %q, encoding/json %q for %q", got.names, wantNames, body)
	}
	if (got.pod == nil) != wantNil {
		t.Fatalf("pod nil = %v, encoding/json %v for %q", got.pod == nil, wantNil, body)
	}
	if got.pod != nil {
		r, m := testNames.PodRequest(got.pod)
		if !reflect.DeepEqual([2]any{r, m}, wantReq) {
			t.Fatalf("pod request %v %v, encoding/json %v for %q", r, m, wantReq, body)
		}
	}
}

const podJSON = `{"metadata":{"name":"p","namespace":"batch","uid":"u1","labels":{"a":"b"}},` +
	`"spec":{"initContainers":[{"name":"i","restartPolicy":"Always","resources":{"requests":{"kube-reclaim.io/reclaimed-cpu":"300"},"limits":{"kube-reclaim.io/reclaimed-cpu":"300"}}}],` +
	`"containers":[{"name":"c","image":"x","resources":{"requests":{"cpu":"1","kube-reclaim.io/reclaimed-cpu":"2000","kube-reclaim.io/reclaimed-memory":"1Gi"},` +
	`"limits":{"kube-reclaim.io/reclaimed-cpu":"2000","kube-reclaim.io/reclaimed-memory":"1Gi"}}}],` +
	`"overhead":{"kube-reclaim.io/reclaimed-memory":"10Mi"}},"status":{"phase":"Pending"}}`

func TestFastParserAgreesWithEncodingJSON(t *testing.T) {
	bodies := []string{
		`{"Pod":` + podJSON + `,"Nodes":null,"NodeNames":["n1","n2"]}`,
		` { "NodeNames" : [ "n1" , "n2" ] , "Pod" : ` + podJSON + ` } ` + "\n",
		`{"pod":` + podJSON + `,"nodenames":["a"]}`,
		`{"Pod":` + podJSON + `,"NodeNames":[]}`,
		`{"Pod":` + podJSON + `,"NodeNames":null}`,
		`{"Pod":` + podJSON + `}`,
		`{"Pod":null,"NodeNames":["a"]}`,
		`{"Pod":` + podJSON + `,"NodeNames":["a"],"NodeNames":["b","c"]}`,
		`{"Pod":` + podJSON + `,"NodeNames":["a"],"Pod":{"metadata":{"name":"q"}}}`,
		`{"Pod":` + podJSON + `,"NodeNames":["esc\"aped","n\\2"]}`,
		`{"Pod":` + podJSON + `,"NodeNames":["ünïcode"]}`,
		`{"Pod":` + podJSON + `,"NodeNames":["a",]}`,
		`{"Pod":` + podJSON + `,"NodeNames":["a"]`,
		`{"Pod":` + podJSON + `,"NodeNames":["a"]} x`,
		`{"Pod":{"spec":{"containers":[{"resources":{"limits":{"kube-reclaim.io/reclaimed-cpu":"1"}}}]}},"NodeNames":["a"]}`,
		`{"Pod":{"spec":"oops"},"NodeNames":["a"]}`,
		`{"Pod":` + podJSON + `,"Nodes":{"items":[]},"NodeNames":["a"]}`,
		`{"Pod":` + podJSON + `,"Extra":1,"NodeNames":["a"]}`,
		`{}`, `[]`, ``, `null`,
	}
	for _, b := range bodies {
		checkAgainstReference(t, []byte(b))
	}
}

func FuzzParseArgs(f *testing.F) {
	f.Add(`{"Pod":` + podJSON + `,"Nodes":null,"NodeNames":["n1","n2"]}`)
	f.Add(`{"NodeNames":["a"],"Pod":{"spec":{"containers":[{"resources":{"requests":{"kube-reclaim.io/reclaimed-cpu":"5"}}}]}}}`)
	f.Add(`{"Pod":null}`)
	f.Fuzz(func(t *testing.T, body string) {
		checkAgainstReference(t, []byte(body))
		_, _ = parseArgs([]byte(body), nil) // never panics
	})
}

func TestPlainPrefix(t *testing.T) {
	simple := func(b []byte) int {
		for i, c := range b {
			if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
				return i
			}
		}
		return len(b)
	}
	var inputs []string
	for _, special := range []string{`"`, `\`, "\x00", "\x1f", "\x7f", "\x80", "é", "\xff", " "} {
		for pos := range 20 {
			inputs = append(inputs, strings.Repeat("a", pos)+special+strings.Repeat("b", 20-pos))
		}
	}
	inputs = append(inputs, "", "worker-pool-a-00001.cluster.example.com", strings.Repeat("!", 17))
	for _, in := range inputs {
		if got, want := plainPrefix([]byte(in)), simple([]byte(in)); got != want {
			t.Errorf("plainPrefix(%q) = %d, want %d", in, got, want)
		}
	}
}

func FuzzPlainPrefix(f *testing.F) {
	f.Add([]byte("worker-1\"x"))
	f.Fuzz(func(t *testing.T, b []byte) {
		want := len(b)
		for i, c := range b {
			if c < 0x20 || c >= utf8.RuneSelf || c == '"' || c == '\\' {
				want = i
				break
			}
		}
		if got := plainPrefix(b); got != want {
			t.Fatalf("plainPrefix(%q) = %d, want %d", b, got, want)
		}
	})
}

func TestAppendStringRoundTrips(t *testing.T) {
	for _, s := range []string{"", "node-1", `a"b\c`, "tab\tnl\ncr\r", "\x00\x01\x1f", "<&>", "ünïcode ✓", "\u2028", "bad\xffutf8"} {
		var back string
		b := appendString(nil, s)
		if err := json.Unmarshal(b, &back); err != nil {
			t.Errorf("appendString(%q) = %s: %v", s, b, err)
			continue
		}
		want := strings.ToValidUTF8(s, "\uFFFD")
		if back != want {
			t.Errorf("appendString(%q) decodes to %q, want %q", s, back, want)
		}
	}
}

// The answers written by hand decode, with encoding/json, into the upstream
// types with the expected content, also for names that need escaping (which
// take the standard decoder's path).
func TestAnswersDecodeIntoUpstreamTypes(t *testing.T) {
	f := newFixture(t, fixtureOpts{}, filterCluster()...)
	names := []string{"roomy", "cpu-short", `we"ird`, "ünï"}
	body, _ := json.Marshal(extenderv1.ExtenderArgs{Pod: pod("p", "", 2000, 2*gi), NodeNames: &names})
	var fr extenderv1.ExtenderFilterResult
	decodeOK(t, f.post("/filter", body), &fr)
	want := extenderv1.ExtenderFilterResult{NodeNames: &[]string{"roomy"}, FailedNodes: extenderv1.FailedNodesMap{
		"cpu-short": "reclaimed-cpu: need 2000m, free 500m", `we"ird`: "node not found in extender cache", "ünï": "node not found in extender cache"}}
	if !reflect.DeepEqual(fr, want) {
		t.Errorf("filter = %+v\nwant %+v", fr, want)
	}
	var pl extenderv1.HostPriorityList
	decodeOK(t, f.post("/prioritize", body), &pl)
	if len(pl) != 4 || pl[2].Host != `we"ird` || pl[3].Host != "ünï" || pl[0].Host != "roomy" || pl[0].Score == 0 {
		t.Errorf("prioritize = %+v", pl)
	}
}
