package extender

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
)

// storedPodFixture: node "n" with 2000m / 4Gi of room and a pending pod
// "stored" at resourceVersion 7 asking 1000m / 1Gi, once the pod informer
// holds it.
func storedPodFixture(t *testing.T) (*fixture, *corev1.Pod) {
	t.Helper()
	p := pod("stored", "", 1000, gi)
	p.ResourceVersion = "7"
	f := newFixture(t, fixtureOpts{}, []runtime.Object{node("n", 2000, 4*gi, time.Minute), p}...)
	f.eventually("the stored pod in the informer", func() bool {
		rec, ok := f.ext.server.pods.pod(p.Namespace, p.Name)
		return ok && rec.resourceVersion == "7"
	})
	return f, p
}

// bodyWithPod is a filter body for node "n" whose pod has the metadata
// meta (a JSON object's members) and asks 3000m / 1Gi, more than "n" has.
func bodyWithPod(t *testing.T, meta string) string {
	t.Helper()
	return fmt.Sprintf(`{"Pod":{"metadata":{%s},%s,"NodeNames":["n"]}`, meta, specOnly(t)[1:])
}

const storedMeta = `"namespace":"batch","name":"stored","uid":"uid-stored","resourceVersion":"7"`

func TestFilterAnswersForTheInformersRecordOnlyWhenTheBodyNamesTheObjectItHolds(t *testing.T) {
	f, _ := storedPodFixture(t)
	const short = "reclaimed-cpu: need 3000m, free 2000m"
	tests := []struct {
		name string
		body string
		// wantShort: the answer is for the body's pod (3000m does not
		// fit), not for the record (1000m fits).
		wantShort bool
		// wantRefused: the body is refused with this message.
		wantRefused string
	}{
		{name: "the same namespace, name, UID and resourceVersion: the record", body: bodyWithPod(t, storedMeta)},
		{name: "metadata after spec: the record", body: fmt.Sprintf(`{"Pod":%s,"NodeNames":["n"]}`,
			strings.TrimSuffix(specOnly(t), "}")+`,"metadata":{`+storedMeta+`}}`)},
		{name: "an escaped key reads as encoding/json reads it: the record", body: bodyWithPod(t, strings.Replace(storedMeta, `"name"`, `"na\u006de"`, 1))},
		{name: "another resourceVersion: the body's pod", body: bodyWithPod(t, strings.Replace(storedMeta, `"7"`, `"8"`, 1)), wantShort: true},
		{name: "another UID: the body's pod", body: bodyWithPod(t, strings.Replace(storedMeta, "uid-stored", "uid-other", 1)), wantShort: true},
		{name: "a pod the informer does not hold: the body's pod", body: bodyWithPod(t, strings.Replace(storedMeta, `"stored"`, `"unknown"`, 1)), wantShort: true},
		{name: "no resourceVersion: the body's pod", body: bodyWithPod(t, `"namespace":"batch","name":"stored","uid":"uid-stored"`), wantShort: true},
		{name: "metadata spelled in another case reads as encoding/json reads it: the record", body: strings.Replace(bodyWithPod(t, storedMeta), `"metadata"`, `"Metadata"`, 1)},
		// encoding/json would read these otherwise than the first key
		// says (the last of two, or a merge): refused.
		{name: "a key encoding/json folds onto uid is refused", body: bodyWithPod(t, storedMeta+`,"UID":"uid-other"`), wantRefused: "Pod.metadata.uid: the field is repeated"},
		{name: "a non-ASCII key encoding/json folds onto namespace is refused", body: bodyWithPod(t, storedMeta+`,"nameſpace":"other"`), wantRefused: "Pod.metadata.namespace: the field is repeated"},
		{name: "a second Pod after the stored one is refused",
			body: strings.Replace(bodyWithPod(t, storedMeta), `,"NodeNames"`, `,"Pod":`+specOnly(t)+`,"NodeNames"`, 1), wantRefused: "Pod: the field is repeated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rec := f.post("/filter", tt.body)
			if tt.wantRefused != "" {
				if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), tt.wantRefused) {
					t.Fatalf("%d %q, want a 400 saying %q", rec.Code, rec.Body.String(), tt.wantRefused)
				}
				return
			}
			var res extenderv1.ExtenderFilterResult
			decodeOK(t, rec, &res)
			if tt.wantShort {
				if len(*res.NodeNames) != 0 || res.FailedNodes["n"] != short {
					t.Fatalf("answer %+v, want n failed with %q (the body's pod)", res, short)
				}
				return
			}
			if len(*res.NodeNames) != 1 || len(res.FailedNodes) != 0 {
				t.Fatalf("answer %+v (failed %v), want n passed (the record's 1000m fits)", res, res.FailedNodes)
			}
		})
	}
}

// specOnly is a Pod object with only the spec of a 3000m pod.
func specOnly(t *testing.T) string {
	t.Helper()
	spec, err := json.Marshal(pod("x", "", 3000, gi).Spec)
	if err != nil {
		t.Fatal(err)
	}
	return `{"spec":` + string(spec) + `}`
}

func TestAPodAnsweredFromItsRecordIsBoundOntoTheNodeItsFilterPassed(t *testing.T) {
	f, stored := storedPodFixture(t)
	// Without a filter call, bind refuses: the positive control of the
	// record the filter call leaves.
	if res := f.bindOnly(stored, "n"); res.Error == "" {
		t.Fatal("bind without a filter call succeeded")
	}
	rec := f.post("/filter", bodyWithPod(t, storedMeta))
	if rec.Code != http.StatusOK {
		t.Fatalf("filter: %d %s", rec.Code, rec.Body)
	}
	if res := f.bindOnly(stored, "n"); res.Error != "" {
		t.Fatalf("bind after the filter passed n: %s", res.Error)
	}
}
