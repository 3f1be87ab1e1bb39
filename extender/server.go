package extender

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/gorilla/mux"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/kube-reclaim/kube-reclaim/internal/serving"
	"github.com/kube-reclaim/kube-reclaim/placement"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

const (
	// maxRequestBytes bounds a request body. A filter call carries one pod
	// (at most ~1.5 MB, the API server's object limit) and the node names
	// (5000 × ~60 bytes); anything larger is refused with 413.
	maxRequestBytes = 8 << 20
	// maxBindBytes bounds a bind body: four names of at most 253 bytes.
	maxBindBytes = 16 << 10
	// bindAPITimeout bounds the Binding call. kube-scheduler usually gives up
	// earlier (httpTimeout), which cancels the request context.
	bindAPITimeout = 30 * time.Second
	// bodyReadTimeout bounds the reading of a body, which comes before the
	// call takes an in-flight slot: a caller that trickles its body in
	// holds no slot, and not for long its connection either. kube-scheduler
	// sends its bodies at once over loopback.
	bodyReadTimeout = 2 * time.Second
	// slotWait is how long a call whose body is read waits for an
	// in-flight slot before it is answered 429: long enough for a burst
	// of binds to find the slots of those ahead freed, short against the
	// scheduler's timeout (ExtenderHTTPTimeout).
	slotWait = 250 * time.Millisecond
)

// podSource finds the informer's record of a pod.
type podSource interface {
	pod(namespace, name string) (*podRecord, bool)
}

// server answers the scheduler's filter, prioritize and bind calls.
type server struct {
	names    reclaimable.Names
	strategy string
	cache    *placement.Cache
	pods     podSource
	client   kubernetes.Interface
	synced   func() bool
	metrics  *metrics
	maxBody  int64
	// mismatchMsg is the filter message for pods whose requests differ from limits.
	mismatchMsg string
	// requireEnforced refuses reclaimed pods without the pod webhook's limits.
	requireEnforced bool
	// args decodes the bodies of filter and prioritize.
	args *argsDecoder
	// inflight bounds the calls of each verb served at once (--max-in-flight).
	inflight map[string]*serving.InFlight
	// bodyTimeout is bodyReadTimeout (shorter in tests).
	bodyTimeout time.Duration
	// filtered are the pods filter admitted lately and the nodes it passed
	// for them, for bind.
	filtered *filteredPods
	// schedulerNames are the spec.schedulerName values of the pods bind
	// places (--scheduler-name).
	schedulerNames map[string]bool
}

const (
	// filteredPodsKept bounds filteredPods: far more pods than a scheduler
	// filters between a filter and the bind of the same pod.
	filteredPodsKept = 4096
	// filteredNodesKept bounds the (pod, node) pairs filteredPods keeps, a
	// string header each: kube-scheduler sends at most its
	// percentageOfNodesToScore share of the nodes per call (a few hundred
	// at 5,000 nodes), so this keeps hundreds of pods in flight even at
	// the largest clusters, in a few MiB whatever the callers send.
	filteredNodesKept = 1 << 17
)

func newServer(names reclaimable.Names, strategy string, c *placement.Cache, pods podSource, client kubernetes.Interface, synced func() bool, m *metrics) *server {
	s := &server{names: names, strategy: strategy, cache: c, pods: pods, client: client, synced: synced,
		metrics: m, maxBody: maxRequestBytes, mismatchMsg: placement.MismatchMessage(names), args: &argsDecoder{names: names, cache: c, pods: pods},
		filtered:       newFilteredPods(filteredPodsKept, filteredNodesKept),
		schedulerNames: map[string]bool{SchedulerName: true}, bodyTimeout: bodyReadTimeout}
	s.setMaxInFlight(DefaultMaxInFlight, DefaultMaxInFlightBinds)
	return s
}

// verbs are the verbs served, each with its own in-flight slots: a flood of
// one (filter calls are the cheapest to forge) does not take the slots of
// the scheduler's binds.
var verbs = []string{"filter", "prioritize", "bind"}

// setMaxInFlight gives filter and prioritize n slots each, bind binds.
func (s *server) setMaxInFlight(n, binds int) {
	s.inflight = make(map[string]*serving.InFlight, len(verbs))
	for _, v := range verbs {
		s.inflight[v] = serving.NewInFlight(n)
	}
	s.inflight["bind"] = serving.NewInFlight(binds)
}

// acquire takes an in-flight slot of verb, or answers 429 when none frees
// within slotWait. The caller releases the slot it got.
func (s *server) acquire(w http.ResponseWriter, r *http.Request, verb string) (release func(), ok bool) {
	f := s.inflight[verb]
	if !f.Acquire(r.Context(), slotWait) {
		logrus.WithFields(logrus.Fields{"verb": verb, "slots": f.Cap()}).Debug("every in-flight slot of the verb is taken; answering 429")
		http.Error(w, fmt.Sprintf("extender busy: all %d in-flight %s calls are taken (--max-in-flight); retry", f.Cap(), verb), http.StatusTooManyRequests)
		return nil, false
	}
	return f.Release, true
}

// handler routes POST /filter, /prioritize and /bind.
func (s *server) handler() http.Handler {
	r := mux.NewRouter()
	for verb, h := range map[string]http.HandlerFunc{
		"filter":     s.serveArgs("filter", s.filter),
		"prioritize": s.serveArgs("prioritize", s.prioritize),
		"bind":       s.serveBind,
	} {
		r.Handle("/"+verb, s.metrics.requests.Wrap(verb, h)).Methods(http.MethodPost)
	}
	r.MethodNotAllowedHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, fmt.Sprintf("method %s not allowed on %s: the scheduler extender only accepts POST", req.Method, req.URL.Path), http.StatusMethodNotAllowed)
	})
	r.NotFoundHandler = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		http.Error(w, fmt.Sprintf("no such path %s: the scheduler extender serves POST /filter, /prioritize and /bind", req.URL.Path), http.StatusNotFound)
	})
	return r
}

// ready answers 503 until the informers have synced: an incomplete cache
// would under-count bound pods and over-book nodes.
func (s *server) ready(w http.ResponseWriter) bool {
	if s.synced() {
		return true
	}
	http.Error(w, "extender cache not synced yet (node and pod informers)", http.StatusServiceUnavailable)
	return false
}

// request holds the buffers of one call; they are pooled.
type request struct {
	body   bytes.Buffer
	states []placement.State
	out    []byte
	// The decoded NodeNames and the answer's slices and map, reused: at
	// 5000 names they are most of a call's garbage, and garbage collection
	// against the pod cache is what sets the p99.
	names []string
	// entries are the cache entries of names, as nameSink found them.
	entries []*placement.Entry
	// unknown counts the names of the body the cache does not hold: they
	// are not in names (see nameSink).
	unknown  int
	passed   []string
	failed   extenderv1.FailedNodesMap
	priority extenderv1.HostPriorityList
	// rec is the record of the pod the call is answered for: the
	// informer's when the body names the object it holds (see
	// argsDecoder.readPod), else one made of the body's pod.
	rec *podRecord
	// fromInformer: rec is the informer's record.
	fromInformer bool
	// scratch holds a string or quantity of the body while it is read.
	scratch []byte
}

// Bounds of what a pooled request keeps: a call of the largest clusters
// (thousands of names, a big pod) fits, and an unusual request's buffers
// go with it instead of staying pinned in the pool.
const (
	maxPooledBytes = 1 << 20
	maxPooledNames = 1 << 14
)

// requests keeps a few request buffers between calls. Not a sync.Pool: a
// pool is emptied by every second garbage collection, which at 5000 names
// comes every few calls, so its buffers would rarely be reused.
var requests = make(chan *request, 8)

func getRequest() *request {
	select {
	case rq := <-requests:
		return rq
	default:
		// json-iterator captures only into a non-nil slice.
		return &request{scratch: make([]byte, 0, 64)}
	}
}

func putRequest(rq *request) {
	if max(rq.body.Cap(), cap(rq.out), cap(rq.scratch)) > maxPooledBytes || max(cap(rq.names), cap(rq.entries), cap(rq.states),
		cap(rq.passed), cap(rq.priority), len(rq.failed)) > maxPooledNames {
		return // do not pin the memory of an unusually large request
	}
	// The names are the request's strings: let them go with it.
	clear(rq.names[:cap(rq.names)])
	clear(rq.entries[:cap(rq.entries)])
	rq.entries = rq.entries[:0]
	clear(rq.passed[:cap(rq.passed)])
	clear(rq.failed) // a cleared map keeps its buckets: bounded by its len above
	rq.unknown = 0
	rq.rec, rq.fromInformer = nil, false
	clear(rq.priority[:cap(rq.priority)])
	select {
	case requests <- rq:
	default:
	}
}

// readBody reads the body (up to limit bytes) within the server's
// bodyTimeout, answering 413, 408 or 400 itself.
func (s *server) readBody(w http.ResponseWriter, r *http.Request, verb string, limit int64) (*request, bool) {
	if r.ContentLength > limit {
		http.Error(w, fmt.Sprintf("%s request body is larger than %d bytes", verb, limit), http.StatusRequestEntityTooLarge)
		return nil, false
	}
	// Not every ResponseWriter supports deadlines (httptest's does not);
	// the server's ReadTimeout still holds.
	_ = http.NewResponseController(w).SetReadDeadline(time.Now().Add(s.bodyTimeout))
	rq := getRequest()
	rq.body.Reset()
	if r.ContentLength > 0 {
		// MinRead more: ReadFrom needs that much spare room to see the end
		// of the body, and would otherwise double the buffer for it.
		rq.body.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	_, err := rq.body.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	if err == nil {
		return rq, true
	}
	putRequest(rq)
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		http.Error(w, fmt.Sprintf("%s request body is larger than %d bytes", verb, tooBig.Limit), http.StatusRequestEntityTooLarge)
	case errors.Is(err, os.ErrDeadlineExceeded):
		http.Error(w, fmt.Sprintf("reading the %s request body took longer than %s", verb, s.bodyTimeout), http.StatusRequestTimeout)
	default:
		http.Error(w, fmt.Sprintf("reading %s request: %v", verb, err), http.StatusBadRequest)
	}
	return nil, false
}

func malformed(w http.ResponseWriter, verb, what string, body []byte, err error) {
	if len(bytes.TrimSpace(body)) == 0 {
		http.Error(w, fmt.Sprintf("malformed %s request: empty body, expected a JSON %s", verb, what), http.StatusBadRequest)
		return
	}
	var syntax *json.SyntaxError
	if errors.As(err, &syntax) {
		err = fmt.Errorf("%w at byte %d", err, syntax.Offset)
	}
	http.Error(w, fmt.Sprintf("malformed %s request: %v (expected a JSON %s)", verb, err, what), http.StatusBadRequest)
}

// writeJSON encodes v (see answerJSON) into rq's reusable buffer, then
// answers with it: an encoding error (none is expected from these types)
// becomes a 500 rather than half an answer.
func writeJSON(w http.ResponseWriter, rq *request, v any) {
	st := answerJSON.BorrowStream(nil)
	defer answerJSON.ReturnStream(st)
	st.SetBuffer(rq.out[:0])
	st.WriteVal(v)
	st.WriteRaw("\n") // as encoding/json's Encoder ends a value
	rq.out = st.Buffer()
	st.SetBuffer(nil) // the pooled stream must not share rq's buffer
	if st.Error != nil {
		http.Error(w, fmt.Sprintf("encoding the answer: %v", st.Error), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(rq.out)))
	_, _ = w.Write(rq.out)
}

// serveArgs reads a filter or prioritize request, takes an in-flight slot,
// decodes and checks the body, then answers with what respond returns for
// the call's node names and pod: the informer's record of the pod when the
// body names the object it holds (see argsDecoder.readPod), else a record
// made from the body's pod.
func (s *server) serveArgs(verb string, respond func(names []string, pod *podRecord, rq *request) any) http.HandlerFunc {
	nodesPerCall := s.metrics.nodesPerCall.WithLabelValues(verb)
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.ready(w) {
			return
		}
		rq, ok := s.readBody(w, r, verb, s.maxBody)
		if !ok {
			return
		}
		defer putRequest(rq)
		release, ok := s.acquire(w, r, verb)
		if !ok {
			return
		}
		defer release()
		err := s.args.decode(rq.body.Bytes(), rq)
		switch {
		case errors.Is(err, errNoPod):
			http.Error(w, fmt.Sprintf("malformed %s request: no Pod", verb), http.StatusBadRequest)
		case errors.Is(err, errNodesGiven):
			http.Error(w, fmt.Sprintf("%s request carries Nodes (full node objects), refused at their first item: configure this extender with nodeCacheCapable: true, which sends NodeNames only", verb), http.StatusBadRequest)
		case err != nil:
			malformed(w, verb, "ExtenderArgs", rq.body.Bytes(), err)
		default:
			nodesPerCall.Observe(float64(len(rq.names) + rq.unknown))
			if rq.unknown > 0 {
				s.unknownNodes(verb, rq.rec, rq.unknown)
			}
			writeJSON(w, rq, respond(rq.names, rq.rec, rq))
		}
	}
}

// nodeStates returns the states of names, in rq's reusable slice.
func (s *server) nodeStates(names []string, rq *request) []placement.State {
	if cap(rq.states) < len(names) {
		rq.states = make([]placement.State, len(names))
	}
	st := rq.states[:len(names)]
	if len(rq.entries) == len(names) {
		s.cache.StatesOf(rq.entries, st)
	} else {
		s.cache.States(names, st)
	}
	return st
}

// unknownNodes counts and logs, once per call, the names of a call the
// cache does not hold. They are not listed in the answer: kube-scheduler
// treats a node its extender does not pass as filtered out, and scores it
// 0 in prioritize.
func (s *server) unknownNodes(verb string, pod *podRecord, n int) {
	if verb == "filter" {
		s.metrics.filtered[placement.RUnknownNode].Add(float64(n))
	}
	logrus.WithFields(logrus.Fields{"verb": verb, "pod": clip(pod.namespace + "/" + pod.name), "unknownNodes": n}).
		Info("node names the extender's cache does not hold were left out of the answer (the scheduler's view is ahead of the node informer, or the caller is not kube-scheduler)")
}

// filter answers a filter call: the nodes with room for the pod in input
// order, and for every other node the cache holds exactly what is short.
// Names the cache does not hold are left out (see argsDecoder.addName). NodeNames and
// FailedNodes are never null: the answer always lists the outcome.
func (s *server) filter(names []string, pod *podRecord, rq *request) any {
	req, mismatch := pod.req, pod.mismatch
	res := &extenderv1.ExtenderFilterResult{NodeNames: &[]string{}, FailedNodes: extenderv1.FailedNodesMap{}}
	switch {
	case len(names) == 0:
		return res
	case mismatch:
		// No node can ever take it, and preemption cannot help either.
		res.FailedAndUnresolvableNodes = make(extenderv1.FailedNodesMap, len(names))
		for _, n := range names {
			res.FailedAndUnresolvableNodes[n] = s.mismatchMsg
		}
		var counts placement.ReasonCounts
		counts[placement.RLimitsMismatch] = len(names)
		s.metrics.countFiltered(&counts)
		return res
	case req.IsZero():
		res.NodeNames = &names
		return res
	}
	if msg := s.notEnforced(pod); msg != "" {
		// Unresolvable too: preempting other pods cannot add limits.
		res.FailedAndUnresolvableNodes = make(extenderv1.FailedNodesMap, len(names))
		for _, n := range names {
			res.FailedAndUnresolvableNodes[n] = msg
		}
		var counts placement.ReasonCounts
		counts[placement.RNotEnforced] = len(names)
		s.metrics.countFiltered(&counts)
		s.metrics.notEnforced.WithLabelValues("filter").Inc()
		logrus.WithFields(logrus.Fields{"pod": clip(pod.namespace + "/" + pod.name)}).Debug("filter refused a pod that is not enforced: " + clip(msg))
		return res
	}
	states := s.nodeStates(names, rq)
	passed := rq.passed[:0]
	if passed == nil {
		passed = make([]string, 0, len(names)) // never answered as null
	}
	if rq.failed == nil {
		rq.failed = make(extenderv1.FailedNodesMap, len(names))
	}
	res.FailedNodes = rq.failed
	var counts placement.ReasonCounts
	for i := range states {
		if placement.Fits(states[i], req) {
			passed = append(passed, names[i])
			continue
		}
		msg, r := placement.Failure(states[i], req)
		res.FailedNodes[names[i]] = msg
		counts[r]++
	}
	rq.passed = passed
	res.NodeNames = &passed
	s.metrics.countFiltered(&counts)
	stored := pod
	if !rq.fromInformer {
		stored = s.storedPod(pod)
	}
	if !s.filtered.add(pod, passed, s.cache.Now(), stored) {
		s.metrics.filterNotRecorded.Inc()
	}
	return res
}

// notEnforced returns why a reclaimed pod is refused under
// --require-enforced, or "" when it is not refused.
func (s *server) notEnforced(pod *podRecord) string {
	if !s.requireEnforced {
		return ""
	}
	return pod.unenforced
}

// prioritize answers a prioritize call: every node the cache holds scored
// 0..MaxExtenderPriority by the room left after placing the pod, the mean of
// the CPU and memory fractions of the published values that stay free.
// spread favours the most room left, binpack the least. Nodes without room
// score 0; a pod asking no reclaimed resource (or whose requests differ from
// its limits) scores 0 everywhere (neutral).
func (s *server) prioritize(names []string, pod *podRecord, rq *request) any {
	req, mismatch := pod.req, pod.mismatch
	var states []placement.State
	if !mismatch && !req.IsZero() && len(names) > 0 {
		states = s.nodeStates(names, rq)
	}
	if cap(rq.priority) < len(names) {
		rq.priority = make(extenderv1.HostPriorityList, len(names))
	}
	list := rq.priority[:len(names)]
	if list == nil {
		list = extenderv1.HostPriorityList{} // answered as [], not null
	}
	for i, n := range names {
		list[i] = extenderv1.HostPriority{Host: n}
		if states != nil {
			list[i].Score = placement.Score(s.strategy, states[i], req, extenderv1.MaxExtenderPriority)
		}
	}
	return &list
}

// storedPod returns the informer's record of pod's namespace and name when
// it has the same UID, else nil.
func (s *server) storedPod(pod *podRecord) *podRecord {
	if rec, ok := s.pods.pod(pod.namespace, pod.name); ok && rec.uid == pod.uid {
		return rec
	}
	return nil
}

func (s *server) serveBind(w http.ResponseWriter, r *http.Request) {
	if !s.ready(w) {
		return
	}
	rq, ok := s.readBody(w, r, "bind", min(s.maxBody, maxBindBytes))
	if !ok {
		return
	}
	defer putRequest(rq)
	release, ok := s.acquire(w, r, "bind")
	if !ok {
		return
	}
	defer release()
	args, err := decodeBindArgs(rq.body.Bytes())
	if err != nil {
		malformed(w, "bind", "ExtenderBindingArgs", rq.body.Bytes(), err)
		return
	}
	if args.PodName == "" || args.PodNamespace == "" || args.Node == "" {
		http.Error(w, "malformed bind request: PodName, PodNamespace and Node are required", http.StatusBadRequest)
		return
	}
	writeJSON(w, rq, s.bind(r.Context(), args))
}

// bind places only pods this extender manages, on a node its own filter
// passed: the endpoint has no authentication of its own (it listens on
// 127.0.0.1 beside its scheduler), and a Binding bypasses admission, taints
// and the scheduler's every other check. Then it checks room and records
// the assumption atomically, and creates the Binding. It never returns
// before the outcome is accounted for.
func (s *server) bind(ctx context.Context, args *extenderv1.ExtenderBindingArgs) *extenderv1.ExtenderBindingResult {
	key := args.PodNamespace + "/" + args.PodName
	// Built only when something is logged: a successful bind logs at debug.
	log := func() *logrus.Entry {
		return logrus.WithFields(logrus.Fields{"pod": clip(key), "node": clip(args.Node), "uid": clip(string(args.PodUID))})
	}
	refuse := func(reason, result, msg string) *extenderv1.ExtenderBindingResult {
		s.metrics.binds.WithLabelValues(result).Inc()
		s.metrics.bindRefusals.WithLabelValues(reason).Inc()
		log().WithFields(logrus.Fields{"result": result, "reason": reason}).Info("bind refused: " + clip(msg))
		return &extenderv1.ExtenderBindingResult{Error: msg}
	}
	if args.PodUID == "" {
		return refuse(refusedNoUID, bindRejected, fmt.Sprintf("pod %s: the bind names no PodUID; kube-scheduler always sends it", key))
	}
	// First, before any lookup: only the scheduler that asked this
	// extender to filter the pod binds it, on a node that filter passed.
	filtered, ok := s.filtered.passed(args.PodNamespace, args.PodName, args.PodUID, args.Node, s.cache.Now())
	if !ok {
		return refuse(refusedNotFiltered, bindRejected, fmt.Sprintf("node %s was not passed by this extender's filter for pod %s (UID %s) within %s",
			args.Node, key, args.PodUID, filterPassTTL))
	}
	// Then the pod as the API holds it: it alone says what the pod asks,
	// which scheduler it names and whether it is bound.
	rec, err := s.apiPod(ctx, args)
	switch {
	case errors.Is(err, errPodGone):
		return refuse(refusedPodGone, bindRejected, fmt.Sprintf("pod %s with UID %s: %v", key, args.PodUID, err))
	case err != nil:
		s.metrics.binds.WithLabelValues(bindAPIError).Inc()
		log().WithError(err).Warn("reading the pod to bind from the API server failed")
		return &extenderv1.ExtenderBindingResult{Error: fmt.Sprintf("reading pod %s: %v", key, err)}
	case !filtered.sameDemand(rec):
		return refuse(refusedFilterDisagrees, bindRejected, fmt.Sprintf("the pod this extender's filter judged for pod %s (UID %s) is not the one the API server holds: they differ in reclaimed requests, limits or scheduler name",
			key, args.PodUID))
	}
	if !s.schedulerNames[rec.schedulerName] {
		return refuse(refusedScheduler, bindRejected, fmt.Sprintf("pod %s names scheduler %q, not one this extender binds for (--scheduler-name)", key, rec.schedulerName))
	}
	if rec.req.IsZero() {
		return refuse(refusedNoRequest, bindRejected, fmt.Sprintf("pod %s asks no %s or %s: this extender binds only pods asking reclaimed resources", key, s.names.CPU, s.names.Memory))
	}
	if rec.nodeName != "" {
		return refuse(refusedBound, bindRejected, fmt.Sprintf("pod %s is already bound to node %s", key, rec.nodeName))
	}
	if rec.mismatch {
		return refuse(refusedMismatch, bindRejected, s.mismatchMsg)
	}
	if s.requireEnforced && rec.unenforced != "" {
		s.metrics.notEnforced.WithLabelValues("bind").Inc()
		return refuse(refusedNotEnforced, bindRejected, rec.unenforced)
	}
	a, err := s.cache.Assume(rec.uid, key, args.Node, rec.req)
	var c *placement.Conflict
	switch {
	case errors.As(err, &c):
		s.metrics.conflicts.WithLabelValues(c.Reason).Inc()
		return refuse(refusedNoRoom, bindConflict, fmt.Sprintf("node %s has no room left for pod %s: %s", args.Node, key, c.Message))
	case err != nil:
		return refuse(refusedBound, bindRejected, fmt.Sprintf("pod %s: %v", key, err))
	}
	bctx, cancel := context.WithTimeout(ctx, bindAPITimeout)
	err = s.client.CoreV1().Pods(args.PodNamespace).Bind(bctx, &corev1.Binding{
		ObjectMeta: metav1.ObjectMeta{Namespace: args.PodNamespace, Name: args.PodName, UID: rec.uid},
		Target:     corev1.ObjectReference{Kind: "Node", Name: args.Node},
	}, metav1.CreateOptions{})
	cancel()
	s.cache.Bound(a, err == nil || !definitelyNotBound(err))
	if err != nil {
		s.metrics.binds.WithLabelValues(bindAPIError).Inc()
		log().WithError(err).Warn("creating the Binding failed")
		return &extenderv1.ExtenderBindingResult{Error: fmt.Sprintf("binding pod %s to node %s: %v", key, args.Node, err)}
	}
	s.metrics.bindSuccesses.Inc()
	if logrus.IsLevelEnabled(logrus.DebugLevel) {
		log().WithFields(logrus.Fields{"cpu": rec.req.CPUMilli, "memory": rec.req.MemoryBytes}).Debug("pod bound")
	}
	return &extenderv1.ExtenderBindingResult{}
}

// errPodGone: the API server holds no pod of that name and UID.
var errPodGone = errors.New("the API server holds no such pod")

// apiPod returns the pod as the API server holds it: the informer's record
// when it has the pod with the UID the scheduler names (it follows later
// changes, such as the pod being bound), else a GET's. The scheduler's own
// watch may be ahead of ours, and what a filter body says of a pod never
// stands in for it: anything that reaches the verbs can send one.
func (s *server) apiPod(ctx context.Context, args *extenderv1.ExtenderBindingArgs) (*podRecord, error) {
	if rec, ok := s.pods.pod(args.PodNamespace, args.PodName); ok && rec.uid == args.PodUID {
		s.metrics.bindFromInformer.Inc()
		return rec, nil
	}
	s.metrics.bindFromAPI.Inc()
	gctx, cancel := context.WithTimeout(ctx, bindAPITimeout)
	defer cancel()
	p, err := s.client.CoreV1().Pods(args.PodNamespace).Get(gctx, args.PodName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, errPodGone
	case err != nil:
		return nil, err
	case p.UID != args.PodUID:
		return nil, fmt.Errorf("%w: the pod of that name has UID %s", errPodGone, p.UID)
	}
	return newPodRecord(s.names, p), nil
}

// clip bounds a string of a request in a log line. The decoders keep no
// name longer than maxNameBytes, but messages built from a body (a pod's
// container names) can be longer.
func clip(s string) string {
	if len(s) <= maxNameBytes {
		return s
	}
	i := maxNameBytes
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "… (" + strconv.Itoa(len(s)) + " bytes)"
}

// definitelyNotBound reports whether the API server certainly did not create
// the Binding: a 4xx answer other than a timeout. Anything else (timeouts,
// 5xx, lost connections) may have bound the pod, so its room stays assumed
// until the informer tells or the assumption expires.
func definitelyNotBound(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	code := st.Status().Code
	return code >= 400 && code < 500 && code != http.StatusRequestTimeout
}
