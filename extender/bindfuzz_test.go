package extender

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// FuzzBindBody feeds arbitrary /bind bodies to an extender whose filter
// passed one node, n1, for one managed pod. Whatever the body, the answer
// is a 400 naming the problem or a 200 carrying an ExtenderBindingResult,
// and the only Binding ever created is that pod's to n1: never a pod of
// another scheduler, one asking no reclaimed resource, another node or a
// pod the filter never saw.
func FuzzBindBody(f *testing.F) {
	managed := pod("managed", "", 1000, gi)
	plain := plainPod("plain")
	foreign := otherScheduler(pod("foreign", "", 1000, gi))
	foreignPlain := otherScheduler(plainPod("foreign-plain"))
	unfiltered := pod("unfiltered", "", 1000, gi)
	fx := newFixture(f, fixtureOpts{}, node("n1", 64000, 64*gi, time.Minute), node("n2", 64000, 64*gi, time.Minute),
		managed, plain, foreign, foreignPlain, unfiltered)
	var mu sync.Mutex
	var bindings []string
	fx.withholdBinds(func(b *corev1.Binding) error {
		mu.Lock()
		defer mu.Unlock()
		bindings = append(bindings, b.Namespace+"/"+b.Name+"/"+string(b.UID)+" to "+b.Target.Name)
		return nil
	})
	// The filter passes n1 for each pod it judges; the unmanaged pods are
	// filtered too, so that bind's own checks are what refuses them.
	for _, p := range []*corev1.Pod{managed, plain, foreign, foreignPlain} {
		fx.filter(p, "n1")
	}
	body := func(p *corev1.Pod, node string) string {
		b, _ := json.Marshal(extenderv1.ExtenderBindingArgs{PodName: p.Name, PodNamespace: p.Namespace, PodUID: p.UID, Node: node})
		return string(b)
	}
	// Positive control: the managed pod binds to n1.
	if res := fx.bindOnly(managed, "n1"); res.Error != "" || len(bindings) != 1 {
		f.Fatalf("the managed pod did not bind: %q, bindings %v", res.Error, bindings)
	}
	for _, s := range []string{
		body(managed, "n1"), body(managed, "n2"), body(plain, "n1"), body(foreign, "n1"), body(foreignPlain, "n1"),
		body(unfiltered, "n1"), body(unfiltered, "n2"),
		`{"PodName":"managed","PodNamespace":"batch","PodUID":"","Node":"n1"}`,
		`{"PodName":"managed","PodNamespace":"batch","PodUID":"uid-plain","Node":"n1"}`,
		`{"PodName":"plain","PodNamespace":"batch","PodUID":"uid-managed","Node":"n1"}`,
		`{"podname":"managed","podnamespace":"batch","poduid":"uid-managed","node":"n1"}`,
		`{"PodName":"managed","PodNamespace":"batch","PodUID":"uid-managed","Node":"n1","Node":"n2"}`,
		`{"PodName":"managed","PodNamespace":"batch","PodUID":"uid-managed"}`,
		`{"PodName":"managed","PodNamespace":"other","PodUID":"uid-managed","Node":"n1"}`,
		`{"PodName":"manag\u0065d","PodNamespace":"batch","PodUID":"uid-managed","Node":"n\u0031"}`,
		`{"PodName":1}`, `{"PodName":"managed"`, `[]`, `null`, `{}`, ``, "\xff\xfe",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		mu.Lock()
		before := len(bindings)
		mu.Unlock()
		rec := httptest.NewRecorder()
		fx.h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/bind", strings.NewReader(body)))
		switch rec.Code {
		case http.StatusOK:
			var res extenderv1.ExtenderBindingResult
			if err := json.Unmarshal(rec.Body.Bytes(), &res); err != nil {
				t.Fatalf("bind %q answered 200 %q: %v", body, rec.Body.String(), err)
			}
		case http.StatusBadRequest:
			if !strings.HasPrefix(rec.Body.String(), "malformed bind request: ") {
				t.Fatalf("bind %q: 400 %q, want it to name the problem", body, rec.Body.String())
			}
		default:
			t.Fatalf("bind %q: %d %q, want 200 or 400", body, rec.Code, rec.Body.String())
		}
		mu.Lock()
		defer mu.Unlock()
		for _, b := range bindings[before:] {
			if b != "batch/managed/uid-managed to n1" {
				t.Fatalf("bind %q created the Binding %s", body, b)
			}
		}
	})
}

// FuzzDecodeBindArgs feeds arbitrary bodies to the decoder of bind bodies.
// A body both it and encoding/json accept reads the same to both, and what
// encoding/json reads, written again as kube-scheduler writes it, it
// accepts unless a name is beyond maxNameBytes.
func FuzzDecodeBindArgs(f *testing.F) {
	for _, s := range []string{
		`{"PodName":"p","PodNamespace":"batch","PodUID":"uid-p","Node":"n1"}`,
		`{"podname":"p","PODNAMESPACE":"batch","PodUID":null,"Node":"n\u0031","Extra":[{"a":1}]}`,
		`{"PodName":"p","PodName":"q"}`, `{"PodName":1}`, `[]`, `null`, `{}`, ``, "\xff", `{"Node":"n1"} {}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		var ref extenderv1.ExtenderBindingArgs
		refErr := json.Unmarshal([]byte(body), &ref)
		got, err := decodeBindArgs([]byte(body))
		if err == nil && refErr == nil && *got != ref {
			t.Fatalf("decoded %+v, encoding/json %+v from %q", *got, ref, body)
		}
		if refErr != nil {
			return
		}
		canonical, err := json.Marshal(&ref)
		if err != nil {
			t.Fatal(err)
		}
		got, err = decodeBindArgs(canonical)
		var be *bodyError
		switch {
		case err == nil && *got != ref:
			t.Fatalf("decoded %+v, encoding/json %+v from %q", *got, ref, canonical)
		case err != nil && !(errors.As(err, &be) && be.bound):
			t.Fatalf("refused %q (%v), which encoding/json reads", canonical, err)
		}
	})
}
