// Package plugin is kube-reclaim's placement as a scheduling-framework
// plugin, for the kube-reclaim-scheduler binary: the same placement core as
// the HTTP extender (package placement), called in process.
//
//   - PreFilter reads the pod's reclaimed request once per cycle; pods that
//     ask none skip the plugin.
//   - Filter passes the nodes whose published room, less what is held and
//     assumed there, fits the request, and fails the others with the
//     placement core's messages, which the Pending pod's FailedScheduling
//     event shows.
//   - Score ranks them by the room left (spread or binpack).
//   - Reserve assumes the room atomically, Unreserve gives it back. The
//     default binder binds: the pod webhook already enforces the grant, and
//     the scheduler's own cache follows the pod from there.
package plugin

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-base/metrics/legacyregistry"
	fwk "k8s.io/kube-scheduler/framework"
	"k8s.io/kubernetes/pkg/scheduler/framework"
	frameworkruntime "k8s.io/kubernetes/pkg/scheduler/framework/runtime"

	"github.com/kube-reclaim/kube-reclaim/enforcement"
	"github.com/kube-reclaim/kube-reclaim/internal/leaderlease"
	"github.com/kube-reclaim/kube-reclaim/placement"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Name is the plugin's name in the scheduler's profile.
const Name = "KubeReclaim"

// Defaults of Args.
const (
	// DefaultAssumeTimeout is how long a bound pod's room stays assumed
	// while the pod informer has not shown it bound, as the extender's
	// --assume-timeout.
	DefaultAssumeTimeout = 30 * time.Second
	// bindGrace bounds how long a reservation lives before its binding
	// cycle ends (Permit, PreBind, the Binding call); Unreserve ends it
	// earlier when the binding cycle fails.
	bindGrace = 30 * time.Second
	// syncWait bounds how long New waits for the publisher lease informer;
	// the scheduler's own informers are waited for by the scheduler.
	syncWait = 30 * time.Second
)

// Args are the plugin's arguments (pluginConfig), with the meaning of the
// extender's flags of the same names.
type Args struct {
	// ResourceDomain names the reclaimed resources and the node
	// annotation (--resource-domain).
	ResourceDomain string `json:"resourceDomain,omitempty"`
	// Strategy is spread or binpack.
	Strategy string `json:"strategy,omitempty"`
	// StaleAfter: an annotation written longer ago counts as zero.
	StaleAfter metav1.Duration `json:"staleAfter,omitempty"`
	// AssumeTimeout ends an assumption the informer has not confirmed.
	AssumeTimeout metav1.Duration `json:"assumeTimeout,omitempty"`
	// PublisherLeaseNamespace/Name: the publisher's leader Lease; while it
	// is not renewed every node counts as zero. Name "-" disables the check.
	PublisherLeaseNamespace string `json:"publisherLeaseNamespace,omitempty"`
	PublisherLeaseName      string `json:"publisherLeaseName,omitempty"`
}

// defaults fills what a is missing and checks it, every problem at once.
func (a *Args) defaults() (reclaimable.Names, error) {
	var errs []error
	if a.ResourceDomain == "" {
		a.ResourceDomain = reclaimable.DefaultDomain
	}
	names, err := reclaimable.NewNames(a.ResourceDomain)
	if err != nil {
		errs = append(errs, fmt.Errorf("resourceDomain: %w", err))
	}
	if a.Strategy == "" {
		a.Strategy = placement.StrategySpread
	}
	if a.Strategy != placement.StrategySpread && a.Strategy != placement.StrategyBinpack {
		errs = append(errs, fmt.Errorf("strategy: %q is neither %s nor %s", a.Strategy, placement.StrategySpread, placement.StrategyBinpack))
	}
	if a.StaleAfter.Duration == 0 {
		a.StaleAfter.Duration = reclaimable.DefaultStaleAfter
	}
	if a.AssumeTimeout.Duration == 0 {
		a.AssumeTimeout.Duration = DefaultAssumeTimeout
	}
	if a.StaleAfter.Duration < 0 || a.AssumeTimeout.Duration < 0 {
		errs = append(errs, fmt.Errorf("staleAfter (%s) and assumeTimeout (%s) must be positive", a.StaleAfter.Duration, a.AssumeTimeout.Duration))
	}
	if a.PublisherLeaseNamespace == "" {
		a.PublisherLeaseNamespace = leaderlease.DefaultNamespace
	}
	if a.PublisherLeaseName == "" {
		a.PublisherLeaseName = leaderlease.DefaultName
	}
	return names, errors.Join(errs...)
}

// Plugin places reclaimed pods (see the package comment).
type Plugin struct {
	args    Args
	names   reclaimable.Names
	cache   *placement.Cache
	tracker *leaderlease.Tracker
	// synced reports whether the pod and node handlers and the lease
	// tracker have seen their initial lists: an incomplete cache would
	// under-count held room and over-book nodes.
	synced   func() bool
	metrics  *metrics
	mismatch string
}

var (
	_ framework.PreFilterPlugin = (*Plugin)(nil)
	_ framework.FilterPlugin    = (*Plugin)(nil)
	_ framework.ScorePlugin     = (*Plugin)(nil)
	_ framework.ReservePlugin   = (*Plugin)(nil)
)

// one is the process's plugin: every profile of the scheduler shares its
// cache, so a pod reserved by one profile holds its room for the others.
var one struct {
	sync.Mutex
	p *Plugin
}

// New builds the plugin (the scheduler's PluginFactory).
func New(ctx context.Context, obj runtime.Object, h framework.Handle) (framework.Plugin, error) {
	var args Args
	if obj != nil {
		if err := frameworkruntime.DecodeInto(obj, &args); err != nil {
			return nil, fmt.Errorf("%s args: %w", Name, err)
		}
	}
	names, err := args.defaults()
	if err != nil {
		return nil, fmt.Errorf("%s args: %w", Name, err)
	}
	one.Lock()
	defer one.Unlock()
	if one.p != nil {
		if one.p.args != args {
			return nil, fmt.Errorf("%s args differ between profiles (%+v, %+v): the profiles share one placement cache", Name, one.p.args, args)
		}
		return one.p, nil
	}
	p, err := newPlugin(ctx, args, names, h, legacyregistry.Registerer())
	if err != nil {
		return nil, err
	}
	one.p = p
	return p, nil
}

func newPlugin(ctx context.Context, args Args, names reclaimable.Names, h framework.Handle, reg prometheus.Registerer) (*Plugin, error) {
	m := newMetrics(reg)
	var tracker *leaderlease.Tracker
	if args.PublisherLeaseName != "-" {
		tracker = leaderlease.New(h.ClientSet(), args.PublisherLeaseNamespace, args.PublisherLeaseName)
	}
	p := &Plugin{args: args, names: names, tracker: tracker, metrics: m, mismatch: placement.MismatchMessage(names)}
	p.cache = placement.NewCache(args.StaleAfter.Duration, args.AssumeTimeout.Duration, bindGrace, tracker.Alive, m.cache)
	pods, err := h.SharedInformerFactory().Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { p.setPod(obj) },
		UpdateFunc: func(oldObj, obj any) {
			// Keyed by namespace/name: a pod recreated under its name while
			// the watch was down comes as an update of the old one.
			if o, ok := oldObj.(*corev1.Pod); ok {
				if n, ok := obj.(*corev1.Pod); ok && o.UID != n.UID {
					p.cache.DeletePod(o.UID)
				}
			}
			p.setPod(obj)
		},
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				p.cache.DeletePod(pod.UID)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	nodes, err := h.SharedInformerFactory().Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.setNode(obj) },
		UpdateFunc: func(_, obj any) { p.setNode(obj) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			if n, ok := obj.(*corev1.Node); ok {
				p.cache.DeleteNode(n.Name)
			}
		},
	})
	if err != nil {
		return nil, err
	}
	p.synced = func() bool { return pods.HasSynced() && nodes.HasSynced() && tracker.HasSynced() }
	if tracker != nil {
		go tracker.Run(ctx)
		wctx, cancel := context.WithTimeout(ctx, syncWait)
		defer cancel()
		if !cache.WaitForCacheSync(wctx.Done(), tracker.HasSynced) {
			logrus.WithField("lease", args.PublisherLeaseNamespace+"/"+args.PublisherLeaseName).
				Warn("publisher lease informer not synced yet; reclaimed pods wait until it is")
		}
	}
	go p.cache.RunExpiry(ctx, p.cache.ExpiryInterval())
	logrus.WithFields(logrus.Fields{"plugin": Name, "strategy": args.Strategy, "staleAfter": args.StaleAfter.Duration,
		"resourceDomain": args.ResourceDomain}).Info("placement plugin ready")
	return p, nil
}

func (p *Plugin) setPod(obj any) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	req, _ := p.names.PodRequest(pod)
	p.cache.SetPod(placement.Pod{UID: pod.UID, NodeName: pod.Spec.NodeName, Req: req,
		Terminal: pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed})
}

func (p *Plugin) setNode(obj any) {
	if n, ok := obj.(*corev1.Node); ok {
		p.cache.SetNode(placement.NodeOf(p.names.Annotation, n))
	}
}

// Name is the plugin's name.
func (p *Plugin) Name() string { return Name }

// stateKey holds the pod's request in the cycle state.
const stateKey fwk.StateKey = Name + "/request"

type request struct{ req reclaimable.Resources }

// Clone shares the request: it never changes within a cycle.
func (r *request) Clone() fwk.StateData { return r }

// PreFilter reads the pod's reclaimed request. A pod that asks none skips
// the plugin; one that can never be placed on reclaimed capacity (requests
// differ from limits, or the webhook's limits are missing) is unresolvable.
func (p *Plugin) PreFilter(_ context.Context, state fwk.CycleState, pod *corev1.Pod, _ []fwk.NodeInfo) (*framework.PreFilterResult, *fwk.Status) {
	req, mismatch := p.names.PodRequest(pod)
	switch {
	case req.IsZero() && !mismatch:
		return nil, fwk.NewStatus(fwk.Skip)
	case mismatch:
		p.metrics.filtered[placement.RLimitsMismatch].Inc()
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable, p.mismatch)
	case !p.synced():
		return nil, fwk.AsStatus(errors.New("the reclaimed-capacity cache has not synced yet (pod, node and publisher lease informers)"))
	}
	if err := enforcement.Enforced(&pod.Spec, p.names); err != nil {
		p.metrics.filtered[placement.RNotEnforced].Inc()
		return nil, fwk.NewStatus(fwk.UnschedulableAndUnresolvable,
			err.Error()+" (refused by the "+Name+" plugin: without native limits kubelet would not hold the pod to its grant)")
	}
	state.Write(stateKey, &request{req: req})
	return nil, nil
}

// PreFilterExtensions: the room of a node does not depend on the other
// pods the framework adds or removes when it simulates preemption (they
// hold native resources; reclaimed pods are never preempted for room).
func (p *Plugin) PreFilterExtensions() framework.PreFilterExtensions { return nil }

func requestOf(state fwk.CycleState) (reclaimable.Resources, error) {
	d, err := state.Read(stateKey)
	if err != nil {
		return reclaimable.Resources{}, err
	}
	r, ok := d.(*request)
	if !ok {
		return reclaimable.Resources{}, fmt.Errorf("%s cycle state holds %T", Name, d)
	}
	return r.req, nil
}

// Filter fails the node when the room left there does not fit the pod.
func (p *Plugin) Filter(_ context.Context, state fwk.CycleState, _ *corev1.Pod, ni fwk.NodeInfo) *fwk.Status {
	req, err := requestOf(state)
	if err != nil {
		return fwk.AsStatus(err)
	}
	st := p.cache.State(ni.Node().Name)
	if placement.Fits(st, req) {
		return nil
	}
	msg, id := placement.Failure(st, req)
	p.metrics.filtered[id].Inc()
	return fwk.NewStatus(fwk.Unschedulable, msg)
}

// Score ranks a node by the room left after placing the pod.
func (p *Plugin) Score(_ context.Context, state fwk.CycleState, _ *corev1.Pod, ni fwk.NodeInfo) (int64, *fwk.Status) {
	req, err := requestOf(state)
	if err != nil {
		return 0, fwk.AsStatus(err)
	}
	return placement.Score(p.args.Strategy, p.cache.State(ni.Node().Name), req, framework.MaxNodeScore), nil
}

// ScoreExtensions: scores are already within 0..MaxNodeScore.
func (p *Plugin) ScoreExtensions() framework.ScoreExtensions { return nil }

// Reserve assumes the pod's room on the node, atomically with the check
// that it is still there.
func (p *Plugin) Reserve(_ context.Context, state fwk.CycleState, pod *corev1.Pod, node string) *fwk.Status {
	req, err := requestOf(state)
	if err != nil {
		return nil // PreFilter skipped the pod: it asks no reclaimed room
	}
	_, err = p.cache.Assume(pod.UID, pod.Namespace+"/"+pod.Name, node, req)
	var c *placement.Conflict
	switch {
	case errors.As(err, &c):
		p.metrics.conflicts.WithLabelValues(c.Reason).Inc()
		return fwk.NewStatus(fwk.Unschedulable, c.Message)
	case err != nil:
		return fwk.AsStatus(err)
	}
	return nil
}

// Unreserve gives the room back: the binding cycle failed.
func (p *Plugin) Unreserve(_ context.Context, _ fwk.CycleState, pod *corev1.Pod, _ string) {
	p.cache.Forget(pod.UID)
}
