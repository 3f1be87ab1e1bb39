package webhook

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/test/metrictest"
)

// resized is the resources of a reclaimed container of 2000 reclaimed
// millicores and 4Gi with the given native requests and limits; ("0", "2",
// "0", "4Gi") is the container as the webhook stored it.
func resized(cpuReq, cpuLim, memReq, memLim string) string {
	return `{"requests":{"cpu":"` + cpuReq + `","memory":"` + memReq + `","kube-reclaim.io/reclaimed-cpu":"2000","kube-reclaim.io/reclaimed-memory":"4Gi"},` +
		`"limits":{"cpu":"` + cpuLim + `","memory":"` + memLim + `","kube-reclaim.io/reclaimed-cpu":"2000","kube-reclaim.io/reclaimed-memory":"4Gi"}}`
}

// An in-place resize (UPDATE pods/resize) of a reclaimed pod keeps each
// native limit within native request + reclaimed amount, or is refused with
// what is wrong; it is never rewritten. Pods without reclaimed resources are
// not the webhook's business.
func TestResizeIsRefusedBeyondTheGrantAndAllowedWithinIt(t *testing.T) {
	cases := []struct {
		name       string
		object     json.RawMessage
		wantDenied []string // substrings of the refusal; none: allowed unchanged
	}{
		{name: "a resize that changes nothing reclaimed-relevant is allowed",
			object: podJSON(resized("0", "2", "0", "4Gi"))},
		{name: "lowering limits below the grant is allowed",
			object: podJSON(resized("0", "1500m", "0", "3Gi"))},
		{name: "raising native requests and limits together keeps limits at the grant and is allowed",
			object: podJSON(resized("500m", "2500m", "1Gi", "5Gi"))},
		{name: "a regular pod's resize is allowed",
			object: podJSON(regular)},
		{name: "raising the cpu limit above the grant is refused",
			object:     podJSON(resized("0", "3", "0", "4Gi")),
			wantDenied: []string{"refuses this resize", `container "c0"`, "limits.cpu 3 is not within its grant 2"}},
		{name: "raising the memory limit above the grant is refused",
			object:     podJSON(resized("0", "2", "0", "8Gi")),
			wantDenied: []string{"limits.memory 8Gi is not within its grant 4Gi"}},
		{name: "each container beyond its grant is named",
			object:     podJSON(resized("0", "2", "0", "4Gi"), resized("0", "4", "0", "4Gi"), resized("0", "2", "0", "5Gi")),
			wantDenied: []string{`container "c1": limits.cpu 4`, `container "c2": limits.memory 5Gi`}},
		{name: "raising a native request alone is allowed: it raises the grant it is part of",
			object: podJSON(resized("1", "2", "0", "4Gi"))},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			th := newTestHandler(t, testNames, nil)
			body := reviewSpec{kind: "Pod", resource: "pods", subResource: "resize", operation: "UPDATE", object: c.object, oldObject: podJSON(resized("0", "2", "0", "4Gi"))}.json(t)
			code, resp := podAnswer(t, th, body)
			if code != http.StatusOK || resp.UID != "uid-1" {
				t.Fatalf("HTTP %d, response %+v", code, resp)
			}
			if resp.Patch != nil {
				t.Errorf("a resize was patched: %s", resp.Patch)
			}
			if len(c.wantDenied) == 0 {
				if !resp.Allowed {
					t.Fatalf("refused: %v", resp.Result)
				}
				if got := metrictest.HistogramCount(t, th.metrics.podDuration.WithLabelValues(OutcomeUnchanged)); got != 1 {
					t.Errorf("unchanged pod reviews = %v, want 1", got)
				}
				return
			}
			if resp.Allowed || resp.Result == nil || resp.Result.Code != 403 || resp.Result.Reason != metav1.StatusReasonForbidden {
				t.Fatalf("allowed=%v result=%+v, want a 403 refusal", resp.Allowed, resp.Result)
			}
			for _, s := range c.wantDenied {
				if !strings.Contains(resp.Result.Message, s) {
					t.Errorf("message %q does not say %q", resp.Result.Message, s)
				}
			}
			if strings.Contains(resp.Result.Message, "create it through") {
				t.Errorf("message gives the creation advice to a resize: %q", resp.Result.Message)
			}
			if got := testutil.ToFloat64(th.metrics.denials.WithLabelValues(DenialResize)); got != 1 {
				t.Errorf("pod_denials_total{reason=%s} = %v, want 1", DenialResize, got)
			}
		})
	}
}

// Other pod updates and other subresources are not reviewed.
func TestOnlyResizeUpdatesOfPodsAreChecked(t *testing.T) {
	beyond := podJSON(resized("0", "3", "0", "4Gi"))
	for _, sub := range []string{"-", "status", "ephemeralcontainers"} {
		th := newTestHandler(t, testNames, nil)
		_, resp := podAnswer(t, th, reviewSpec{kind: "Pod", resource: "pods", subResource: sub, operation: "UPDATE", object: beyond}.json(t))
		if !resp.Allowed || metrictest.HistogramCount(t, th.metrics.podDuration.WithLabelValues(OutcomeSkipped)) != 1 {
			t.Errorf("UPDATE pods/%s: allowed=%v, want skipped", sub, resp.Allowed)
		}
	}
	// Control: the same object on pods/resize is refused.
	th := newTestHandler(t, testNames, nil)
	if _, resp := podAnswer(t, th, reviewSpec{kind: "Pod", resource: "pods", subResource: "resize", operation: "UPDATE", object: beyond}.json(t)); resp.Allowed {
		t.Error("control: the resize beyond the grant was allowed")
	}
}
