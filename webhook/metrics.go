package webhook

import "github.com/prometheus/client_golang/prometheus"

// Outcomes of a review, the label of the review duration histogram.
const (
	OutcomePatched   = "patched"   // answered with a patch
	OutcomeUnchanged = "unchanged" // a node status write that needed no change
	OutcomeSkipped   = "skipped"   // not a request the webhook mutates
	OutcomeError     = "error"     // answered allowed without a patch (or 400/413) because of an error
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
	ErrBodyTooLarge         = "body-too-large"
	ErrReadBody             = "read-body"
	ErrNotAdmissionReview   = "not-admission-review"
	ErrMalformed            = "malformed"
	ErrNoRequest            = "no-request"
	ErrWrongKind            = "wrong-kind"
	ErrNoObject             = "no-object"
	ErrPanic                = "panic"
	ErrEncode               = "encode"
	ErrInvalidOversellRatio = "invalid-oversell-ratio"
	ErrInvalidOversellRec   = "invalid-oversell-record"
)

type metrics struct {
	duration *prometheus.HistogramVec
	patches  *prometheus.CounterVec
	stale    *prometheus.CounterVec
	clamped  *prometheus.CounterVec
	errors   *prometheus.CounterVec

	// Pre-resolved children for the hot path.
	durPatched, durUnchanged, durSkipped, durError prometheus.Observer
	patchReclaimed                                 prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "kube_reclaim",
			Subsystem: "webhook",
			Name:      "review_duration_seconds",
			Help:      "Time to answer one AdmissionReview (reading the body to writing the answer), by outcome: patched, unchanged, skipped or error.",
			Buckets:   []float64{.00005, .0001, .00025, .0005, .001, .0025, .005, .01, .025, .1},
		}, []string{"outcome"}),
		patches: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kube_reclaim",
			Subsystem: "webhook",
			Name:      "patches_total",
			Help:      "Patches returned, by kind of change: reclaimed, oversell, oversell-restore, oversell-record. One review may count under several kinds.",
		}, []string{"kind"}),
		stale: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kube_reclaim",
			Subsystem: "webhook",
			Name:      "stale_injections_total",
			Help:      "Node status writes for which the room was taken as zero because the reclaimable annotation could not be trusted, by reason (annotation-missing, annotation-malformed, annotation-too-old, annotation-from-future, publisher-lease-expired); what the annotation says reclaimed pods held is still injected. Counted whether or not the stored values were already those.",
		}, []string{"reason"}),
		clamped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kube_reclaim",
			Subsystem: "webhook",
			Name:      "clamped_total",
			Help:      "Node status writes whose reclaimed value (room or held) was above the node's native allocatable in the same object and was lowered to it, by resource (cpu, memory).",
		}, []string{"resource"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kube_reclaim",
			Subsystem: "webhook",
			Name:      "errors_total",
			Help:      "Problems met while answering reviews, by kind. The webhook never denies: every one of them is answered allowed without a patch (or with HTTP 400/413 when the body is not an AdmissionReview or too large), except invalid-oversell-* which only disable oversell on that node.",
		}, []string{"kind"}),
	}
	reg.MustRegister(m.duration, m.patches, m.stale, m.clamped, m.errors)
	m.durPatched = m.duration.WithLabelValues(OutcomePatched)
	m.durUnchanged = m.duration.WithLabelValues(OutcomeUnchanged)
	m.durSkipped = m.duration.WithLabelValues(OutcomeSkipped)
	m.durError = m.duration.WithLabelValues(OutcomeError)
	m.patchReclaimed = m.patches.WithLabelValues(PatchReclaimed)
	// Make every series visible from the start, at zero.
	for _, k := range []string{PatchOversell, PatchOversellRestore, PatchOversellRecord} {
		m.patches.WithLabelValues(k)
	}
	for _, r := range []string{ResourceCPU, ResourceMemory} {
		m.clamped.WithLabelValues(r)
	}
	for _, k := range []string{ErrBodyTooLarge, ErrReadBody, ErrNotAdmissionReview, ErrMalformed, ErrNoRequest,
		ErrWrongKind, ErrNoObject, ErrPanic, ErrEncode, ErrInvalidOversellRatio, ErrInvalidOversellRec} {
		m.errors.WithLabelValues(k)
	}
	return m
}

func (m *metrics) observe(outcome string, seconds float64) {
	switch outcome {
	case OutcomePatched:
		m.durPatched.Observe(seconds)
	case OutcomeUnchanged:
		m.durUnchanged.Observe(seconds)
	case OutcomeSkipped:
		m.durSkipped.Observe(seconds)
	default:
		m.durError.Observe(seconds)
	}
}
