package webhook

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"testing"
	"time"
	"unicode/utf8"

	sigsjson "sigs.k8s.io/json"
)

func TestScanSafeFindsTheFirstSpecialByte(t *testing.T) {
	naive := func(b []byte, i int) int {
		for i < len(b) && b[i] >= 0x20 && b[i] != '"' && b[i] != '\\' {
			i++
		}
		return i
	}
	rng := rand.New(rand.NewPCG(1, 2))
	specials := []byte{'"', '\\', 0, 0x1f, '\n'}
	plain := []byte("abcXYZ019 ~!#$%&'()*+,-./:;<=>?@[]^_`{|}\x7f\x80\xc3\xa9\xff")
	for n := 0; n < 40; n++ {
		for pos := 0; pos <= n; pos++ {
			for _, sp := range specials {
				b := make([]byte, n)
				for i := range b {
					b[i] = plain[rng.IntN(len(plain))]
				}
				if pos < n {
					b[pos] = sp
				}
				for start := 0; start <= n; start++ {
					if got, want := scanSafe(b, start), naive(b, start); got != want {
						t.Fatalf("scanSafe(%q, %d) = %d, want %d", b, start, got, want)
					}
				}
			}
		}
	}
}

// stdDecode is the reference: encoding/json semantics, case-sensitive like
// the apiserver's decoder.
func stdDecode(data []byte) (admissionReview, error) {
	var rv admissionReview
	err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, &rv)
	return rv, err
}

var decodeCorpus = []string{
	`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Node"},"resource":{"group":"","version":"v1","resource":"nodes"},"subResource":"status","name":"n","operation":"UPDATE","object":{"kind":"Node","metadata":{"name":"n","labels":{"a":"b"},"annotations":{"x/y":"{\"cpu\":1}"}},"status":{"capacity":{"cpu":"4"},"allocatable":null,"images":[{"names":["a","b"],"sizeBytes":12}]}},"oldObject":{"x":[1,-2.5e+3,true,false,null,{},[]]}}}`,
	` { "apiVersion" : "admission.k8s.io/v1beta1" , "request" : { "uid" : "\u00e9\ud83d\ude00\ud800x\n\t\"\\\/" , "object" : null } } `,
	`{"request":{"object":{"metadata":{"labels":{"a":"1"}},"metadata":{"annotations":{"b":"2"}},"metadata":{"labels":{"c":"3"}}}}}`,
	`{"request":{"object":{"status":{"capacity":{"k\u002fx":"1","k/x":"2"}}}},"request":{"uid":"second"}}`,
	`{"request":null,"kind":"AdmissionReview"}`,
	`{"request":{"kind":null,"resource":{"resource":"nodes","extra":{"deep":[[[]]]}}}}`,
	`{"request":{"object":{"metadata":null,"status":{}}}}`,
	`{}`,
}

func TestDecodeReviewAgreesWithEncodingJSON(t *testing.T) {
	corpus := append([]string{string(RealisticReview(testNames, testNow, true))}, decodeCorpus...)
	for _, in := range corpus {
		want, err := stdDecode([]byte(in))
		if err != nil {
			t.Fatalf("reference rejects %s: %v", in, err)
		}
		var got admissionReview
		if err := decodeReview([]byte(in), &got, allKeys); err != nil {
			t.Fatalf("decodeReview rejects %s: %v", in, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("decodeReview(%.200s)\n got %+v\nwant %+v", in, dump(got), dump(want))
		}
	}
}

func dump(rv admissionReview) string {
	b, _ := json.Marshal(rv)
	return string(b)
}

func TestDecodeReviewKeepsOnlyWantedEntries(t *testing.T) {
	var rv admissionReview
	if err := decodeReview(RealisticReview(testNames, testNow, true), &rv, newWantedKeys(testNames)); err != nil {
		t.Fatal(err)
	}
	o := rv.Request.Object
	if len(o.Metadata.Labels) != 0 || len(o.Metadata.Annotations) != 1 || o.Metadata.Annotations[annKey] == "" {
		t.Errorf("metadata %+v", o.Metadata)
	}
	if o.Metadata.Labels == nil {
		t.Error("present labels map decoded as absent")
	}
	want := map[string]string{"cpu": "8", "memory": "32408200Ki", cpuKey: "1800", memKey: "5368709120"}
	if !reflect.DeepEqual(o.Status.Capacity, want) {
		t.Errorf("capacity %v, want %v", o.Status.Capacity, want)
	}
}

func TestDecodeReviewRejectsInvalidJSON(t *testing.T) {
	valid := `{"request":{"uid":"u","object":{"status":{"capacity":{"cpu":"1"}}},"oldObject":{"a":[1,2]}}}`
	if err := decodeReview([]byte(valid), &admissionReview{}, allKeys); err != nil {
		t.Fatal(err)
	}
	for _, in := range []string{
		``, ` `, `null`, `[]`, `"s"`, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `{,"a":1}`, `{"a":1 "b":2}`, `{'a':1}`,
		`{"a":[1,]}`, `{"a":[1 2]}`, `{"a":tru}`, `{"a":nul}`, `{"a":01}`, `{"a":1.}`, `{"a":.5}`, `{"a":1e}`, `{"a":-}`, `{"a":+1}`,
		`{"a":"x}`, `{"a":"\x"}`, `{"a":"\u12"}`, `{"a":"\u12g4"}`, "{\"a\":\"tab\there\"}", "{\"a\":\"nl\n\"}",
		`{"a":1}}`, `{"a":1} x`, `{"a":1}{}`, `{"request":{"uid":5}}`, `{"request":[]}`,
		`{"request":{"object":{"status":{"capacity":{"cpu":4}}}}}`, `{"request":{"object":{"metadata":{"labels":[]}}}}`,
		`{"a":` + string(bytes.Repeat([]byte("["), maxDepth+1)) + string(bytes.Repeat([]byte("]"), maxDepth+1)) + `}`,
	} {
		if err := decodeReview([]byte(in), &admissionReview{}, allKeys); err == nil {
			t.Errorf("decodeReview accepted %q", in)
		}
	}
}

// FuzzDecodeReview checks the hot-path decoder against encoding/json: it
// never accepts invalid JSON, and on UTF-8 input both accept it decodes the
// same values.
func FuzzDecodeReview(f *testing.F) {
	// Small seeds only: the fuzzer mutates and minimizes far faster on them
	// (the realistic 33 KB review is covered by the unit tests).
	for _, s := range decodeCorpus {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got admissionReview
		err := decodeReview(data, &got, allKeys)
		if err == nil && !json.Valid(data) {
			t.Fatalf("accepted invalid JSON %q", data)
		}
		if !utf8.Valid(data) || !json.Valid(data) {
			return
		}
		want, stdErr := stdDecode(data)
		if stdErr != nil || bytes.TrimLeft(data, " \t\r\n")[0] != '{' {
			return
		}
		if err != nil {
			t.Fatalf("rejected %q that encoding/json decodes: %v", data, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("decoded %q as\n%s\nencoding/json:\n%s", data, dump(got), dump(want))
		}
	})
}

func BenchmarkDecodeReview(b *testing.B) {
	body := RealisticReview(testNames, time.Now(), true)
	keys := newWantedKeys(testNames)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var rv admissionReview
		if err := decodeReview(body, &rv, keys); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeReviewEncodingJSON(b *testing.B) {
	body := RealisticReview(testNames, time.Now(), true)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		var rv admissionReview
		if err := json.Unmarshal(body, &rv); err != nil {
			b.Fatal(err)
		}
	}
}

func TestHandEncodedJSONMatchesEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uote`, `back\slash`, "ctl\x01\n", "é ü 😀", "<&>", "\xff invalid", "/status/capacity/a~1b"} {
		got := appendJSONString(nil, s)
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Errorf("appendJSONString(%q) = %s, not JSON: %v", s, got, err)
			continue
		}
		if utf8.ValidString(s) && back != s {
			t.Errorf("appendJSONString(%q) round-trips to %q", s, back)
		}
	}
	ops := []patchOp{
		{Op: "add", Path: "/status/capacity/kube-reclaim.io~1reclaimed-cpu", Value: "1500"},
		{Op: "add", Path: "/status", Value: map[string]map[string]string{"capacity": {"a/b": "1"}}},
		{Op: "remove", Path: `/metadata/annotations/we"ird`},
	}
	got, err := marshalPatch(ops)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(ops)
	var g, w any
	if json.Unmarshal(got, &g) != nil || json.Unmarshal(want, &w) != nil || !reflect.DeepEqual(g, w) {
		t.Errorf("marshalPatch = %s\nencoding/json %s", got, want)
	}
	ans := appendAnswer(nil, "admission.k8s.io/v1", `u"1`, []byte("[]"))
	var out map[string]any
	if err := json.Unmarshal(ans, &out); err != nil {
		t.Fatalf("answer %s: %v", ans, err)
	}
	resp := out["response"].(map[string]any)
	if out["kind"] != "AdmissionReview" || resp["uid"] != `u"1` || resp["allowed"] != true || resp["patch"] != "W10=" || resp["patchType"] != "JSONPatch" {
		t.Errorf("answer %s", ans)
	}
}
