package webhook

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kube-reclaim/kube-reclaim/internal/serving"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Path is the URL path the webhook serves.
const Path = "/mutate-node-status"

// DefaultMaxRequestBytes bounds the request body. A stored object is at most
// about 1.5 MiB (etcd's default request limit) and a review carries object
// and oldObject, so a larger body cannot be a real review.
const DefaultMaxRequestBytes int64 = 3 << 20

// API versions of AdmissionReview the webhook answers, in the version asked.
const (
	admissionV1      = "admission.k8s.io/v1"
	admissionV1beta1 = "admission.k8s.io/v1beta1"
)

// Handler is the mutating admission webhook for node status writes. It needs
// no cluster: everything it decides comes from the request object, the clock
// and the liveness function.
type Handler struct {
	names      reclaimable.Names
	staleAfter time.Duration
	alive      func(time.Time) bool
	metrics    *metrics
	router     *mux.Router
	now        func() time.Time
	keys       *wantedKeys
	escaped    map[string]string // JSON Pointer escapes of the keys patched

	// MaxRequestBytes bounds the request body (413 above it). Set it before
	// serving; zero or negative means DefaultMaxRequestBytes.
	MaxRequestBytes int64

	bufs sync.Pool

	invalidMu     sync.Mutex
	invalidLogged map[string]string // node/key -> value last logged as invalid

	judgeMu sync.RWMutex
	judged  map[string]judgeEntry // node name -> last annotation seen
}

// NewHandler returns the webhook handler. alive reports whether the
// publisher's leader lease is alive at an instant (nil: always alive; pass
// (*leaderlease.Tracker).Alive). reg receives the webhook's metrics (nil: a
// private registry). The handler serves POST Path and answers 404/405
// elsewhere.
func NewHandler(names reclaimable.Names, staleAfter time.Duration, alive func(time.Time) bool, reg prometheus.Registerer) *Handler {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	if alive == nil {
		alive = func(time.Time) bool { return true }
	}
	h := &Handler{
		names:         names,
		staleAfter:    staleAfter,
		alive:         alive,
		metrics:       newMetrics(reg),
		now:           time.Now,
		keys:          newWantedKeys(names),
		escaped:       map[string]string{},
		invalidLogged: map[string]string{},
		judged:        map[string]judgeEntry{},
	}
	h.bufs.New = func() any { return new(pooledBuffers) }
	for _, k := range []string{string(names.CPU), string(names.Memory), "cpu", "memory", OversellRecordAnnotation(names)} {
		h.escaped[k] = escapeKey(k)
	}
	rm := serving.NewRequestMetrics(reg, "webhook")
	h.router = mux.NewRouter()
	h.router.Handle(Path, rm.Wrap(Path, http.HandlerFunc(h.ServeReview))).Methods(http.MethodPost)
	return h
}

// ServeHTTP routes to ServeReview.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.router.ServeHTTP(w, r) }

// --- wire types: only what the webhook reads ---

type admissionReview struct {
	APIVersion string            `json:"apiVersion"`
	Kind       string            `json:"kind"`
	Request    *admissionRequest `json:"request"`
}

type admissionRequest struct {
	UID         string `json:"uid"`
	Kind        gvk    `json:"kind"`
	Resource    gvr    `json:"resource"`
	SubResource string `json:"subResource"`
	Name        string `json:"name"`
	Operation   string `json:"operation"`
	// Object is decoded straight into the few fields used; images,
	// conditions, managedFields and oldObject are only validated (decode.go).
	Object *nodeObject `json:"object"`
}

type gvk struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

type gvr struct {
	Group    string `json:"group"`
	Version  string `json:"version"`
	Resource string `json:"resource"`
}

type nodeObject struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Metadata   *nodeMeta   `json:"metadata"`
	Status     *nodeStatus `json:"status"`
}

// nodeMeta and nodeStatus hold only the map entries in wantedKeys.
type nodeMeta struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type nodeStatus struct {
	Capacity    map[string]string `json:"capacity"`
	Allocatable map[string]string `json:"allocatable"`
}

// appendAnswer encodes an allowed AdmissionReview answer:
// {"apiVersion":…,"kind":"AdmissionReview","response":{"uid":…,"allowed":true[,"patchType":"JSONPatch","patch":base64]}}
func appendAnswer(b []byte, apiVersion, uid string, patch []byte) []byte {
	b = append(b, `{"apiVersion":`...)
	b = appendJSONString(b, apiVersion)
	b = append(b, `,"kind":"AdmissionReview","response":{"uid":`...)
	b = appendJSONString(b, uid)
	b = append(b, `,"allowed":true`...)
	if patch != nil {
		b = append(b, `,"patchType":"JSONPatch","patch":"`...)
		b = base64.StdEncoding.AppendEncode(b, patch)
		b = append(b, '"')
	}
	return append(b, "}}"...)
}

// pooledBuffers are reused across reviews: the body, and the scratch space
// where the reader unescapes strings (decoded values are copied out of both).
type pooledBuffers struct {
	body    bytes.Buffer
	scratch []byte
}

// reviewState is what is known about the request so far, for the answer
// given after a recovered panic.
type reviewState struct {
	apiVersion, uid, node string
	answered              bool
}

// ServeReview answers one AdmissionReview. It never denies: every problem is
// answered allowed without a patch, except a body that is not an
// AdmissionReview at all (400) or too large (413).
func (h *Handler) ServeReview(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var st reviewState
	outcome := OutcomeError
	defer func() {
		if p := recover(); p != nil {
			h.metrics.errors.WithLabelValues(ErrPanic).Inc()
			logrus.WithFields(logrus.Fields{"uid": st.uid, "node": st.node, "panic": fmt.Sprint(p), "stack": string(debug.Stack())}).
				Error("webhook panicked; answering allowed without a patch")
			if !st.answered {
				h.answer(w, &st, nil)
			}
			outcome = OutcomeError
		}
		h.metrics.observe(outcome, time.Since(start).Seconds())
	}()
	outcome = h.review(w, r, &st)
}

func (h *Handler) review(w http.ResponseWriter, r *http.Request, st *reviewState) string {
	pb := h.bufs.Get().(*pooledBuffers)
	buf := &pb.body
	buf.Reset()
	defer func() {
		if buf.Cap() <= 1<<20 && cap(pb.scratch) <= 1<<20 { // do not pin huge buffers
			h.bufs.Put(pb)
		}
	}()
	limit := h.MaxRequestBytes
	if limit <= 0 {
		limit = DefaultMaxRequestBytes
	}
	if r.ContentLength > 0 && r.ContentLength <= limit {
		buf.Grow(int(r.ContentLength) + bytes.MinRead)
	}
	if _, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit)); err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			h.fail(w, ErrBodyTooLarge, http.StatusRequestEntityTooLarge,
				fmt.Sprintf("request body larger than %d bytes (--max-request-bytes)", limit), err)
			return OutcomeError
		}
		h.fail(w, ErrReadBody, http.StatusBadRequest, "reading request body: "+err.Error(), err)
		return OutcomeError
	}
	data := buf.Bytes()

	var rv admissionReview
	rd := reader{b: data, keys: h.keys, scratch: pb.scratch}
	err := rd.review(&rv)
	pb.scratch = rd.scratch[:0]
	if err != nil {
		return h.salvage(w, data, err, st)
	}
	if !isAdmissionReview(rv.APIVersion, rv.Kind) {
		h.fail(w, ErrNotAdmissionReview, http.StatusBadRequest,
			fmt.Sprintf("request body is not an AdmissionReview (%s or %s): apiVersion %q, kind %q",
				admissionV1, admissionV1beta1, rv.APIVersion, rv.Kind), nil)
		return OutcomeError
	}
	st.apiVersion = rv.APIVersion
	req := rv.Request
	if req == nil {
		h.fail(w, ErrNoRequest, http.StatusBadRequest, "AdmissionReview has no request", nil)
		return OutcomeError
	}
	st.uid, st.node = req.UID, req.Name
	if !handled(req.Resource.Group, req.Resource.Resource, req.SubResource, req.Operation) {
		h.answer(w, st, nil)
		return OutcomeSkipped
	}
	if req.Kind.Group != "" || req.Kind.Kind != "Node" || (req.Object != nil && req.Object.Kind != "" && req.Object.Kind != "Node") {
		h.problem(st, ErrWrongKind, fmt.Errorf("request kind %s/%s, object kind %q", req.Kind.Group, req.Kind.Kind, objectKind(req.Object)))
		h.answer(w, st, nil)
		return OutcomeError
	}
	if req.Object == nil {
		h.problem(st, ErrNoObject, errors.New("request has no object"))
		h.answer(w, st, nil)
		return OutcomeError
	}
	if st.node == "" && req.Object.Metadata != nil {
		st.node = req.Object.Metadata.Name
	}
	patch, err := h.mutate(req.Object, st.node)
	if err != nil {
		h.problem(st, ErrEncode, err)
		h.answer(w, st, nil)
		return OutcomeError
	}
	h.answer(w, st, patch)
	if patch == nil {
		return OutcomeUnchanged
	}
	return OutcomePatched
}

func objectKind(o *nodeObject) string {
	if o == nil {
		return ""
	}
	return o.Kind
}

func isAdmissionReview(apiVersion, kind string) bool {
	return kind == "AdmissionReview" && (apiVersion == admissionV1 || apiVersion == admissionV1beta1)
}

// handled reports whether the webhook mutates this request: UPDATE of
// nodes/status, and CREATE of nodes (a kubelet's first registration).
func handled(group, res, sub, op string) bool {
	if group != "" || res != "nodes" {
		return false
	}
	return (op == "UPDATE" && sub == "status") || (op == "CREATE" && sub == "")
}

// salvage answers a body the full decode rejected. If the envelope can still
// be read (apiVersion, kind, request.uid, before the point where the JSON
// breaks or a field has an unexpected type), it is an AdmissionReview and gets
// an allowed answer with the UID; otherwise it is not one at all: 400.
func (h *Handler) salvage(w http.ResponseWriter, data []byte, decodeErr error, st *reviewState) string {
	env := readEnvelope(data)
	if !isAdmissionReview(env.apiVersion, env.kind) {
		h.fail(w, ErrNotAdmissionReview, http.StatusBadRequest,
			"request body is not an AdmissionReview: "+decodeErr.Error(), decodeErr)
		return OutcomeError
	}
	st.apiVersion, st.uid, st.node = env.apiVersion, env.uid, env.name
	if env.complete && !handled(env.group, env.resource, env.subResource, env.operation) {
		// Valid JSON whose object is not shaped like a node, on a request we
		// do not mutate anyway.
		h.answer(w, st, nil)
		return OutcomeSkipped
	}
	h.problem(st, ErrMalformed, decodeErr)
	h.answer(w, st, nil)
	return OutcomeError
}

// envelope is what readEnvelope could recover.
type envelope struct {
	apiVersion, kind                                   string
	uid, name, group, resource, subResource, operation string
	complete                                           bool // the whole body was valid JSON
}

// readEnvelope walks the top level of data with a streaming decoder and keeps
// whatever it read before the first syntax error.
func readEnvelope(data []byte) envelope {
	var env envelope
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return env
	}
	str := func(dst *string) bool {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		if s, ok := tok.(string); ok {
			*dst = s
			return true
		}
		// A delimiter would leave the decoder inside a value; give up.
		_, isDelim := tok.(json.Delim)
		return !isDelim
	}
	skip := func() bool {
		var raw json.RawMessage
		return dec.Decode(&raw) == nil
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return env
		}
		key, _ := tok.(string)
		var ok bool
		switch key {
		case "apiVersion":
			ok = str(&env.apiVersion)
		case "kind":
			ok = str(&env.kind)
		case "request":
			ok = readRequestEnvelope(dec, &env, str, skip)
		default:
			ok = skip()
		}
		if !ok {
			return env
		}
	}
	if tok, err := dec.Token(); err == nil && tok == json.Delim('}') {
		if _, err := dec.Token(); err == io.EOF { // nothing after the object
			env.complete = true
		}
	}
	return env
}

func readRequestEnvelope(dec *json.Decoder, env *envelope, str func(*string) bool, skip func() bool) bool {
	tok, err := dec.Token()
	if err != nil {
		return false
	}
	if tok != json.Delim('{') {
		_, isDelim := tok.(json.Delim)
		return !isDelim
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return false
		}
		key, _ := tok.(string)
		var ok bool
		switch key {
		case "uid":
			ok = str(&env.uid)
		case "name":
			ok = str(&env.name)
		case "subResource":
			ok = str(&env.subResource)
		case "operation":
			ok = str(&env.operation)
		case "resource":
			var res gvr
			ok = dec.Decode(&res) == nil
			env.group, env.resource = res.Group, res.Resource
		default:
			ok = skip()
		}
		if !ok {
			return false
		}
	}
	tok, err = dec.Token()
	return err == nil && tok == json.Delim('}')
}

// mutate computes the JSONPatch for one node; nil when nothing changes.
func (h *Handler) mutate(node *nodeObject, nodeName string) ([]byte, error) {
	now := h.now()
	var annotations map[string]string
	if node.Metadata != nil {
		annotations = node.Metadata.Annotations
	}
	value, present := annotations[h.names.Annotation]
	f := h.judge(nodeName, value, present, now)
	if !f.Fresh {
		h.metrics.stale.WithLabelValues(f.Reason).Inc()
		if logrus.IsLevelEnabled(logrus.DebugLevel) {
			logrus.WithFields(logrus.Fields{"node": nodeName, "reason": f.Reason, "detail": f.Detail}).Debug("injecting zero reclaimed resources")
		}
	}

	var capacity, allocatable map[string]string
	if node.Status != nil {
		capacity, allocatable = node.Status.Capacity, node.Status.Allocatable
	}
	capP := mapPatch{path: "/status/capacity", current: capacity, escaped: h.escaped}
	allocP := mapPatch{path: "/status/allocatable", current: allocatable, escaped: h.escaped}
	cpu, mem := string(h.names.CPU), string(h.names.Memory)
	cpuStr, memStr := strconv.FormatInt(f.Values.CPUMilli, 10), strconv.FormatInt(f.Values.MemoryBytes, 10)
	for _, p := range []*mapPatch{&capP, &allocP} {
		if !quantityIs(p.current, cpu, f.Values.CPUMilli, cpuStr) {
			p.setValue(cpu, cpuStr)
		}
		if !quantityIs(p.current, mem, f.Values.MemoryBytes, memStr) {
			p.setValue(mem, memStr)
		}
	}
	reclaimedChanged := !capP.empty() || !allocP.empty()

	ov := computeOversell(h.names, node.Metadata, node.Status)
	annP := mapPatch{path: "/metadata/annotations", current: annotations, escaped: h.escaped}
	if ov != nil {
		h.reportOversellProblems(nodeName, ov)
		for _, k := range sortedKeys(ov.allocatable) {
			allocP.setValue(k, ov.allocatable[k])
		}
		recKey := OversellRecordAnnotation(h.names)
		if ov.record != nil {
			annP.setValue(recKey, *ov.record)
		}
		if ov.removeRec {
			annP.removeKey(recKey)
		}
	}

	ops := make([]patchOp, 0, 6)
	if node.Status == nil {
		if !capP.empty() || !allocP.empty() {
			status := map[string]map[string]string{}
			if len(capP.set) > 0 {
				status["capacity"] = capP.set
			}
			if len(allocP.set) > 0 {
				status["allocatable"] = allocP.set
			}
			ops = append(ops, patchOp{Op: "add", Path: "/status", Value: status})
		}
	} else {
		ops = capP.ops(ops)
		ops = allocP.ops(ops)
	}
	if node.Metadata != nil {
		ops = annP.ops(ops)
	}
	if len(ops) == 0 {
		return nil, nil
	}
	if reclaimedChanged {
		h.metrics.patchReclaimed.Inc()
	}
	if ov != nil {
		if ov.applied {
			h.metrics.patches.WithLabelValues(PatchOversell).Inc()
		}
		if ov.restored {
			h.metrics.patches.WithLabelValues(PatchOversellRestore).Inc()
		}
		if !annP.empty() {
			h.metrics.patches.WithLabelValues(PatchOversellRecord).Inc()
		}
	}
	return marshalPatch(ops)
}

// quantityIs reports whether m[key] holds the integer want (spelled wantStr
// in canonical form); any spelling of the same quantity counts as equal.
func quantityIs(m map[string]string, key string, want int64, wantStr string) bool {
	cur, ok := m[key]
	if !ok {
		return false
	}
	if cur == wantStr {
		return true
	}
	q, err := resource.ParseQuantity(cur)
	return err == nil && q.CmpInt64(want) == 0
}

func (h *Handler) reportOversellProblems(node string, ov *oversellChange) {
	if ov.badRecord != nil {
		h.metrics.errors.WithLabelValues(ErrInvalidOversellRec).Inc()
		logrus.WithError(ov.badRecord).WithFields(logrus.Fields{"node": node, "annotation": OversellRecordAnnotation(h.names)}).
			Warn("oversell record annotation is not valid; treating the current allocatable as raw")
	}
	for _, inv := range ov.invalid {
		h.metrics.errors.WithLabelValues(ErrInvalidOversellRatio).Inc()
		id := node + "\x00" + inv.where + "\x00" + inv.key
		h.invalidMu.Lock()
		last, seen := h.invalidLogged[id]
		if !seen || last != inv.value {
			h.invalidLogged[id] = inv.value
		}
		h.invalidMu.Unlock()
		if !seen || last != inv.value { // log once per node, place and value
			logrus.WithError(inv.err).WithFields(logrus.Fields{"node": node, inv.where: inv.key, "value": inv.value}).
				Warn("ignoring invalid oversell ratio")
		}
	}
}

// problem counts and logs an error that is answered allowed.
func (h *Handler) problem(st *reviewState, kind string, err error) {
	h.metrics.errors.WithLabelValues(kind).Inc()
	logrus.WithError(err).WithFields(logrus.Fields{"uid": st.uid, "node": st.node, "kind": kind}).
		Warn("cannot mutate node status; allowing the request unchanged")
}

// fail answers with an HTTP error (the apiserver applies failurePolicy Ignore).
func (h *Handler) fail(w http.ResponseWriter, kind string, code int, msg string, err error) {
	h.metrics.errors.WithLabelValues(kind).Inc()
	log := logrus.WithFields(logrus.Fields{"kind": kind, "code": code})
	if err != nil && !strings.Contains(msg, err.Error()) {
		log = log.WithError(err)
	}
	log.Warn(msg)
	http.Error(w, msg, code)
}

// answer writes an allowed AdmissionReview in the version of the request (v1
// when unknown), with patch when not nil.
func (h *Handler) answer(w http.ResponseWriter, st *reviewState, patch []byte) {
	st.answered = true
	apiVersion := st.apiVersion
	if apiVersion == "" {
		apiVersion = admissionV1
	}
	b := appendAnswer(make([]byte, 0, 160+base64.StdEncoding.EncodedLen(len(patch))), apiVersion, st.uid, patch)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}
