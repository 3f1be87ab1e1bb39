package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	"unsafe"

	jsoniter "github.com/json-iterator/go"
	"github.com/sirupsen/logrus"
	"golang.org/x/sync/semaphore"
	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-reclaim/kube-reclaim/internal/boundedjson"
)

// The generic half of the webhook: reading, decoding and answering an
// AdmissionReview, the same for every kind. A mutator supplies the rest for
// one kind (node.go); each kind has its own route.

// API versions of AdmissionReview the webhook answers, in the version asked.
// v1beta1 has the same shape as v1.
const (
	admissionV1      = "admission.k8s.io/v1"
	admissionV1beta1 = "admission.k8s.io/v1beta1"
)

// admissionReview is an admission/v1 AdmissionReview whose request object
// is decoded straight into O, the slim view of one kind.
type admissionReview[O any] struct {
	metav1.TypeMeta `json:",inline"`
	Request         *admissionRequest[O] `json:"request,omitempty"`
}

// admissionRequest has the admission/v1 AdmissionRequest fields the webhook
// reads, with their admission/v1 types. It is not admissionv1.AdmissionRequest
// itself because that type copies object and oldObject into RawExtensions and
// the object would then be decoded a second time, which on a realistic
// heartbeat review is a large share of the handler's CPU (figures in
// README.md). oldObject, userInfo and options are skipped.
type admissionRequest[O any] struct {
	UID         types.UID                   `json:"uid"`
	Kind        metav1.GroupVersionKind     `json:"kind"`
	Resource    metav1.GroupVersionResource `json:"resource"`
	SubResource string                      `json:"subResource,omitempty"`
	Name        string                      `json:"name,omitempty"`
	Namespace   string                      `json:"namespace,omitempty"`
	Operation   admissionv1.Operation       `json:"operation"`
	Object      *O                          `json:"object,omitempty"`
}

// reviewObject is the constraint on a kind's slim object: its pointer reads
// the object's apiVersion and kind (embed metav1.TypeMeta).
type reviewObject[O any] interface {
	*O
	GetObjectKind() schema.ObjectKind
}

// mutator is the part of the webhook specific to one kind of object.
type mutator[O any] interface {
	// handles reports whether the webhook mutates this request (resource,
	// subresource, operation); any other request is allowed untouched.
	handles(req *admissionRequest[O]) bool
	// mutate returns the JSONPatch operations for req.Object, none when
	// nothing changes. It is called only for handled requests of the
	// mutator's kind with an object.
	mutate(req *admissionRequest[O]) ([]patchOp, error)
}

// reviewJSON decodes reviews. json-iterator rather than encoding/json:
// encoding/json validates the whole body, then decodes it in a second pass,
// which on the realistic review costs several times json-iterator's one pass
// (figures in README.md). Case-sensitive like the apiserver's own decoder,
// so that "Object" is not taken for "object".
//
// json-iterator checks the structure, strings and literals of the values it
// skips but not every rule of RFC 8259 for numbers (it takes -01 for a
// number). Such a body cannot come from the apiserver, which encodes the
// review itself; validating all of it with json.Valid would add another
// pass over the body, a large share of goal P1's CPU budget, to reject
// input no caller sends.
//
// Arrays and maps of the slim objects are bounded (bounded.go).
var reviewJSON = func() jsoniter.API {
	api := jsoniter.Config{CaseSensitive: true, ValidateJsonRawMessage: true}.Froze()
	api.RegisterExtension(boundsExtension)
	// A skipped value is checked and passed over, never copied: the object
	// of a review read again for its envelope may be megabytes.
	jsoniter.RegisterTypeDecoderFunc(reflect.TypeFor[skipped]().String(), func(_ unsafe.Pointer, it *jsoniter.Iterator) { it.Skip() })
	return api
}()

// reviewServer serves one route: POST a review of kind gk.
type reviewServer[O any, P reviewObject[O]] struct {
	h       *Handler
	gk      schema.GroupKind
	mutator mutator[O]
	// durations times this route's reviews by outcome.
	durations *durations
	// failClosed denies, rather than allows unchanged, a review the webhook
	// cannot process: for pods, allowing would let a reclaimed pod run
	// without the limits the mutation exists to set.
	failClosed bool
	// route labels the in-flight waits ("nodes" or "pods").
	route string
	// timeout is the route's timeoutSeconds, used when the request does not
	// say how long the apiserver waits.
	timeout time.Duration
}

// denial is a mutator's refusal of the object: the review is answered
// allowed=false with code 403, reason Forbidden and the message, which the
// apiserver shows the client after the webhook's name.
type denial struct {
	// reasons label the denials counter (bounded set).
	reasons []string
	message string
}

func (d *denial) Error() string { return d.message }

// unprocessedError is a mutator error with its errors_total kind.
type unprocessedError struct {
	kind string
	err  error
}

func (e *unprocessedError) Error() string { return e.err.Error() }
func (e *unprocessedError) Unwrap() error { return e.err }

// reviewState is what is known about the request so far, for the answer
// given after a recovered panic and for logs.
type reviewState struct {
	apiVersion string
	uid        types.UID
	name       string
	answered   bool
}

// ServeHTTP answers one AdmissionReview. Only a mutator's denial, or any
// problem on a failClosed route, is answered allowed=false; otherwise every
// problem is answered allowed without a patch, except a body that is not an
// AdmissionReview at all (400) or too large (413).
func (s *reviewServer[O, P]) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var st reviewState
	outcome := OutcomeError
	defer func() {
		if p := recover(); p != nil {
			s.h.metrics.errors.WithLabelValues(ErrPanic).Inc()
			logrus.WithFields(logrus.Fields{"uid": truncated(string(st.uid)), "name": st.name, "panic": truncated(fmt.Sprint(p)), "stack": string(debug.Stack()), "failClosed": s.failClosed}).
				Error("webhook panicked; answering without a patch")
			if !st.answered {
				s.unprocessedAnswer(w, &st, ErrPanic, fmt.Errorf("panic: %v", p))
			}
			outcome = OutcomeError
		}
		s.durations.observe(outcome, time.Since(start).Seconds())
	}()
	if s.h.tooLarge(w, r) {
		return
	}
	// The body is read first, under a short deadline, and only then does
	// the review wait for an in-flight slot: a caller that sends headers
	// and then nothing holds no slot, only its connection, until the
	// deadline closes it. What bodies being read or waiting hold at once is
	// bounded by the body budget (readBody). The timeout is the route's
	// own, or shorter when the apiserver says so; never longer, whatever
	// the caller says.
	timeout := reviewTimeout(r, s.timeout)
	readBy := start.Add(timeout / 4)
	// Not every ResponseWriter supports deadlines (httptest's does not);
	// the server's ReadTimeout still holds, and the budget's wait ends at
	// readBy.
	_ = http.NewResponseController(w).SetReadDeadline(readBy)
	body, release, err := s.h.readBody(w, r, readBy)
	if err != nil {
		if errors.Is(err, errBudget) {
			s.h.metrics.waits.WithLabelValues(s.route, WaitNoBudget).Inc()
			s.busy(w, body, &st, "the bytes of bodies held at once stayed at their bound")
			outcome = OutcomeBusy
		}
		release()
		return
	}
	defer release()
	// The slots bound the objects decoded at once, and with the budget the
	// webhook's memory, whatever is sent. A review waits for one until half
	// the time the apiserver gives the call has passed (and never past the
	// request's context), leaving the other half to decode and answer.
	ok, waited := s.h.inflight.acquire(r, time.Until(start.Add(timeout/2)))
	if waited {
		s.h.metrics.waited(s.route, ok)
	}
	if !ok {
		s.busy(w, body, &st, fmt.Sprintf("all %d in-flight slots stayed busy", s.h.inflight.Cap()))
		outcome = OutcomeBusy
		return
	}
	defer s.h.inflight.release()
	s.h.metrics.inFlight.Inc()
	defer s.h.metrics.inFlight.Dec()
	outcome = s.review(w, body, &st)
}

// busy answers a review that could not be served in time (why says what
// was spent), from the apiVersion and UID at the start of what was read of
// its body.
//
// A node review is allowed unchanged, never refused: the node path must
// never block a node status write, and it cannot be mutated either, since
// mutating means decoding the whole object, which is exactly what the slots
// and the budget bound. Nothing is lost but freshness: the reclaimed values
// stored on the node survive writes that do not touch them (kubelet's and
// kwok's status patches), and the next status write is mutated.
//
// A pod review is refused with 429, like every pod review the webhook
// cannot process: admitting it would let a reclaimed pod run without its
// limits, and the client may retry.
func (s *reviewServer[O, P]) busy(w http.ResponseWriter, body []byte, st *reviewState, why string) {
	apiVersion, uid := peekEnvelope(body[:min(len(body), peekBytes)])
	if apiVersion == admissionV1 || apiVersion == admissionV1beta1 {
		st.apiVersion = apiVersion
	}
	st.uid = uid
	msg := "kube-reclaim webhook: " + why
	log, logged := s.h.busyLogs.Allow(logrus.WithFields(logrus.Fields{"uid": truncated(string(uid)), "route": s.route}))
	if !s.failClosed {
		if logged {
			log.Warn(msg + "; allowing the node review unchanged")
		}
		s.h.answer(w, st, nil)
		return
	}
	if logged {
		log.Warn(msg + "; refusing the pod")
	}
	s.h.respond(w, st, &admissionv1.AdmissionResponse{UID: uid, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusTooManyRequests, Reason: metav1.StatusReasonTooManyRequests,
		Message: msg + "; the " + strings.ToLower(s.gk.Kind) + " is refused rather than admitted without the limits the webhook sets: retry",
	}})
}

func (s *reviewServer[O, P]) review(w http.ResponseWriter, body []byte, st *reviewState) string {
	var rv admissionReview[O]
	if err := decodeReview(body, &rv); err != nil {
		return s.malformed(w, body, err, st)
	}
	if !isAdmissionReview(rv.APIVersion, rv.Kind) {
		s.h.fail(w, ErrNotAdmissionReview, http.StatusBadRequest,
			fmt.Sprintf("request body is not an AdmissionReview (%s or %s): apiVersion %q, kind %q",
				admissionV1, admissionV1beta1, rv.APIVersion, rv.Kind), nil)
		return OutcomeError
	}
	st.apiVersion = rv.APIVersion
	req := rv.Request
	if req == nil {
		s.h.fail(w, ErrNoRequest, http.StatusBadRequest, "AdmissionReview has no request", nil)
		return OutcomeError
	}
	st.uid, st.name = req.UID, truncated(req.Name)
	if !s.mutator.handles(req) {
		s.h.answer(w, st, nil)
		return OutcomeSkipped
	}
	if objKind := s.objectKind(req.Object); req.Kind.Group != s.gk.Group || req.Kind.Kind != s.gk.Kind || (objKind != "" && objKind != s.gk.Kind) {
		s.unprocessed(w, st, ErrWrongKind, fmt.Errorf("request kind %s/%s, object kind %q, want %s", req.Kind.Group, req.Kind.Kind, objKind, s.gk))
		return OutcomeError
	}
	if req.Object == nil {
		s.unprocessed(w, st, ErrNoObject, errors.New("request has no object"))
		return OutcomeError
	}
	ops, err := s.mutator.mutate(req)
	if d := (*denial)(nil); errors.As(err, &d) {
		s.h.deny(w, st, d)
		return OutcomeDenied
	}
	if err != nil {
		kind := ErrEncode
		if k := (*unprocessedError)(nil); errors.As(err, &k) {
			kind = k.kind
		}
		s.unprocessed(w, st, kind, err)
		return OutcomeError
	}
	if len(ops) == 0 {
		s.h.answer(w, st, nil)
		return OutcomeUnchanged
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		s.unprocessed(w, st, ErrEncode, err)
		return OutcomeError
	}
	s.h.answer(w, st, patch)
	return OutcomePatched
}

func (s *reviewServer[O, P]) objectKind(o *O) string {
	if o == nil {
		return ""
	}
	return P(o).GetObjectKind().GroupVersionKind().Kind
}

// envelope is a review with its object skipped, read again when the full
// decode fails.
type envelope = admissionReview[skipped]

// malformed answers a body the full decode rejected. json-iterator decodes
// in document order and keeps what it decoded before an error, and the
// apiserver writes apiVersion, kind and request.uid first: when the envelope
// read that far says AdmissionReview, it is one, and gets an allowed answer
// with its UID; otherwise the body is not an AdmissionReview at all: 400.
// A request the webhook does not mutate whose envelope decodes in full is
// skipped rather than counted as malformed (its object may be of any shape).
// An object past a bound (bounded.go) counts as ErrTooManyItems.
func (s *reviewServer[O, P]) malformed(w http.ResponseWriter, body []byte, decodeErr error, st *reviewState) string {
	var env envelope
	envErr := reviewJSON.Unmarshal(body, &env)
	if !isAdmissionReview(env.APIVersion, env.Kind) {
		s.h.fail(w, ErrNotAdmissionReview, http.StatusBadRequest,
			"request body is not an AdmissionReview: "+decodeErr.Error(), decodeErr)
		return OutcomeError
	}
	st.apiVersion = env.APIVersion
	if env.Request != nil {
		st.uid, st.name = env.Request.UID, truncated(env.Request.Name)
	}
	if envErr == nil && env.Request != nil && !s.mutator.handles(retype[O](env.Request)) {
		s.h.answer(w, st, nil)
		return OutcomeSkipped
	}
	kind := ErrMalformed
	if be := (*boundedjson.Error)(nil); errors.As(decodeErr, &be) {
		kind = ErrTooManyItems
	}
	s.unprocessed(w, st, kind, decodeErr)
	return OutcomeError
}

// unprocessed counts and logs a review the webhook could not process and
// answers it: allowed without a patch, or denied on a failClosed route.
func (s *reviewServer[O, P]) unprocessed(w http.ResponseWriter, st *reviewState, kind string, err error) {
	s.h.problem(st, kind, err, s.failClosed)
	s.unprocessedAnswer(w, st, kind, err)
}

func (s *reviewServer[O, P]) unprocessedAnswer(w http.ResponseWriter, st *reviewState, kind string, err error) {
	if !s.failClosed {
		s.h.answer(w, st, nil)
		return
	}
	if kind == ErrTooManyItems {
		s.h.respond(w, st, &admissionv1.AdmissionResponse{UID: st.uid, Result: &metav1.Status{
			Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity, Reason: metav1.StatusReasonInvalid,
			Message: fmt.Sprintf("kube-reclaim refuses this %s: %v", strings.ToLower(s.gk.Kind), err),
		}})
		return
	}
	s.h.respond(w, st, &admissionv1.AdmissionResponse{UID: st.uid, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusInternalServerError, Reason: metav1.StatusReasonInternalError,
		Message: fmt.Sprintf("kube-reclaim could not process this %s (%s: %v); it is refused rather than admitted without the limits the webhook sets",
			strings.ToLower(s.gk.Kind), kind, err),
	}})
}

// retype returns req's envelope without its object, typed for mutator[O].
func retype[O any](req *admissionRequest[skipped]) *admissionRequest[O] {
	return &admissionRequest[O]{
		UID: req.UID, Kind: req.Kind, Resource: req.Resource, SubResource: req.SubResource,
		Name: req.Name, Namespace: req.Namespace, Operation: req.Operation,
	}
}

// maxLoggedValue bounds a request-supplied string repeated in a log line.
const maxLoggedValue = 256

// truncated is the one way a string that came with a request (a name, a
// UID, a value, a message or error that quotes them) goes into a log line:
// a caller must not be able to make the webhook write megabytes per review.
func truncated(s string) string {
	if len(s) <= maxLoggedValue {
		return s
	}
	return s[:maxLoggedValue] + "...(" + strconv.Itoa(len(s)) + " bytes)"
}

func isAdmissionReview(apiVersion, kind string) bool {
	return kind == "AdmissionReview" && (apiVersion == admissionV1 || apiVersion == admissionV1beta1)
}

// maxPooledBuffer bounds the buffers kept for the next request: enough for
// a real node review, so that no request-sized buffer outlives a large
// request.
const maxPooledBuffer = 128 << 10

func (h *Handler) maxRequestBytes() int64 {
	if h.MaxRequestBytes <= 0 {
		return DefaultMaxRequestBytes
	}
	return h.MaxRequestBytes
}

// tooLarge answers 413 for a body that announces more than the limit,
// before it waits for a slot or reads anything.
func (h *Handler) tooLarge(w http.ResponseWriter, r *http.Request) bool {
	if limit := h.maxRequestBytes(); r.ContentLength > limit {
		h.fail(w, ErrBodyTooLarge, http.StatusRequestEntityTooLarge,
			fmt.Sprintf("request body of %d bytes is larger than %d bytes (--max-request-bytes)", r.ContentLength, limit), nil)
		return true
	}
	return false
}

// errBudget is a body that could not be read within its deadline because
// the body budget stayed spent.
var errBudget = errors.New("body budget spent")

// readChunk is the part of the body budget a read takes before it reads:
// a caller that stops sending holds one chunk at most beyond what it sent.
const readChunk = 32 << 10

// bodyBudget bounds the bytes of request bodies the webhook holds at once,
// being read, waiting for a slot or being decoded: two bodies of the
// largest size per slot. Bodies are read before a slot is taken, so without
// it the number of connections would bound nothing.
func (h *Handler) bodyBudget() *semaphore.Weighted {
	h.budgetOnce.Do(func() {
		h.budget = semaphore.NewWeighted(2 * int64(h.inflight.Cap()) * h.maxRequestBytes())
	})
	return h.budget
}

// readBody reads the request body into a pooled buffer until readBy,
// answering 413 or 400 itself when it cannot; an error wrapping errBudget
// is not answered, and body then holds what was read. release returns the
// buffer and the budget; the body must not be used after it.
func (h *Handler) readBody(w http.ResponseWriter, r *http.Request, readBy time.Time) (body []byte, release func(), err error) {
	budget := h.bodyBudget()
	var held int64
	buf := h.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	release = func() {
		budget.Release(held)
		held = 0
		if buf.Cap() <= maxPooledBuffer {
			h.bufs.Put(buf)
		}
	}
	limit := h.maxRequestBytes()
	ctx, cancel := context.WithDeadline(r.Context(), readBy)
	defer cancel()
	in := http.MaxBytesReader(w, r.Body, limit)
	for {
		// The first peekBytes are read without the budget, so that a review
		// answered for want of budget still carries its UID: a connection
		// holds that much anyway in net/http's own buffers. Past them the
		// buffer grows only by what the budget granted; its doubling may
		// take up to as much again, which the factor two allows for.
		chunk := int64(peekBytes - buf.Len())
		if chunk <= 0 {
			chunk = readChunk
			if err := budget.Acquire(ctx, chunk); err != nil {
				return buf.Bytes(), release, fmt.Errorf("%w: %w", errBudget, err)
			}
			held += chunk
		}
		buf.Grow(int(chunk))
		n, err := in.Read(buf.AvailableBuffer()[:chunk])
		buf.Write(buf.AvailableBuffer()[:n])
		if held > 0 {
			budget.Release(chunk - int64(n))
			held -= chunk - int64(n)
		}
		if err == io.EOF {
			return buf.Bytes(), release, nil
		}
		if err == nil {
			continue
		}
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			h.fail(w, ErrBodyTooLarge, http.StatusRequestEntityTooLarge,
				fmt.Sprintf("request body larger than %d bytes (--max-request-bytes)", limit), err)
			return nil, release, err
		}
		h.fail(w, ErrReadBody, http.StatusBadRequest, "reading request body: "+err.Error(), err)
		return nil, release, err
	}
}

var jsonPatchType = admissionv1.PatchTypeJSONPatch

// answer writes an allowed AdmissionReview in the version of the request (v1
// when unknown), with patch when not nil.
func (h *Handler) answer(w http.ResponseWriter, st *reviewState, patch []byte) {
	resp := &admissionv1.AdmissionResponse{UID: st.uid, Allowed: true}
	if patch != nil {
		resp.PatchType, resp.Patch = &jsonPatchType, patch
	}
	h.respond(w, st, resp)
}

// deny answers allowed=false with the mutator's message, code 403 and
// reason Forbidden, and counts it under each of its reasons.
func (h *Handler) deny(w http.ResponseWriter, st *reviewState, d *denial) {
	for _, r := range d.reasons {
		h.metrics.denials.WithLabelValues(r).Inc()
	}
	logrus.WithFields(logrus.Fields{"uid": truncated(string(st.uid)), "name": st.name, "reasons": d.reasons}).Info("denied: " + truncated(d.message))
	h.respond(w, st, &admissionv1.AdmissionResponse{UID: st.uid, Result: &metav1.Status{
		Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: d.message,
	}})
}

// respond writes resp in an AdmissionReview of the request's version.
func (h *Handler) respond(w http.ResponseWriter, st *reviewState, resp *admissionv1.AdmissionResponse) {
	st.answered = true
	apiVersion := st.apiVersion
	if apiVersion == "" {
		apiVersion = admissionV1
	}
	out := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "AdmissionReview"},
		Response: resp,
	}
	b, err := json.Marshal(&out)
	if err != nil { // cannot happen: strings, a bool and bytes
		h.fail(w, ErrEncode, http.StatusInternalServerError, "encoding the answer: "+err.Error(), err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

// problem counts and logs (a few lines a second, see logsample) an error
// answered allowed unchanged, or denied
// when failClosed.
func (h *Handler) problem(st *reviewState, kind string, err error, failClosed bool) {
	h.metrics.errors.WithLabelValues(kind).Inc()
	msg := "cannot mutate the object; allowing the request unchanged"
	if failClosed {
		msg = "cannot mutate the object; denying the request"
	}
	if log, ok := h.problemLogs.Allow(logrus.WithFields(logrus.Fields{"uid": truncated(string(st.uid)), "name": st.name, "kind": kind, logrus.ErrorKey: truncated(err.Error())})); ok {
		log.Warn(msg)
	}
}

// fail answers with an HTTP error (the apiserver applies failurePolicy Ignore).
func (h *Handler) fail(w http.ResponseWriter, kind string, code int, msg string, err error) {
	h.metrics.errors.WithLabelValues(kind).Inc()
	log, ok := h.failLogs.Allow(logrus.WithFields(logrus.Fields{"kind": kind, "code": code}))
	if ok && err != nil && !strings.Contains(msg, err.Error()) {
		log = log.WithField(logrus.ErrorKey, truncated(err.Error()))
	}
	if ok {
		log.Warn(truncated(msg))
	}
	http.Error(w, msg, code)
}
