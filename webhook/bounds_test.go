package webhook

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kube-reclaim/kube-reclaim/test/metrictest"
)

// Forged reviews can carry any node name and annotation: the judge cache
// stays within its entry and byte bounds whatever they are, and keeps
// caching the nodes of a real cluster.
func TestJudgeCacheIsBoundedByEntriesAndBytes(t *testing.T) {
	th := newTestHandler(t, testNames, nil)
	m := th.nodes
	fresh := annotationValue(700, 800, testNow.Add(-time.Minute))
	check := func(what string) {
		t.Helper()
		m.judgeMu.RLock()
		defer m.judgeMu.RUnlock()
		if len(m.judged) > maxJudged || m.judgedBytes > maxJudgedBytes {
			t.Fatalf("%s: %d entries, %d bytes; bounds %d and %d", what, len(m.judged), m.judgedBytes, maxJudged, maxJudgedBytes)
		}
	}
	// Many names with values just under the cacheable size.
	big := fresh[:len(fresh)-1] + `,"pool":"` + strings.Repeat("p", maxJudgedValueBytes-len(fresh)-20) + `"}`
	for i := range 3000 {
		if f := m.judge(fmt.Sprintf("forged-%d", i), big, true, testNow); !f.Fresh {
			t.Fatalf("value under the bound judged %+v", f)
		}
	}
	check("3000 names with 4 KiB values")
	for i := range maxJudged + 10 {
		m.judge(fmt.Sprintf("n-%d", i), fresh, true, testNow)
	}
	check("more names than the entry bound")
	// Values above the cacheable size and names no Node can have are judged
	// but never cached.
	m.judge("n1", fresh, true, testNow)
	m.judgeMu.RLock()
	before := len(m.judged)
	m.judgeMu.RUnlock()
	huge := fresh[:len(fresh)-1] + `,"pool":"` + strings.Repeat("p", 1<<20) + `"}`
	if f := m.judge("n2", huge, true, testNow); f.Fresh {
		t.Errorf("a 1 MiB annotation was judged fresh: %+v", f)
	}
	if f := m.judge(strings.Repeat("x", maxNodeNameBytes+1), fresh, true, testNow); !f.Fresh {
		t.Errorf("an uncached name changed the verdict: %+v", f)
	}
	m.judgeMu.RLock()
	after, _ := len(m.judged), 0
	_, cachedHuge := m.judged["n2"]
	m.judgeMu.RUnlock()
	if after != before || cachedHuge {
		t.Errorf("uncacheable values or names were cached: %d -> %d entries", before, after)
	}
	// Control: a real node's annotation is cached.
	m.judgeMu.RLock()
	_, cached := m.judged["n1"]
	m.judgeMu.RUnlock()
	if !cached {
		t.Error("control: n1's annotation is not cached")
	}
}

// The log-once memory holds two hashes per entry and starts over past its
// bound, so forged names and values cannot grow it; it still logs a problem
// once per value.
func TestLogOnceIsBoundedAndLogsEachValueOnce(t *testing.T) {
	th := newTestHandler(t, testNames, nil)
	m := th.nodes
	if !m.logOnce("n1", "label", "k", "abc") || m.logOnce("n1", "label", "k", "abc") || !m.logOnce("n1", "label", "k", "abd") {
		t.Error("log once per node, place, key and value does not hold")
	}
	long := strings.Repeat("v", 4<<10)
	for i := range 2*maxLogged + 1 {
		m.logOnce(fmt.Sprintf("forged-%d-%s", i, long[:100]), "label", "k", long)
	}
	m.invalidMu.Lock()
	n := len(m.invalidLogged)
	m.invalidMu.Unlock()
	if n > maxLogged {
		t.Errorf("%d entries, bound %d", n, maxLogged)
	}
}

// No buffer sized by a large request is kept for the next one.
func TestPooledBuffersDoNotOutliveALargeRequest(t *testing.T) {
	th := newTestHandler(t, testNames, nil)
	obj := newNode("n1").setAnnotation("padding", strings.Repeat("x", 1<<20)).json(t)
	if a := post(t, th, reviewSpec{object: obj}.json(t)); a.code != http.StatusOK || !a.allowed {
		t.Fatalf("answer %+v", a)
	}
	for range 10 {
		if c := th.bufs.Get().(*bytes.Buffer).Cap(); c > maxPooledBuffer {
			t.Fatalf("a pooled buffer of %d bytes outlived its request", c)
		}
	}
}

// fillSlots takes every in-flight slot; the returned function gives one back.
func fillSlots(th testHandler) (release func()) {
	for range th.inflight.Cap() {
		if !th.inflight.Acquire(context.Background(), 0) {
			panic("a free in-flight slot could not be taken")
		}
	}
	return th.inflight.release
}

func postAt(t *testing.T, h http.Handler, target string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, target, bytes.NewReader(body)))
	return rec
}

// A review that finds every slot taken waits at most half the timeout the
// apiserver sends; then a node review is allowed unchanged (never refused)
// and a pod review is refused with 429. A slot freed in time serves the
// review in full (control).
func TestReviewsBeyondTheInFlightLimitWaitThenNodesAreAllowedAndPodsRefused(t *testing.T) {
	obj := newNode("n1").setAnnotation(annKey, annotationValue(700, 800, testNow.Add(-time.Minute))).json(t)

	t.Run("node review allowed unchanged in its own version and UID", func(t *testing.T) {
		th := newTestHandler(t, testNames, nil)
		th.SetMaxInFlight(2)
		fillSlots(th)
		start := time.Now()
		rec := postAt(t, th, Path+"?timeout=200ms", reviewSpec{apiVersion: admissionV1beta1, uid: "busy-1", object: obj}.json(t))
		if took := time.Since(start); took < 100*time.Millisecond || took > 5*time.Second {
			t.Errorf("answered after %s, want about half of 200ms", took)
		}
		a := decodeAnswer(t, rec)
		if !a.allowed || a.patch != nil || a.uid != "busy-1" || a.apiVersion != admissionV1beta1 {
			t.Errorf("answer %+v, want allowed without a patch, uid busy-1, v1beta1", a)
		}
		if got := testutil.ToFloat64(th.metrics.waits.WithLabelValues(RouteNodes, WaitTimedOut)); got != 1 {
			t.Errorf("waits{nodes,timed-out} = %v, want 1", got)
		}
		if got := metrictest.HistogramCount(t, th.metrics.duration.WithLabelValues(OutcomeBusy)); got != 1 {
			t.Errorf("busy node reviews = %v, want 1", got)
		}
	})

	t.Run("pod review refused with 429", func(t *testing.T) {
		th := newTestHandler(t, testNames, nil)
		fillSlots(th)
		// No timeout parameter: the pod route waits half its own timeout.
		_, resp := podAnswer(t, th, podReview(t, "CREATE", podJSON(reclaimed2c4g)))
		if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusTooManyRequests || resp.UID != "uid-1" ||
			!strings.Contains(resp.Result.Message, "in-flight slots stayed busy") {
			t.Errorf("response %+v, want a 429 refusal with uid-1", resp)
		}
		if got := testutil.ToFloat64(th.metrics.waits.WithLabelValues(RoutePods, WaitTimedOut)); got != 1 {
			t.Errorf("waits{pods,timed-out} = %v, want 1", got)
		}
	})

	t.Run("control: a slot freed in time serves the review with its patch", func(t *testing.T) {
		th := newTestHandler(t, testNames, nil)
		release := fillSlots(th)
		var wg sync.WaitGroup
		wg.Add(1)
		var rec *httptest.ResponseRecorder
		go func() {
			defer wg.Done()
			rec = postAt(t, th, Path+"?timeout=20s", reviewSpec{uid: "served-1", object: obj}.json(t))
		}()
		time.Sleep(50 * time.Millisecond)
		release()
		wg.Wait()
		a := decodeAnswer(t, rec)
		if !a.allowed || a.patch == nil || a.uid != "served-1" {
			t.Errorf("answer %+v, want allowed with a patch", a)
		}
		if got := testutil.ToFloat64(th.metrics.waits.WithLabelValues(RouteNodes, WaitServed)); got != 1 {
			t.Errorf("waits{nodes,served} = %v, want 1", got)
		}
		if got := testutil.ToFloat64(th.metrics.inFlight); got != 0 {
			t.Errorf("in-flight gauge %v after the review, want 0", got)
		}
	})

	t.Run("a body announced above the limit is refused before waiting", func(t *testing.T) {
		th := newTestHandler(t, testNames, nil)
		fillSlots(th)
		req := httptest.NewRequest(http.MethodPost, Path, strings.NewReader("{}"))
		req.ContentLength = DefaultMaxRequestBytes + 1
		rec := httptest.NewRecorder()
		start := time.Now()
		th.ServeHTTP(rec, req)
		if rec.Code != http.StatusRequestEntityTooLarge || time.Since(start) > time.Second {
			t.Errorf("HTTP %d after %s, want 413 at once", rec.Code, time.Since(start))
		}
	})
}

// decodeAnswer is post's decoding for a recorded answer.
func decodeAnswer(t *testing.T, rec *httptest.ResponseRecorder) answer {
	t.Helper()
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(rec.Code)
		_, _ = w.Write(rec.Body.Bytes())
	})
	return post(t, h, nil)
}

func TestPeekEnvelopeReadsVersionAndUIDFromACutBody(t *testing.T) {
	full := string(reviewSpec{apiVersion: admissionV1beta1, uid: "u-7", object: newNode("n1").json(t)}.json(t))
	for _, c := range []struct {
		name, body, apiVersion, uid string
	}{
		{"whole review", full, admissionV1beta1, "u-7"},
		{"cut right after the uid", full[:strings.Index(full, `"u-7"`)+5], admissionV1beta1, "u-7"},
		{"cut inside the uid", full[:strings.Index(full, `"u-7"`)+2], admissionV1beta1, ""},
		{"kind first, as the apiserver writes it", `{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u-8","kind":{}}}`, admissionV1, "u-8"},
		{"uid not a string", `{"apiVersion":"admission.k8s.io/v1","request":{"uid":7}}`, admissionV1, ""},
		{"not JSON", `<html>`, "", ""},
		{"empty", ``, "", ""},
	} {
		v, uid := peekEnvelope([]byte(c.body))
		if v != c.apiVersion || string(uid) != c.uid {
			t.Errorf("%s: got %q, %q; want %q, %q", c.name, v, uid, c.apiVersion, c.uid)
		}
	}
}
