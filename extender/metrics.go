package extender

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-reclaim/kube-reclaim/internal/serving"
	"github.com/kube-reclaim/kube-reclaim/placement"
)

// Bind results, the values of the result label of binds_total.
const (
	bindSuccess  = "success"   // Binding created
	bindConflict = "conflict"  // room gone (or never there) at bind time; no API call made
	bindRejected = "rejected"  // pod not managed here, invalid for reclaimed capacity or already bound; no API call made (bind_refusals_total says why)
	bindAPIError = "api-error" // the Binding call failed
)

// Reasons of bind_refusals_total: why bind placed nothing.
const (
	refusedNoUID       = "no-pod-uid"           // the bind names no PodUID
	refusedNotFiltered = "not-filtered"         // this extender's filter did not pass that node for that pod UID lately
	refusedScheduler   = "other-scheduler"      // spec.schedulerName is not one of --scheduler-name
	refusedNoRequest   = "no-reclaimed-request" // the pod asks no reclaimed resource
	refusedBound       = "already-bound"
	refusedMismatch    = "limits-mismatch"
	refusedNotEnforced = "not-enforced"
	refusedNoRoom      = "no-room"
	// refusedPodGone: the API server holds no pod of that name and UID.
	refusedPodGone = "pod-not-found"
	// refusedFilterDisagrees: the pod the filter judged for that UID is
	// not the pod the API server holds.
	refusedFilterDisagrees = "filter-disagrees"
)

// bindRefusalReasons are every reason of bind_refusals_total.
var bindRefusalReasons = []string{refusedNoUID, refusedNotFiltered, refusedPodGone, refusedFilterDisagrees, refusedScheduler,
	refusedNoRequest, refusedBound, refusedMismatch, refusedNotEnforced, refusedNoRoom}

type metrics struct {
	requests *serving.RequestMetrics
	filtered [placement.NReasons]prometheus.Counter // by reasonID, every label pre-created
	binds    *prometheus.CounterVec
	// bindSuccesses, bindFromInformer and bindFromAPI are children of
	// binds and bindLookups that every bind counts, resolved once.
	bindSuccesses, bindFromInformer, bindFromAPI prometheus.Counter
	// filterNotRecorded counts filter verdicts not kept for bind.
	filterNotRecorded prometheus.Counter
	conflicts         *prometheus.CounterVec
	cache             *placement.Metrics // what the placement cache counts
	notEnforced       *prometheus.CounterVec
	bindLookups       *prometheus.CounterVec
	bindRefusals      *prometheus.CounterVec
	// nodesPerCall is by verb (filter, prioritize).
	nodesPerCall *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) *metrics {
	const ns, sub = "kube_reclaim", "extender"
	filtered := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
		Name: "filtered_nodes_total",
		Help: "Nodes failed by the filter verb, by reason (insufficient-*, unknown-node, limits-mismatch, not-enforced, or the staleness reason of the node's annotation)."},
		[]string{"reason"})
	m := &metrics{
		requests: serving.NewRequestMetrics(reg, sub),
		binds: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "binds_total",
			Help: "Bind verb calls by result: success, conflict (room gone at bind time), rejected (invalid pod), api-error."},
			[]string{"result"}),
		conflicts: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "bind_conflicts_total",
			Help: "Binds refused because the node had no room left when the bind arrived, by reason."},
			[]string{"reason"}),
		cache: placement.NewMetrics(sub),
		notEnforced: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "not_enforced_refusals_total",
			Help: "Filter and bind calls (verb label) refused under --require-enforced because a reclaimed pod lacks the native limits the pod webhook sets: it was created while the pod webhook was not configured."},
			[]string{"verb"}),
		bindLookups: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "bind_pod_lookups_total",
			Help: "Where bind found the pod it binds, by source: informer, or api (a GET: the informer had not delivered the pod yet)."},
			[]string{"source"}),
		bindRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "bind_refusals_total",
			Help: "Bind calls that placed nothing, by reason: no-pod-uid, not-filtered (this extender's filter did not pass the node for that pod UID lately), pod-not-found (the API server holds no pod of that name and UID), filter-disagrees (the pod the filter judged for that UID is not the one the API server holds), other-scheduler (spec.schedulerName not in --scheduler-name), no-reclaimed-request, already-bound, limits-mismatch, not-enforced, no-room. Any but the last four on a steady cluster means something other than the scheduler calls the verbs."},
			[]string{"reason"}),
		nodesPerCall: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "nodes_per_call",
			Help: "Node names in each filter and prioritize call, by verb: the nodes kube-scheduler found for the pod, sized by its profile's percentageOfNodesToScore (never fewer than 100, or all nodes on smaller clusters). The extender's and the scheduler's work per pod grow with it.",
			// 100 and 250 are what the shipped profile sends up to 2,000 and at 5,000 nodes.
			Buckets: []float64{1, 10, 50, 100, 250, 500, 1000, 2500, 5000}},
			[]string{"verb"}),
	}
	for id := placement.RNone + 1; id < placement.NReasons; id++ {
		m.filtered[id] = filtered.WithLabelValues(placement.ReasonLabels[id])
	}
	for _, r := range []string{bindSuccess, bindConflict, bindRejected, bindAPIError} {
		m.binds.WithLabelValues(r)
	}
	for _, v := range []string{"filter", "bind"} {
		m.notEnforced.WithLabelValues(v)
	}
	m.bindSuccesses = m.binds.WithLabelValues(bindSuccess)
	m.bindFromInformer, m.bindFromAPI = m.bindLookups.WithLabelValues("informer"), m.bindLookups.WithLabelValues("api")
	m.filterNotRecorded = prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
		Name: "filter_verdicts_not_recorded_total",
		Help: "Filter calls whose verdict is not kept for bind because the body's pod disagrees (reclaimed requests, limits or scheduler name) with the pod the informer holds under that UID, or, before the informer has it, with the verdict kept for that UID already. Non-zero means something other than kube-scheduler calls /filter, or a pod changed between the scheduler's read of it and the extender's."})
	for _, r := range bindRefusalReasons {
		m.bindRefusals.WithLabelValues(r)
	}
	for _, v := range []string{"filter", "prioritize"} {
		m.nodesPerCall.WithLabelValues(v)
	}
	reg.MustRegister(filtered, m.binds, m.conflicts, m.notEnforced, m.bindLookups, m.bindRefusals, m.nodesPerCall, m.filterNotRecorded)
	reg.MustRegister(m.cache.Collectors()...)
	return m
}

// registerCacheGauges exposes the cache's sizes, read at scrape time.
func registerCacheGauges(reg prometheus.Registerer, c *placement.Cache) {
	const ns, sub = "kube_reclaim", "extender"
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "assumptions",
			Help: "Pods bound by this extender that the pod informer has not shown bound yet."},
			func() float64 { a, _, _ := c.Counts(); return float64(a) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "cached_nodes",
			Help: "Nodes in the extender's cache (known nodes and nodes still referenced by pods)."},
			func() float64 { _, n, _ := c.Counts(); return float64(n) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub, Name: "placed_reclaimed_pods",
			Help: "Non-terminal bound pods requesting reclaimed resources, counted against their nodes' room."},
			func() float64 { _, _, p := c.Counts(); return float64(p) }),
	)
}

// countFiltered adds one request's per-reason failure counts.
func (m *metrics) countFiltered(c *placement.ReasonCounts) {
	for id, n := range c {
		if n > 0 && m.filtered[id] != nil {
			m.filtered[id].Add(float64(n))
		}
	}
}

// pendingIndex indexes, in the pod informer, the pods that ask reclaimed
// resources and are not bound yet: a scrape reads them alone rather than
// every pod of the cluster.
const pendingIndex = "pending-reclaimed"

// pendingKeys is the one index value, shared: the informer calls
// pendingReclaimed on every pod event and only reads what it returns.
var pendingKeys = []string{pendingIndex}

func pendingReclaimed(obj any) ([]string, error) {
	if p, ok := obj.(*podRecord); ok && p.nodeName == "" && !p.terminal && !p.req.IsZero() {
		return pendingKeys, nil
	}
	return nil, nil
}

// pendingAges are the age buckets of pending_reclaimed_pods, by the upper
// bound of each (the last has none).
var pendingAges = []struct {
	label string
	below time.Duration
}{{"under-5m", 5 * time.Minute}, {"5m-30m", 30 * time.Minute}, {"over-30m", 0}}

// pendingCollector reports the Pending reclaimed pods at scrape time: the
// extender sees every pod, bound or not, whichever scheduler the pod names,
// so it is the role that tells how long reclaimed pods wait for room.
type pendingCollector struct {
	pods          cache.Indexer
	now           func() time.Time
	count, oldest *prometheus.Desc
}

// registerPendingGauges exports the count of the Pending reclaimed pods of
// the pod informer (indexed under pendingIndex) by age, and the age of the
// oldest.
func registerPendingGauges(reg prometheus.Registerer, pods cache.Indexer) {
	reg.MustRegister(&pendingCollector{pods: pods, now: time.Now,
		count: prometheus.NewDesc("kube_reclaim_extender_pending_reclaimed_pods",
			"Pods asking reclaimed resources that are not bound to a node yet, by time since their creation (age: under-5m, 5m-30m, over-30m).",
			[]string{"age"}, nil),
		oldest: prometheus.NewDesc("kube_reclaim_extender_oldest_pending_reclaimed_pod_age_seconds",
			"Time since the creation of the oldest pod asking reclaimed resources that is not bound yet; 0 when none waits.",
			nil, nil),
	})
}

func (c *pendingCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.count; ch <- c.oldest }

func (c *pendingCollector) Collect(ch chan<- prometheus.Metric) {
	objs, _ := c.pods.ByIndex(pendingIndex, pendingIndex)
	now := c.now()
	counts := make([]int, len(pendingAges))
	var oldest time.Duration
	for _, obj := range objs {
		p, ok := obj.(*podRecord)
		if !ok {
			continue
		}
		var age time.Duration
		if p.created != 0 {
			age = max(now.Sub(time.Unix(p.created, 0)), 0)
		}
		oldest = max(oldest, age)
		i := 0
		for pendingAges[i].below > 0 && age >= pendingAges[i].below {
			i++
		}
		counts[i]++
	}
	for i, a := range pendingAges {
		ch <- prometheus.MustNewConstMetric(c.count, prometheus.GaugeValue, float64(counts[i]), a.label)
	}
	ch <- prometheus.MustNewConstMetric(c.oldest, prometheus.GaugeValue, oldest.Seconds())
}
