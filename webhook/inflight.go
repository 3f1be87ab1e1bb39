package webhook

import (
	"net/http"
	"time"

	jsoniter "github.com/json-iterator/go"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-reclaim/kube-reclaim/internal/serving"
)

// DefaultMaxInFlight bounds the reviews decoded at once. The
// handler is CPU-bound and short, so a couple of slots per core keep the cores
// busy; each slot may hold a body of up to --max-request-bytes and its
// decoded object, so the bound is also what caps the webhook's memory
// whatever clients send.
const DefaultMaxInFlight = 4

// Results of waiting for an in-flight slot, the label of the waits counter.
const (
	WaitServed   = "served"    // a slot freed in time; the review was served
	WaitTimedOut = "timed-out" // no slot in time: node reviews allowed unchanged, pod reviews refused
	// WaitNoBudget: the body could not be read in time because the body
	// budget stayed spent; answered as timed-out.
	WaitNoBudget = "no-budget"
)

// peekBytes is how much of a body is looked at to answer a review that
// found no slot: the apiserver writes kind, apiVersion and request.uid
// first.
const peekBytes = 4 << 10

// inflight is the review routes' one serving.InFlight, shared by nodes and
// pods so that the bound is one number for the whole process.
type inflight struct {
	*serving.InFlight
}

func newInflight(n int) *inflight {
	if n <= 0 {
		n = DefaultMaxInFlight
	}
	return &inflight{serving.NewInFlight(n)}
}

// acquire waits for a slot until the request's context ends or wait has
// passed; it reports whether it got one and whether it had to wait.
func (f *inflight) acquire(r *http.Request, wait time.Duration) (ok, waited bool) {
	if f.Acquire(r.Context(), 0) {
		return true, false
	}
	return f.Acquire(r.Context(), wait), true
}

func (f *inflight) release() { f.Release() }

// reviewTimeout is the time the apiserver gives this call: it sends the
// webhook's timeoutSeconds as the timeout query parameter (for example
// "2s"). It is clamped to the route's own timeoutSeconds, routeTimeout
// (also the value when the parameter is absent or not a positive
// duration): the parameter comes from whoever calls, and a longer one
// would let a caller hold a connection and its reads as long as it likes.
func reviewTimeout(r *http.Request, routeTimeout time.Duration) time.Duration {
	if d, err := time.ParseDuration(r.URL.Query().Get("timeout")); err == nil && d > 0 {
		return min(d, routeTimeout)
	}
	return routeTimeout
}

// peekEnvelope reads the apiVersion and request.uid of a review from the
// start of its body, however the rest is cut off, so that a review that
// found no slot is answered in its own version and with its own UID
// without reading and holding the whole body.
func peekEnvelope(prefix []byte) (apiVersion string, uid types.UID) {
	it := reviewJSON.BorrowIterator(prefix)
	defer reviewJSON.ReturnIterator(it)
	for field := it.ReadObject(); field != "" && it.Error == nil; field = it.ReadObject() {
		switch field {
		case "apiVersion":
			apiVersion = readString(it)
		case "request":
			for f := it.ReadObject(); f != "" && it.Error == nil; f = it.ReadObject() {
				if f == "uid" {
					return apiVersion, types.UID(readString(it))
				}
				it.Skip()
			}
			return apiVersion, uid
		default:
			it.Skip()
		}
	}
	return apiVersion, uid
}

func readString(it *jsoniter.Iterator) string {
	if it.WhatIsNext() != jsoniter.StringValue {
		it.Skip()
		return ""
	}
	return it.ReadString()
}
