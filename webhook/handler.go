package webhook

import (
	"bytes"
	"net/http"
	"sync"
	"time"

	"github.com/gorilla/mux"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/semaphore"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/kube-reclaim/kube-reclaim/internal/logsample"
	"github.com/kube-reclaim/kube-reclaim/internal/serving"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Path is the URL path of the node status webhook.
const Path = "/mutate-node-status"

// DefaultMaxRequestBytes bounds the request body. A stored object is at most
// about 1.5 MiB (etcd's default request limit) and a review carries object
// and oldObject, so a larger body cannot be a real review.
const DefaultMaxRequestBytes int64 = 3 << 20

// Handler is the mutating admission webhook: one route per kind of object,
// all sharing the review decoding and answering of review.go. It needs no
// cluster: everything it decides comes from the request object, the clock
// and the liveness function.
type Handler struct {
	metrics *metrics
	router  *mux.Router
	nodes   *nodeMutator
	pods    *podMutator

	// MaxRequestBytes bounds the request body (413 above it). Set it before
	// serving; zero or negative means DefaultMaxRequestBytes.
	MaxRequestBytes int64

	inflight *inflight
	bufs     sync.Pool // *bytes.Buffer for request bodies
	// budget bounds the body bytes held at once (readBody); made at the
	// first request, from the slots and MaxRequestBytes.
	budgetOnce sync.Once
	budget     *semaphore.Weighted

	// busyLogs, problemLogs and failLogs bound the lines that requests
	// answered busy, unprocessable or refused can cause; the metrics count
	// each of them.
	busyLogs, problemLogs, failLogs *logsample.Sampler
}

// SetMaxInFlight bounds the reviews read and decoded at once, nodes and
// pods together (n <= 0: DefaultMaxInFlight). Call it before serving.
func (h *Handler) SetMaxInFlight(n int) { h.inflight = newInflight(n) }

// SetOversell turns native oversell on (the default: nodes opt in with a
// label) or off (every ratio is ignored and inflated nodes are restored).
// Call it before serving.
func (h *Handler) SetOversell(on bool) { h.nodes.oversell = on }

// SetPodRewriter installs r to run on every reviewed pod before it is
// enforced (nil: none). Call it before serving.
func (h *Handler) SetPodRewriter(r PodRewriter) { h.pods.rewriter = r }

// NewHandler returns the webhook handler. alive reports whether the
// publisher's leader lease is alive at an instant (nil: always alive; pass
// (*leaderlease.Tracker).Alive). reg receives the webhook's metrics (nil: a
// private registry). The handler serves POST Path (nodes) and POST PodPath
// (pods) and answers 404/405 elsewhere.
func NewHandler(names reclaimable.Names, staleAfter time.Duration, alive func(time.Time) bool, reg prometheus.Registerer) *Handler {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	h := &Handler{metrics: newMetrics(reg), inflight: newInflight(DefaultMaxInFlight),
		busyLogs: logsample.Default(), problemLogs: logsample.Default(), failLogs: logsample.Default()}
	h.bufs.New = func() any { return new(bytes.Buffer) }
	h.nodes = newNodeMutator(names, staleAfter, alive, h.metrics)

	rm := serving.NewRequestMetrics(reg, "webhook")
	h.router = mux.NewRouter()
	nodes := &reviewServer[nodeObject, *nodeObject]{h: h, gk: schema.GroupKind{Kind: "Node"}, mutator: h.nodes, durations: h.metrics.nodes,
		route: RouteNodes, timeout: time.Duration(TimeoutSeconds) * time.Second}
	h.router.Handle(Path, rm.Wrap(Path, nodes)).Methods(http.MethodPost)
	h.pods = &podMutator{names: names, metrics: h.metrics}
	// The pod route fails closed like its failurePolicy: a pod it cannot
	// process is refused rather than run without limits.
	pods := &reviewServer[podObject, *podObject]{h: h, gk: schema.GroupKind{Kind: "Pod"}, mutator: h.pods, durations: h.metrics.pods, failClosed: true,
		route: RoutePods, timeout: time.Duration(PodTimeoutSeconds) * time.Second}
	h.router.Handle(PodPath, rm.Wrap(PodPath, pods)).Methods(http.MethodPost)
	return h
}

// ServeHTTP routes a review to the server of its kind.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.router.ServeHTTP(w, r) }
