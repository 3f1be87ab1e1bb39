package webhook

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/kube-reclaim/kube-reclaim/enforcement"
)

// Outcomes of a review, the label of the review duration histogram.
const (
	OutcomePatched   = "patched"   // answered with a patch
	OutcomeUnchanged = "unchanged" // a node status write that needed no change
	OutcomeSkipped   = "skipped"   // not a request the webhook mutates
	OutcomeDenied    = "denied"    // a pod refused: it cannot be made safe (pod reviews only)
	OutcomeError     = "error"     // answered without a patch (or 400/413) because of an error: allowed for nodes, denied for pods
	OutcomeBusy      = "busy"      // no in-flight slot in time: allowed unchanged for nodes, denied for pods
)

// Routes, the label of the in-flight waits counter.
const (
	RouteNodes = "nodes"
	RoutePods  = "pods"
)

// Patch kinds, the label of the patches counter.
const (
	PatchReclaimed       = "reclaimed"        // reclaimed-cpu/-memory in capacity and allocatable
	PatchOversell        = "oversell"         // native allocatable inflated
	PatchOversellRestore = "oversell-restore" // native allocatable restored to raw after the ratio was removed
	PatchOversellRecord  = "oversell-record"  // the oversell-raw annotation added, changed or removed
)

// Resources, the label of the clamped counter.
const (
	ResourceCPU    = "cpu"
	ResourceMemory = "memory"
)

// Error kinds, the label of the errors counter.
const (
	ErrBodyTooLarge       = "body-too-large"
	ErrReadBody           = "read-body"
	ErrNotAdmissionReview = "not-admission-review"
	ErrMalformed          = "malformed"
	// ErrTooManyItems: an array or map of the object past its bound
	// (bounded.go); a node review is allowed unchanged, a pod refused.
	ErrTooManyItems         = "too-many-items"
	ErrNoRequest            = "no-request"
	ErrWrongKind            = "wrong-kind"
	ErrNoObject             = "no-object"
	ErrPanic                = "panic"
	ErrEncode               = "encode"
	ErrInvalidOversellRatio = "invalid-oversell-ratio"
	ErrInvalidOversellRec   = "invalid-oversell-record"
	// ErrRewriteUnpatched: a PodRewriter changed a field the pod webhook
	// does not patch back (the pod is denied).
	ErrRewriteUnpatched = "rewrite-unpatched-fields"
)

type metrics struct {
	duration    *prometheus.HistogramVec
	podDuration *prometheus.HistogramVec
	patches     *prometheus.CounterVec
	stale       *prometheus.CounterVec
	clamped     *prometheus.CounterVec
	errors      *prometheus.CounterVec
	denials     *prometheus.CounterVec

	inFlight prometheus.Gauge
	waits    *prometheus.CounterVec

	// Pre-resolved children for the hot path.
	nodes, pods    *durations
	patchReclaimed prometheus.Counter
}

// waited counts a review that found every in-flight slot taken.
func (m *metrics) waited(route string, served bool) {
	result := WaitTimedOut
	if served {
		result = WaitServed
	}
	m.waits.WithLabelValues(route, result).Inc()
}

// durations are one route's review histogram children, resolved once.
type durations struct {
	patched, unchanged, skipped, denied, busy, err prometheus.Observer
}

func newDurations(h *prometheus.HistogramVec, withDenied bool) *durations {
	d := &durations{
		patched:   h.WithLabelValues(OutcomePatched),
		unchanged: h.WithLabelValues(OutcomeUnchanged),
		skipped:   h.WithLabelValues(OutcomeSkipped),
		busy:      h.WithLabelValues(OutcomeBusy),
		err:       h.WithLabelValues(OutcomeError),
	}
	if withDenied {
		d.denied = h.WithLabelValues(OutcomeDenied)
	}
	return d
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		duration: durationVec("review_duration_seconds",
			"Time to answer one node AdmissionReview (reading the body to writing the answer), by outcome: patched, unchanged, skipped, busy (no in-flight slot in time: allowed unchanged) or error."),
		podDuration: durationVec("pod_review_duration_seconds",
			"Time to answer one pod AdmissionReview ("+PodPath+"), by outcome: patched (limits enforced), unchanged (nothing reclaimed or already enforced, or a resize within the grant), denied (cannot be made safe, or a resize beyond the grant), skipped, busy (no in-flight slot in time) or error (busy and error are denied: the pod webhook fails closed)."),
		denials: counterVec("pod_denials_total",
			"Pods refused because they cannot be made safe on reclaimed capacity, by reason (see package enforcement: RequestNotLimit, Negative, NoMemoryGrant, NoCPUGrant, TooLarge; Rewrite for a profile rewrite error; ResizeBeyondGrant for an in-place resize refused). One pod may count under several reasons.",
			"reason"),
		patches: counterVec("patches_total",
			"Patches returned, by kind of change: reclaimed, oversell, oversell-restore, oversell-record. One review may count under several kinds.",
			"kind"),
		stale: counterVec("stale_injections_total",
			"Node status writes for which the room was taken as zero because the reclaimable annotation could not be trusted, by reason (annotation-missing, annotation-malformed, annotation-too-old, annotation-from-future, publisher-lease-expired); what the annotation says reclaimed pods held is still injected. Counted whether or not the stored values were already those.",
			"reason"),
		clamped: counterVec("clamped_total",
			"Node status writes whose reclaimed value (room or held) was above the node's native allocatable in the same object and was lowered to it, by resource (cpu, memory).",
			"resource"),
		errors: counterVec("errors_total",
			"Problems met while answering reviews, by kind. A node review is answered allowed without a patch (or with HTTP 400/413 when the body is not an AdmissionReview or too large), except invalid-oversell-* which only disable oversell on that node; a pod review is denied (fail closed).",
			"kind"),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "kube_reclaim",
			Subsystem: "webhook",
			Name:      "in_flight_reviews",
			Help:      "Reviews being decoded or answered now, nodes and pods together; at most --max-in-flight.",
		}),
		waits: counterVec("in_flight_waits_total",
			"Reviews that found all --max-in-flight slots taken, by route (nodes, pods) and result: served (a slot freed within half the call's timeout) or timed-out (node reviews allowed unchanged, pod reviews refused with 429); no-budget: the body could not be read in time because the bytes of bodies held at once were at their bound (answered as timed-out).",
			"route", "result"),
	}
	reg.MustRegister(m.duration, m.podDuration, m.patches, m.stale, m.clamped, m.errors, m.denials, m.inFlight, m.waits)
	m.nodes = newDurations(m.duration, false)
	m.pods = newDurations(m.podDuration, true)
	m.patchReclaimed = m.patches.WithLabelValues(PatchReclaimed)
	m.zeroSeries()
	return m
}

// zeroSeries makes every series visible from the start, at zero.
func (m *metrics) zeroSeries() {
	for _, route := range []string{RouteNodes, RoutePods} {
		for _, result := range []string{WaitServed, WaitTimedOut, WaitNoBudget} {
			m.waits.WithLabelValues(route, result)
		}
	}
	for _, k := range []string{PatchOversell, PatchOversellRestore, PatchOversellRecord} {
		m.patches.WithLabelValues(k)
	}
	for _, r := range []string{string(enforcement.ReasonRequestNotLimit), string(enforcement.ReasonNegative),
		string(enforcement.ReasonNoMemoryGrant), string(enforcement.ReasonNoCPUGrant), string(enforcement.ReasonTooLarge), DenialRewrite, DenialResize} {
		m.denials.WithLabelValues(r)
	}
	for _, r := range []string{ResourceCPU, ResourceMemory} {
		m.clamped.WithLabelValues(r)
	}
	for _, k := range []string{ErrBodyTooLarge, ErrReadBody, ErrNotAdmissionReview, ErrMalformed, ErrTooManyItems, ErrNoRequest,
		ErrWrongKind, ErrNoObject, ErrPanic, ErrEncode, ErrInvalidOversellRatio, ErrInvalidOversellRec, ErrRewriteUnpatched} {
		m.errors.WithLabelValues(k)
	}
}

// durationVec is a review duration histogram of the webhook, by outcome.
func durationVec(name, help string) *prometheus.HistogramVec {
	return prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "kube_reclaim",
		Subsystem: "webhook",
		Name:      name,
		Help:      help,
		Buckets:   []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .1},
	}, []string{"outcome"})
}

// counterVec is a counter of the webhook.
func counterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "kube_reclaim",
		Subsystem: "webhook",
		Name:      name,
		Help:      help,
	}, labels)
}

func (d *durations) observe(outcome string, seconds float64) {
	switch outcome {
	case OutcomePatched:
		d.patched.Observe(seconds)
	case OutcomeUnchanged:
		d.unchanged.Observe(seconds)
	case OutcomeSkipped:
		d.skipped.Observe(seconds)
	case OutcomeBusy:
		d.busy.Observe(seconds)
	case OutcomeDenied:
		if d.denied != nil {
			d.denied.Observe(seconds)
			return
		}
		d.err.Observe(seconds)
	default:
		d.err.Observe(seconds)
	}
}
