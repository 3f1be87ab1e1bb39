package webhook

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/kube-reclaim/kube-reclaim/internal/boundedjson"
)

// items is n comma-separated elements made by format from their index.
func items(n int, format string) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(format, i)
	}
	return strings.Join(parts, ",")
}

// Every bounded array and map decodes in full up to its bound and stops at
// the first element past it, before reading that element: the element
// after the bound is not JSON at all, and the error is still the bound's.
func TestBoundedDecodingStopsAtTheFirstElementPastTheBound(t *testing.T) {
	const entry, container, claim = `"k%d":"1"`, `{"name":"c%d"}`, `{"name":"claim%d"}`
	for _, c := range []struct {
		name, field string
		max         int
		element     string
		// object wraps the elements (a %s) into a Node or Pod object.
		object string
		pod    bool
	}{
		{"node labels", "labels", 4096, entry, `{"metadata":{"name":"n1","labels":{%s}}}`, false},
		{"node annotations", "annotations", 4096, entry, `{"metadata":{"name":"n1","annotations":{%s}}}`, false},
		{"node capacity", "capacity", 1024, entry, `{"status":{"capacity":{%s}}}`, false},
		{"node allocatable", "allocatable", 1024, entry, `{"status":{"allocatable":{%s}}}`, false},
		{"pod labels", "labels", 4096, entry, `{"metadata":{"labels":{%s}}}`, true},
		{"pod annotations", "annotations", 4096, entry, `{"metadata":{"annotations":{%s}}}`, true},
		{"containers", "containers", 256, container, `{"spec":{"containers":[%s]}}`, true},
		{"init containers", "initContainers", 256, container, `{"spec":{"initContainers":[%s]}}`, true},
		{"overhead", "overhead", 64, entry, `{"spec":{"overhead":{%s}}}`, true},
		{"requests", "requests", 64, entry, `{"spec":{"containers":[{"name":"c","resources":{"requests":{%s}}}]}}`, true},
		{"limits", "limits", 64, entry, `{"spec":{"initContainers":[{"name":"c","resources":{"limits":{%s}}}]}}`, true},
		{"claims", "claims", 64, claim, `{"spec":{"containers":[{"name":"c","resources":{"claims":[%s]}}]}}`, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			pastTheBound, junk := "no element past the bound", ""
			decode := func(elements string) error {
				body := reviewSpec{object: json.RawMessage(fmt.Sprintf(c.object, elements))}.json(t)
				// Replaced in the encoded review, so that an element that
				// is not JSON can follow the bound.
				body = bytes.Replace(body, []byte(pastTheBound), []byte(junk), 1)
				if c.pod {
					var rv admissionReview[podObject]
					return decodeReview(body, &rv)
				}
				var rv admissionReview[nodeObject]
				return decodeReview(body, &rv)
			}
			if err := decode(items(c.max, c.element)); err != nil {
				t.Fatalf("%d elements, the bound: %v", c.max, err)
			}
			pastTheBound = strings.Replace(c.element, "%d", "PAST", 1)
			// A map's key is read before the bound is checked; its value
			// is not.
			junk = "!not json"
			if c.element == entry {
				junk = `"kPAST":!not json`
			}
			err := decode(items(c.max, c.element) + "," + pastTheBound)
			var be *boundedjson.Error
			if !errors.As(err, &be) || be.Field != c.field || be.Max != c.max {
				t.Fatalf("%d elements and junk: %v, want the bound of %q (%d)", c.max+1, err, c.field, c.max)
			}
			if msg := be.Error(); !strings.Contains(msg, fmt.Sprintf("%q has more than %d items", c.field, c.max)) {
				t.Errorf("message %q does not name the field and its bound", msg)
			}
		})
	}
}

// Past a bound, a pod review is refused with a message naming the bound
// (the pod route fails closed) and a node review is allowed unchanged (the
// node route never denies); both are counted. The same reviews within the
// bounds are mutated (control).
func TestReviewsPastABoundAreCountedNodesAllowedPodsRefused(t *testing.T) {
	manyContainers := func(n int) json.RawMessage {
		return json.RawMessage(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"batch"},"spec":{"containers":[` +
			items(n, `{"name":"c%d","resources":`+reclaimed2c4g+`}`) + `]}}`)
	}
	t.Run("pod", func(t *testing.T) {
		th := newTestHandler(t, testNames, nil)
		_, resp := podAnswer(t, th, podReview(t, "CREATE", manyContainers(257)))
		if resp == nil || resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusUnprocessableEntity ||
			!strings.Contains(resp.Result.Message, `"containers" has more than 256 items`) || resp.UID != "uid-1" {
			t.Fatalf("response %+v, want a 422 refusal naming the containers bound", resp)
		}
		if got := testutil.ToFloat64(th.metrics.errors.WithLabelValues(ErrTooManyItems)); got != 1 {
			t.Errorf("errors{too-many-items} = %v, want 1", got)
		}
		_, resp = podAnswer(t, th, podReview(t, "CREATE", manyContainers(256)))
		if resp == nil || !resp.Allowed || resp.Patch == nil {
			t.Errorf("control: 256 containers answered %+v, want allowed with a patch", resp)
		}
	})
	t.Run("node", func(t *testing.T) {
		th := newTestHandler(t, testNames, nil)
		n := newNode("n1").setAnnotation(annKey, annotationValue(700, 800, testNow.Add(-time.Minute)))
		for i := range 1000 {
			n.setStatus("capacity", fmt.Sprintf("example.com/r%d", i), "1")
		}
		if a := post(t, th, reviewSpec{object: n.json(t)}.json(t)); !a.allowed || a.patch == nil {
			t.Errorf("control: 1000 more capacity entries answered %+v, want allowed with a patch", a)
		}
		for i := range 30 {
			n.setStatus("capacity", fmt.Sprintf("example.com/more%d", i), "1")
		}
		a := post(t, th, reviewSpec{uid: "past", object: n.json(t)}.json(t))
		if a.code != http.StatusOK || !a.allowed || a.patch != nil || a.uid != "past" {
			t.Errorf("answer %+v, want allowed without a patch, uid past", a)
		}
		if got := testutil.ToFloat64(th.metrics.errors.WithLabelValues(ErrTooManyItems)); got != 1 {
			t.Errorf("errors{too-many-items} = %v, want 1", got)
		}
	})
}

// The slim pod holds every field the mutator, the profile rewriter and
// enforcement read, and every field the patch writes: on realistic pods it
// gives the answers a full corev1.Pod gives.
func TestSlimPodKeepsWhatTheMutatorReads(t *testing.T) {
	sidecarOverheadClaims := json.RawMessage(`{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p","namespace":"batch","labels":{"app":"x"},"annotations":{"a":"b"}},` +
		`"spec":{"initContainers":[{"name":"proxy","image":"envoy","restartPolicy":"Always","env":[{"name":"A","value":"1"}],` +
		`"resources":{"requests":{"kube-reclaim.io/reclaimed-cpu":"500","kube-reclaim.io/reclaimed-memory":"1Gi"},"limits":{"kube-reclaim.io/reclaimed-cpu":"500","kube-reclaim.io/reclaimed-memory":"1Gi"}}}],` +
		`"containers":[{"name":"main","image":"busybox","volumeMounts":[{"name":"v","mountPath":"/v"}],` +
		`"resources":{"requests":{"cpu":"100m","kube-reclaim.io/reclaimed-cpu":"2000","kube-reclaim.io/reclaimed-memory":"4Gi"},"limits":{"kube-reclaim.io/reclaimed-cpu":"2000","kube-reclaim.io/reclaimed-memory":"4Gi"},"claims":[{"name":"gpu"}]}}],` +
		`"volumes":[{"name":"v","emptyDir":{}}],"overhead":{"cpu":"50m","memory":"16Mi"},"priority":0,"schedulerName":"default-scheduler"}}`)
	profiled := func(ns string) json.RawMessage {
		return json.RawMessage(`{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"job-","namespace":"` + ns + `","labels":{"kube-reclaim.io/reclaimed":"true"}},` +
			`"spec":{"containers":[{"name":"a","image":"x","resources":{"requests":{"cpu":"1","memory":"1Gi"},"limits":{"cpu":"2"}}},{"name":"b","image":"y","resources":{"requests":{"cpu":"500m","memory":"256Mi"}}}],"priority":0,"schedulerName":"default-scheduler"}}`)
	}
	for _, c := range []struct {
		name     string
		op       admissionv1.Operation
		ns       string
		object   json.RawMessage
		rewriter bool
	}{
		{"reclaimed pod", admissionv1.Create, "batch", podJSON(reclaimed2c4g), false},
		{"regular and reclaimed containers", admissionv1.Create, "batch", podJSON(regular, reclaimed2c4g), true},
		{"sidecar, overhead and claims", admissionv1.Create, "batch", sidecarOverheadClaims, true},
		{"not enforceable", admissionv1.Create, "batch", podJSON(`{"requests":{"kube-reclaim.io/reclaimed-cpu":"1000"}}`), false},
		{"profile rewrite", admissionv1.Create, "data", profiled("data"), true},
		{"profile denial", admissionv1.Create, "web", profiled("web"), true},
		{"resize", admissionv1.Update, "batch", podJSON(resized("0", "3", "0", "4Gi")), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := &podMutator{names: testNames, metrics: newTestHandler(t, testNames, nil).metrics}
			if c.rewriter {
				m.rewriter = newTestRewriter(t, testProfiles)
			}
			var slim podObject
			if err := reviewJSON.Unmarshal(c.object, &slim); err != nil {
				t.Fatal(err)
			}
			var full corev1.Pod
			if err := json.Unmarshal(c.object, &full); err != nil {
				t.Fatal(err)
			}
			result := func(p *corev1.Pod) string {
				ops, err := m.mutatePod(c.op, c.ns, p)
				b, _ := json.Marshal(ops)
				return fmt.Sprintf("ops %s, error %v", b, err)
			}
			got, want := result(slim.pod()), result(&full)
			if got != want {
				t.Errorf("slim pod: %s\nfull pod: %s", got, want)
			}
			t.Log(want)
		})
	}
}

func TestReviewTimeoutIsClampedToTheRoutesOwn(t *testing.T) {
	const route = 2 * time.Second
	for _, c := range []struct {
		query string
		want  time.Duration
	}{
		{"", route},
		{"?timeout=2s", route},
		{"?timeout=500ms", 500 * time.Millisecond},
		{"?timeout=876000h", route},
		{"?timeout=3s", route},
		{"?timeout=-1s", route},
		{"?timeout=0s", route},
		{"?timeout=soon", route},
	} {
		r := httptest.NewRequest(http.MethodPost, Path+c.query, nil)
		if got := reviewTimeout(r, route); got != c.want {
			t.Errorf("%q: %s, want %s", c.query, got, c.want)
		}
	}
}

// holdHeaders opens n connections to addr that each send the headers of a
// pod review announcing a body, with the caller's own huge timeout, and
// then nothing; the returned function reads what each was answered.
func holdHeaders(t *testing.T, addr string, n int) (answers func() []string) {
	t.Helper()
	conns := make([]net.Conn, n)
	for i := range conns {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		if _, err := fmt.Fprintf(c, "POST %s?timeout=876000h HTTP/1.1\r\nHost: webhook\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n", PodPath); err != nil {
			t.Fatal(err)
		}
		conns[i] = c
	}
	return func() []string {
		var out []string
		for _, c := range conns {
			_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				out = append(out, err.Error())
				continue
			}
			_ = res.Body.Close()
			out = append(out, res.Status)
		}
		return out
	}
}

// Bodies are read before an in-flight slot is taken, under a deadline of a
// quarter of the route's timeout however long the caller asks: connections
// that send headers and then nothing hold no slot, a node review sent
// meanwhile is mutated, and they are answered 400 once the deadline passes.
// Control: with the slots really held, the same node review is allowed
// without its patch.
func TestConnectionsWithoutABodyHoldNoSlot(t *testing.T) {
	obj := newNode("n1").setAnnotation(annKey, annotationValue(700, 800, testNow.Add(-time.Minute))).json(t)
	serve := func(t *testing.T) (testHandler, *httptest.Server) {
		th := newTestHandler(t, testNames, nil)
		th.SetMaxInFlight(2)
		srv := httptest.NewServer(th)
		t.Cleanup(srv.Close)
		return th, srv
	}
	nodeReview := func(t *testing.T, srv *httptest.Server) answer {
		t.Helper()
		res, err := srv.Client().Post(srv.URL+Path+"?timeout=2s", "application/json", bytes.NewReader(reviewSpec{uid: "real", object: obj}.json(t)))
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var buf bytes.Buffer
		_, _ = buf.ReadFrom(res.Body)
		rec := httptest.NewRecorder()
		rec.WriteHeader(res.StatusCode)
		_, _ = rec.Write(buf.Bytes())
		return decodeAnswer(t, rec)
	}

	t.Run("eight connections with headers and no body", func(t *testing.T) {
		th, srv := serve(t)
		answers := holdHeaders(t, srv.Listener.Addr().String(), 8)
		time.Sleep(200 * time.Millisecond) // their handlers are reading
		if got := testutil.ToFloat64(th.metrics.inFlight); got != 0 {
			t.Errorf("in-flight gauge %v while the connections send nothing, want 0", got)
		}
		if a := nodeReview(t, srv); !a.allowed || a.patch == nil || a.uid != "real" {
			t.Errorf("node review answered %+v, want allowed with its patch", a)
		}
		for i, a := range answers() {
			if a != "400 Bad Request" {
				t.Errorf("connection %d answered %q, want 400 once its read deadline passed", i, a)
			}
		}
		if got := testutil.ToFloat64(th.metrics.errors.WithLabelValues(ErrReadBody)); got != 8 {
			t.Errorf("errors{read-body} = %v, want 8", got)
		}
	})

	t.Run("control: slots really held", func(t *testing.T) {
		th, srv := serve(t)
		fillSlots(th)
		if a := nodeReview(t, srv); !a.allowed || a.patch != nil || a.uid != "real" {
			t.Errorf("node review answered %+v, want allowed without a patch", a)
		}
	})
}

// The bytes of bodies held at once are bounded: with the budget spent, a
// node review is allowed unchanged and a pod review refused with 429 once
// the read deadline passes, and both are counted; with budget left, the
// same review is served (control).
func TestBodyBudgetBoundsTheBodiesHeldAtOnce(t *testing.T) {
	// Bodies larger than what is read before the budget is taken.
	pad := strings.Repeat("x", 4*peekBytes)
	obj := newNode("n1").setAnnotation(annKey, annotationValue(700, 800, testNow.Add(-time.Minute))).setAnnotation("pad", pad).json(t)
	pod := json.RawMessage(strings.Replace(string(podJSON(reclaimed2c4g)), `"metadata":{`, `"metadata":{"annotations":{"pad":"`+pad+`"},`, 1))
	th := newTestHandler(t, testNames, nil)
	th.SetMaxInFlight(1)
	budget := th.bodyBudget()
	total := 2 * th.maxRequestBytes()
	if !budget.TryAcquire(total) || budget.TryAcquire(1) {
		t.Fatalf("the budget is not two bodies of --max-request-bytes per slot (%d bytes)", total)
	}
	a := decodeAnswer(t, postAt(t, th, Path+"?timeout=200ms", reviewSpec{uid: "spent", object: obj}.json(t)))
	if !a.allowed || a.patch != nil || a.uid != "spent" {
		t.Errorf("node review with the budget spent: %+v, want allowed without a patch, uid spent", a)
	}
	_, resp := podAnswer(t, th, podReview(t, "CREATE", pod))
	if resp == nil || resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusTooManyRequests || resp.UID != "uid-1" ||
		!strings.Contains(resp.Result.Message, "bodies held at once") {
		t.Errorf("pod review with the budget spent: %+v, want 429", resp)
	}
	for _, route := range []string{RouteNodes, RoutePods} {
		if got := testutil.ToFloat64(th.metrics.waits.WithLabelValues(route, WaitNoBudget)); got != 1 {
			t.Errorf("waits{%s,no-budget} = %v, want 1", route, got)
		}
	}
	budget.Release(total)
	if a := decodeAnswer(t, postAt(t, th, Path+"?timeout=200ms", reviewSpec{uid: "left", object: obj}.json(t))); !a.allowed || a.patch == nil {
		t.Errorf("control: node review with budget left: %+v, want allowed with a patch", a)
	}
	// Everything taken was given back.
	if !budget.TryAcquire(total) {
		t.Error("the reviews did not give their budget back")
	}
}

// A review read again for its envelope skips its object without copying
// it, and still refuses an object that is not JSON.
func TestEnvelopeSkipsTheObjectWithoutCopyingIt(t *testing.T) {
	body := podReview(t, "CREATE", json.RawMessage(`{"spec":{"containers":[{"name":"c7"},`+strings.Repeat(`{},`, 500_000)+`{}]}}`))
	var env envelope
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	err := decodeReview(body, &env)
	runtime.ReadMemStats(&after)
	if err != nil || env.Request == nil || env.Request.UID != "uid-1" || env.Request.Resource.Resource != "pods" {
		t.Fatalf("envelope %+v, error %v", env.Request, err)
	}
	if allocated := after.TotalAlloc - before.TotalAlloc; allocated > uint64(len(body))/8 {
		t.Errorf("reading the envelope of a %d-byte review allocated %d bytes", len(body), allocated)
	}
	broken := bytes.Replace(body, []byte(`{"name":"c7"}`), []byte(`{"name":}`), 1)
	if err := decodeReview(broken, &env); err == nil {
		t.Error("an object that is not JSON was skipped without an error")
	}
}
